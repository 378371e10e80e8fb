//go:build lkl

package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The in-process trap tier (--syscall-mode=trap, package trap) runs real
// guest programs from the image inside kbox's own process. Each case
// checks output and exit status; kbox before the trap tier refused the
// option (exit status 125), so every case fails there.
func TestTrapGuests(t *testing.T) {
	img := copyImage(t, imagePath(t))
	host, _ := os.Hostname()
	runCases(t, []string{"image", "-S", img, "--syscall-mode=trap"}, []guestCase{
		{"static musl program", []string{"--", "/opt/tests/hello"}, 0, []string{"hello from kbox guest"}, nil},
		{"dynamic glibc program", []string{"--", "/bin/echo", "hi", "there"}, 0, []string{"hi there\n"}, nil},
		{"image hostname, not the host's", []string{"--", "/bin/cat", "/etc/hostname"}, 0, []string{"kbox-rootfs"}, []string{host + "\n"}},
		{"coreutils ls -l", []string{"--", "/usr/bin/ls", "-l", "/etc/hostname", "/opt/tests/hello"}, 0, []string{"-rw-r--r--", "root root", "/etc/hostname", "-rwxr-xr-x", "/opt/tests/hello"}, nil},
		{"coreutils sort over image files", []string{"--", "/usr/bin/sort", "/etc/hostname", "/etc/passwd"}, 0, []string{"kbox-rootfs\nkbox:x:1000"}, nil},
		{"root identity", []string{"--", "/usr/bin/id"}, 0, []string{"uid=0(root) gid=0(root)"}, nil},
		{"kernel release from LKL", []string{"--", "/bin/uname", "-r"}, 0, []string{"6.0"}, nil},
		{"machine is the host's, not LKL's", []string{"--", "/bin/uname", "-m"}, 0, []string{hostMachine(t) + "\n"}, []string{"lkl"}},
		{"proc self exe names the image program", []string{"--", "/bin/readlink", "/proc/self/exe"}, 0, []string{"/usr/bin/readlink\n"}, nil},
		{"shell builtins and exit status", []string{"-c", "echo in-shell; exit 7"}, 7, []string{"in-shell\n"}, nil},
		{"killed by its own signal", []string{"--", "/opt/tests/kill_self"}, -1, nil, []string{"goroutine"}},
		{"path escape with ..", []string{"--", "/bin/cat", "/../../../../etc/hostname"}, 0, []string{"kbox-rootfs"}, []string{host + "\n"}},
		{"file written and read back", []string{"-c", "echo one > /root/t; echo two >> /root/t; read a < /root/t; echo got $a"}, 0, []string{"got one"}, nil},
		{"proc root stays in the guest", []string{"--", "/bin/cat", "/proc/self/root/etc/hostname"}, 0, []string{"kbox-rootfs"}, []string{host + "\n"}},
		{"pid 1 is no guest process", []string{"--", "/bin/ls", "/proc/1/cwd/"}, 2, nil, []string{"not supported", "goroutine"}},
		{"denied syscall gets EPERM", []string{"-c", "exec 2>&1; exec swapoff /tmp/nothing"}, 1, []string{"swapoff: /tmp/nothing: Operation not permitted"}, nil},
		{"missing command", []string{"--", "/no/such/program"}, 127, nil, nil},
		{"corrupt ELF", []string{"--", "/opt/tests/badelf"}, 126, nil, []string{"goroutine"}},
		{"exec chain: shell, env, glibc echo", []string{"-c", "echo first; exec /usr/bin/env X=1 /bin/sh -c 'echo $X; exec /bin/echo last'"}, 0, []string{"first\n1\nlast\n"}, nil},
		{"close-on-exec across an in-process exec", []string{"--", "/opt/tests/cloexec"}, 0, []string{"cloexec ok"}, nil},
		{"failed exec returns to the old program", []string{"--", "/bin/bash", "-c", "shopt -s execfail; exec /no/such/thing; echo st=$?; exec /opt/tests/badelf; echo st=$?"}, 0, []string{"st=127\n", "st=126\n"}, nil},
		{"pthreads doing file work", []string{"--", "/opt/tests/trapguard", "thread"}, 0, []string{"threads: 4 joined, 2400 bytes read", "thread: hostname kbox-rootfs"}, nil},
	})
}

