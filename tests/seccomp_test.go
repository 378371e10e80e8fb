//go:build lkl

package tests

import (
	"os"
	"strings"
	"testing"
)

// Each case runs a real guest program from the image through the seccomp
// tier and checks its output and exit status.
func TestSeccompGuests(t *testing.T) {
	img := copyImage(t, imagePath(t))
	host, _ := os.Hostname()
	// The seccomp tier asked for: auto would run the programs that cannot
	// fork in the rewrite tier, where a guest killed by a signal kills
	// kbox with it (docs/tiers.md, Trap tier) instead of exit 128+n.
	runCases(t, []string{"image", "-S", img, "--syscall-mode=seccomp"}, []guestCase{
		{"static program", []string{"--", "/opt/tests/hello"}, 0, []string{"hello from kbox guest"}, nil},
		{"image hostname, not the host's", []string{"--", "/bin/cat", "/etc/hostname"}, 0, []string{"kbox-rootfs"}, []string{host + "\n"}},
		{"pipeline", []string{"-c", "echo one two three | wc -w"}, 0, []string{"3"}, nil},
		{"redirection and subshell", []string{"-c", "(cd /tmp && echo in $(pwd)) > /tmp/o; cat /tmp/o"}, 0, []string{"in /tmp"}, nil},
		{"bash script", []string{"-c", "printf '#!/bin/bash\\nfor i in 1 2 3; do echo n$i; done\\necho v${BASH_VERSINFO[0]}\\n' > /tmp/s.sh; chmod +x /tmp/s.sh; /tmp/s.sh"}, 0, []string{"n1", "n2", "n3", "v5"}, nil},
		{"busybox shebang script with argument", []string{"-c", "printf '#!/bin/sh\\necho got $1\\n' > /tmp/b.sh; chmod +x /tmp/b.sh; /tmp/b.sh x1"}, 0, []string{"got x1"}, nil},
		{"dynamic coreutils", []string{"--", "/usr/bin/ls", "-l", "/etc/hostname"}, 0, []string{"-rw-r--r--", "root root", "/etc/hostname"}, nil},
		{"root identity", []string{"--", "/usr/bin/id"}, 0, []string{"uid=0(root) gid=0(root)"}, nil},
		{"kernel release from LKL", []string{"--", "/bin/uname", "-r"}, 0, []string{"6.0"}, nil},
		{"machine is the host's, not LKL's", []string{"--", "/bin/uname", "-m"}, 0, []string{hostMachine(t) + "\n"}, []string{"lkl"}},
		{"proc self exe names the image program", []string{"--", "/bin/readlink", "/proc/self/exe"}, 0, []string{"/usr/bin/readlink\n"}, nil},
		{"exit status", []string{"-c", "exit 7"}, 7, nil, nil},
		{"killed by signal", []string{"--", "/opt/tests/kill_self"}, 128 + 15, nil, nil},
		{"rename over existing", []string{"-c", "echo a > /tmp/a; echo b > /tmp/b; mv /tmp/a /tmp/b; cat /tmp/b; ls /tmp | grep -c '^a$'; true"}, 0, []string{"a\n0\n"}, nil},
		{"append", []string{"-c", "echo one > /root/ap; echo two >> /root/ap; cat /root/ap"}, 0, []string{"one\ntwo\n"}, nil},
		{"close-on-exec", []string{"--", "/opt/tests/cloexec"}, 0, []string{"cloexec ok"}, nil},
		{"dup2 over stdio", []string{"-c", "exec 3>&1; echo via3 >&3; echo to-file > /tmp/d; cat /tmp/d"}, 0, []string{"via3", "to-file"}, nil},
		{"fork/exec storm", []string{"--", "/opt/tests/forkstorm", "100"}, 0, []string{"forkstorm ok 100"}, nil},
		// sync wrote back every shadow and gave LKL their access times,
		// which changed LKL's change times; the next program's opens
		// then reloaded its libraries' shadows by truncating them, which
		// discarded bash's relocated pages of the same libraries: bash
		// died of SIGSEGV after any program run after a sync.
		{"sync, then programs", []string{"--", "/bin/bash", "-c", "sync; /usr/bin/ls / >/dev/null; /usr/bin/id -u; echo alive $((6*7))"}, 0, []string{"0\nalive 42\n"}, nil},
		// A shell passes one string as the path and argv[0]: the
		// program's argv[0] is the path as given (it was the staging
		// link's base name, "cat").
		{"argv[0] as a shell gave it", []string{"-c", "/bin/cat /proc/self/cmdline | tr '\\0' ' '; echo; cd /bin && ./cat /proc/self/cmdline | tr '\\0' ' '"}, 0,
			[]string{"/bin/cat /proc/self/cmdline \n./cat /proc/self/cmdline "}, nil},
		// posix_spawn's child shares the parent's memory until it execs:
		// the path string kbox rewrites for the exec must be the
		// parent's own again for its next spawn (it used to get ENOENT),
		// and must not be written back once the parent has put that
		// memory to other use (it was: spawnagain's heap spawns).
		// execveat ignores the directory fd of an absolute path, even -1
		// (it used to be EBADF).
		{"execveat(-1, absolute path)", []string{"--", "/opt/tests/execerr", "-at", "/opt/tests/hello"}, 0, []string{"hello from kbox guest"}, nil},
		{"posix_spawn and system, again and in a burst", []string{"--", "/opt/tests/spawnagain", "3"}, 0, []string{"spawnagain ok 3"}, nil},
		{"fd exhaustion then recovery", []string{"--", "/opt/tests/fdstress"}, 0, []string{"emfile", "recovered"}, nil},
		{"signal race 200/200", []string{"--", "/opt/tests/sigrace", "200"}, 0, []string{"sigrace ok 200"}, nil},
		{"path escape with ..", []string{"-c", "cat /../../../../etc/hostname; cd /; cat ../../etc/hostname"}, 0, []string{"kbox-rootfs\nkbox-rootfs"}, nil},
		// /proc/self/root is the guest's root (a link kbox follows as a
		// guest path: it used to be refused with EACCES), and pid 1 is
		// no guest process: its /proc entry does not exist.
		{"proc root stays in the guest", []string{"-c", "cat /proc/self/root/etc/hostname 2>&1; ls /proc/1/cwd/ 2>&1"}, 1, []string{"kbox-rootfs", "No such file or directory"}, []string{host + "\n"}},
		{"denied syscall gets EPERM", []string{"-c", "swapoff /tmp/nothing 2>&1; echo st=$?"}, 0, []string{"Operation not permitted", "st=1"}, nil},
		{"missing command", []string{"--", "/no/such/program"}, 127, nil, nil},
		{"corrupt ELF", []string{"--", "/opt/tests/badelf"}, 126, nil, nil},
		{"fsync writes a writable shadow back", []string{"--", "/opt/tests/fsyncback", "/root/fs.txt"}, 0, []string{"after fsync\nafter fsync\nafter fdatasync\n"}, nil},
	})
}