// exec of a #! script inside the guest: the interpreter runs with the
// script's path and the arguments, as the kernel's binfmt_script does, and
// the script execs on.
func TestTrapExecScript(t *testing.T) {
	img := copyImage(t, imagePath(t))
	script := filepath.Join(t.TempDir(), "chain.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh -e\necho script $0 $1 $2\nexec /bin/echo end-of-chain\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"write " + script + " /root/chain.sh", "sif /root/chain.sh mode 0100755"} {
		if out, err := exec.Command("debugfs", "-w", "-R", cmd, img).CombinedOutput(); err != nil {
			t.Fatalf("debugfs %s: %v %s", cmd, err, out)
		}
	}
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--syscall-mode=trap", "--", "/bin/bash", "-c", "exec /root/chain.sh a b")
	if status != 0 || stdout != "script /root/chain.sh a b\nend-of-chain\n" {
		t.Errorf("status %d\nstdout: %q\nstderr: %s", status, stdout, stderr)
	}
}

// The observatory sees the trap tier's syscalls as the seccomp tier's
// (the engine's Serve): --stats counts them, and it still reaches kbox's
// stderr after the guest (glibc cat) closed its own fds 1 and 2, which
// are kbox's numbers too; --trace-format json lists them.
func TestTrapObservatory(t *testing.T) {
	img := imagePath(t)
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=trap", "--stats", "--", "/bin/cat", "/etc/hostname")
	if status != 0 || stdout != "kbox-rootfs\n" || !strings.Contains(stderr, "kbox stats:") ||
		!regexp.MustCompile(`(?m)^openat +257 +[1-9]`).MatchString(stderr) || !regexp.MustCompile(`(?m)^exit_group +231 +1 `).MatchString(stderr) {
		t.Errorf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	stdout, stderr, status = runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=trap", "--trace-format", "json", "--", "/bin/cat", "/etc/hostname")
	if status != 0 || stdout != "kbox-rootfs\n" || !strings.Contains(stderr, `"name":"openat"`) || !strings.Contains(stderr, `"path":"/etc/hostname"`) {
		t.Errorf("status %d\nstdout: %s\nstderr: %s", status, stdout, lastLines(stderr, 5))
	}
}

// Identity options hold in the trap tier: the guest runs as uid 1000,
// and LKL refuses it root's directory.
func TestTrapChangeID(t *testing.T) {
	img := imagePath(t)
	stdout, stderr, status := runKbox(t, "image", "-R", img, "--read-only", "--syscall-mode=trap", "--change-id", "1000:1000", "--", "/usr/bin/id")
	if status != 0 || stdout != "uid=1000(kbox) gid=1000(kbox) groups=1000(kbox)\n" {
		t.Errorf("id: status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	stdout, stderr, status = runKbox(t, "image", "-R", img, "--read-only", "--syscall-mode=trap", "--change-id", "1000:1000", "--", "/bin/ls", "/root")
	if status != 2 || !strings.Contains(stderr, "cannot open directory '/root': Permission denied") {
		t.Errorf("ls /root: status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
}

// A new process cannot share kbox's: fork is refused with ENOSYS and a
// message naming the seccomp tier, and the guest goes on (busybox sh
// reports it cannot fork and exits 2).
func TestTrapForkRefused(t *testing.T) {
	img := imagePath(t)
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=trap", "-c", "echo before; /bin/true | /bin/true; echo after")
	if status != 2 || stdout != "before\n" || !strings.Contains(stderr, "use --syscall-mode=seccomp") || !strings.Contains(stderr, "can't fork: Function not implemented") {
		t.Errorf("status %d, want 2\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
}

// The guard on kbox's fds: close, dup2, dup3 and close_range at and above
// the guest's RLIMIT_NOFILE (where kbox's own fds are, LKL's disk among
// them) get EBADF as they do natively, and kbox keeps working after
// (/etc/hostname is read through LKL). The output must equal a native run
// but for the hostname.
func TestTrapFDGuard(t *testing.T) {
	img := imagePath(t)
	native := nativeOutput(t, img, "/opt/tests/trapguard", "fds")
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=trap", "--", "/opt/tests/trapguard", "fds")
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	want := strings.Replace(native, "fds: hostname "+hostHostname(t), "fds: hostname kbox-rootfs", 1)
	if stdout != want {
		t.Errorf("under kbox:\n%s\nnatively (hostname replaced):\n%s\nstderr: %s", stdout, want, stderr)
	}
}

// The fd guard on every call with an fd argument, in whichever argument
// (sendfile's and tee's second, splice's, copy_file_range's and
// epoll_ctl's third, linkat's and renameat's new directory fd): given an
// fd the guest closed, or any number from its RLIMIT_NOFILE up (kbox's
// own fds in the in-process tiers: its LKL disk, Go's epoll, pipes, a
// pidfd), each call gets EBADF as it does natively, the guest's own fds
// still work in those arguments, and kbox keeps working. Both in-process
// tiers' output must equal a native run.
func TestTrapFDGuardEveryCall(t *testing.T) {
	img := imagePath(t)
	native := nativeOutput(t, img, "/opt/tests/fdguard")
	if strings.Contains(native, "FAIL") || !strings.Contains(native, "fdguard: ") {
		t.Fatalf("native run:\n%s", native)
	}
	for _, mode := range []string{"trap", "rewrite"} {
		stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+mode, "--", "/opt/tests/fdguard")
		if status != 0 || stdout != native {
			t.Errorf("%s: status %d\nunder kbox:\n%s\nnatively:\n%s\nstderr: %s", mode, status, stdout, native, lastLines(stderr, 10))
		}
	}
}

// The memory guard: the guest finds kbox's text and data in
// /proc/self/maps (it shares kbox's address space) and tries to unmap,
// map over, protect, advise away and remap them: each is refused with
// EPERM, kbox goes on serving (the file read after), and the guest's own
// memory stays its own to change.
func TestTrapMemoryGuard(t *testing.T) {
	img := imagePath(t)
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=trap", "--", "/opt/tests/trapguard", "mem")
	want := "munmap kbox text: EPERM\n" +
		"mmap MAP_FIXED over kbox data: EPERM\n" +
		"mprotect kbox data: EPERM\n" +
		"madvise DONTNEED kbox data: EPERM\n" +
		"mremap kbox text: EPERM\n" +
		"own mmap MAP_FIXED: ok\n" +
		"own mprotect: ok\n" +
		"own munmap: ok\n" +
		"mem: hostname kbox-rootfs\n"
	if status != 0 || stdout != want {
		t.Errorf("status %d, want 0\nstdout:\n%s\nwant:\n%s\nstderr: %s", status, stdout, want, stderr)
	}
	if !strings.Contains(stderr, "refused (EPERM)") {
		t.Errorf("no message about the refusal on stderr: %s", stderr)
	}
}

// A guest segfault kills kbox with SIGSEGV, as the guest died (a shell
// reports 139), after the guest's output: no Go trace, no core of kbox.
func TestTrapGuestSegfault(t *testing.T) {
	img := imagePath(t)
	k := startKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=trap", "--", "/opt/tests/trapguard", "segv")
	k.Wait()
	so, se := k.Stdout(), k.Stderr()
	if ws := k.WaitStatus(); !ws.Signaled() || ws.Signal() != syscall.SIGSEGV || ws.CoreDump() {
		t.Errorf("kbox ended with %v, want killed by SIGSEGV without a core\nstdout: %s\nstderr: %s", ws, so, se)
	}
	if so != "segv: writing through a bad pointer\n" {
		t.Errorf("stdout %q", so)
	}
	if strings.Contains(se, "goroutine") || strings.Contains(se, "SIGSEGV: segmentation violation") {
		t.Errorf("a Go trace on stderr: %s", se)
	}
	// The shell's view.
	out, _ := exec.Command("/bin/sh", "-c", `"$0" image -S "$1" --read-only --syscall-mode=trap -- /opt/tests/trapguard segv >/dev/null 2>&1; echo $?`, kboxBin(t), img).Output()
	if strings.TrimSpace(string(out)) != "139" {
		t.Errorf("the shell saw status %q, want 139", out)
	}
}

// Signals are emulated in-process: handlers with siginfo, raise, a
// blocked signal left pending until unblocked, SIG_IGN, and death by an
// unhandled SIGTERM; as natively.
func TestTrapSignals(t *testing.T) {
	img := imagePath(t)
	native := nativeOutput(t, img, "/opt/tests/trapguard", "signal")
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=trap", "--", "/opt/tests/trapguard", "signal")
	if status != -1 { // killed by SIGTERM, as the guest was
		t.Errorf("status %d, want death by SIGTERM\nstderr: %s", status, stderr)
	}
	want := strings.Replace(native, "signal: hostname "+hostHostname(t), "signal: hostname kbox-rootfs", 1)
	if stdout != want {
		t.Errorf("under kbox:\n%s\nnatively (hostname replaced):\n%s\nstderr: %s", stdout, want, stderr)
	}
}

// A signal sent to a thread while it keeps making served syscalls: every
// call must still be served. kbox used to kick the thread with SIGSYS,
// the signal the filter traps with; a kick pending when the next syscall
// trapped swallowed the trap (a standard signal is not queued twice), and
// the skipped call returned its own number (umask gave 95, openat 257: a
// Go guest's files read back empty or EBADF under load).
// The guest says whether any signal arrived during its calls: under kbox
// they do (its calls are served, and slower), which the test requires;
// natively the 100,000 calls can end before the sender thread runs, so
// the native output is no reference.
func TestTrapSignalDuringSyscalls(t *testing.T) {
	img := imagePath(t)
	const want = "sigtrap ok 100000 signals\n"
	for i := 0; i < 3; i++ {
		stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=trap", "--", "/opt/tests/sigtrap", "100000")
		if status != 0 || stdout != want {
			t.Fatalf("run %d: status %d, output %q, want %q\nstderr: %s", i, status, stdout, want, stderr)
		}
	}
}

// Signals sent to kbox's pid from outside reach the guest: SIGTERM runs
// the guest's handler (pause returns EINTR) and the guest goes on;
// SIGINT with no handler kills the guest, and kbox dies of it.
func TestTrapSignalFromOutside(t *testing.T) {
	img := imagePath(t)
	for _, c := range []struct {
		sig    syscall.Signal
		want   string
		killed bool
	}{
		{syscall.SIGTERM, "ready\npause: EINTR, handler saw 15\nwait: hostname kbox-rootfs\n", false},
		{syscall.SIGINT, "ready\n", true},
	} {
		k := startKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=trap", "--", "/opt/tests/trapguard", "wait")
		if l := k.Line(); l != "ready" {
			t.Fatalf("%v: guest not ready: %q\nstderr: %s", c.sig, l, k.Stderr())
		}
		time.Sleep(100 * time.Millisecond) // into pause()
		k.cmd.Process.Signal(c.sig)
		st := k.Wait()
		if got := k.Stdout(); got != c.want {
			t.Errorf("%v: stdout %q, want %q\nstderr: %s", c.sig, got, c.want, k.Stderr())
		}
		switch {
		case c.killed && st != 128+int(c.sig):
			t.Errorf("%v: kbox ended with status %d, want killed by %v\nstderr: %s", c.sig, st, c.sig, k.Stderr())
		case !c.killed && st != 0:
			t.Errorf("%v: kbox: status %d\nstderr: %s", c.sig, st, k.Stderr())
		}
	}
}

// The hostile pointers of TestHostilePointers, in the trap tier: every
// bad address the guest passes gets the errno it gets natively (EFAULT),
// never a crash of kbox, whose memory it now shares.
func TestTrapHostilePointers(t *testing.T) {
	img := imagePath(t)
	prog := dumpFromImage(t, img, "/opt/tests/badptr")
	native, err := exec.Command(prog).Output()
	if err != nil {
		t.Fatalf("native run: %v", err)
	}
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=trap", "--", "/opt/tests/badptr")
	if status != 0 || stdout != string(native) {
		t.Errorf("status %d\nunder kbox:\n%s\nnatively:\n%s\nstderr: %s", status, stdout, native, stderr)
	}
}

// nativeOutput runs a static guest program copied out of the image on
// the host.
func nativeOutput(t *testing.T, img, guestPath string, args ...string) string {
	t.Helper()
	prog := dumpFromImage(t, img, guestPath)
	cmd := exec.Command(prog, args...)
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("native run: %v", err)
	}
	return string(out)
}

func hostHostname(t *testing.T) string {
	b, err := os.ReadFile("/etc/hostname")
	if err != nil {
		h, _ := os.Hostname()
		return h
	}
	return strings.TrimSpace(string(b))
}