// A file written in one run is read in the next, and each read-write run
// leaves the image cleanly unmounted: no journal left to replay, nothing for
// e2fsck to fix.
func TestSeccompPersistence(t *testing.T) {
	img := copyImage(t, imagePath(t))
	if _, stderr, st := runKbox(t, "image", "-S", img, "-c", "echo persisted-data > /root/p.txt"); st != 0 {
		t.Fatalf("write run: %d %s", st, stderr)
	}
	assertCleanImage(t, img)
	out, stderr, st := runKbox(t, "image", "-S", img, "--", "/bin/cat", "/root/p.txt")
	if st != 0 || out != "persisted-data\n" {
		t.Errorf("read run: %d %q %s", st, out, stderr)
	}
	assertCleanImage(t, img)
}

// The corrupt ELF's error is one clear line.
func TestSeccompBadELFMessage(t *testing.T) {
	img := imagePath(t)
	_, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/opt/tests/badelf")
	if st != 126 || !strings.Contains(stderr, "Exec format error") {
		t.Errorf("status %d stderr %q", st, stderr)
	}
}

// TestPythonSubprocessVfork: Python's subprocess spawns with vfork (the
// child shares the parent's memory until it execs) and frees the path's
// bytes at once. kbox wrote the path back into that memory after the
// parent had reused it, and Python crashed (SIGSEGV in its own code, in
// every run of 20 spawns): now the run is as natively, and the parent's
// heap is intact (imports and work after the spawns).
func TestPythonSubprocessVfork(t *testing.T) {
	img := packageImage(t, "python3")
	script := `
import subprocess, json, re, pickle, decimal
for i in range(40):
    r = subprocess.run(["/bin/echo", "spawn%d" % i], capture_output=True)
    assert r.stdout == b"spawn%d\n" % i, r
    json.dumps([{"k": "v" * i}] * 50)
import multiprocessing.synchronize, email.parser, http.client
print("spawned", sum(1 for _ in re.finditer("a", "a" * 40)))
`
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=seccomp", "--", "python3", "-c", script)
	if status != 0 || stdout != "spawned 40\n" {
		t.Fatalf("status %d, stdout %q (want 0 and \"spawned 40\")\nstderr: %s", status, stdout, lastLines(stderr, 10))
	}
}

// TestPythonSocketBeforeConnect: Python's ssl wraps an unconnected
// socket (the pattern of its older docs) by reading one byte from it,
// which must fail at once (ENOTCONN on Linux) or give nothing; kbox's
// guest end said EAGAIN and wrap_socket raised BlockingIOError. Then a
// socket with a timeout (O_NONBLOCK set before connect) connects to a
// server of the guest's own and reads, in each tier: the end that
// replaces the stand-in at connect keeps the fd's flags.
func TestPythonSocketBeforeConnect(t *testing.T) {
	img := packageImage(t, "python3")
	script := `
import socket, ssl, threading
ss = ssl.create_default_context().wrap_socket(socket.socket(), server_hostname="example")
print("wrapped", ss.fileno() >= 0)
l = socket.create_server(("127.0.0.1", 0))
def serve():
    c, _ = l.accept()
    c.sendall(b"hello")
    c.close()
threading.Thread(target=serve).start()
s = socket.socket()
s.settimeout(5)
s.connect(l.getsockname())
print("got", s.recv(5).decode(), s.gettimeout())
`
	forEachTier(t, func(t *testing.T, tier string) {
		stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--", "python3", "-c", script)
		if status != 0 || stdout != "wrapped True\ngot hello 5.0\n" {
			t.Fatalf("status %d, stdout %q\nstderr: %s", status, stdout, lastLines(stderr, 10))
		}
	})
}

// TestPythonVenv: a venv's python finds its environment by its own path,
// argv[0] as the shell gave it (/tmp/v/bin/python3, a link to
// /usr/bin/python3, with pyvenv.cfg one level up). kbox's exec gave the
// program the staging link's base name as argv[0], and the venv's python
// ran as the system's (sys.prefix /usr).
func TestPythonVenv(t *testing.T) {
	img := packageImage(t, "python3")
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--ephemeral", "--", "/bin/sh", "-c",
		`python3 -m venv --without-pip /tmp/v && /tmp/v/bin/python3 -c "import sys; print(sys.prefix)" && cd /tmp/v/bin && ./python3 -c "import sys; print(sys.prefix, sys.orig_argv[0])"`)
	if status != 0 || stdout != "/tmp/v\n/tmp/v ./python3\n" {
		t.Fatalf("status %d, stdout %q (want \"/tmp/v\\n/tmp/v ./python3\\n\")\nstderr: %s", status, stdout, lastLines(stderr, 10))
	}
}
