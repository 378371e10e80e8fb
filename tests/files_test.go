//go:build lkl

package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Files shared between opens behave as one inode, as on Linux: every case
// of tests/guest/coherent.c prints what it saw, natively in a host
// directory and under kbox in the image and in /tmp (the scratch disk),
// and the outputs must be the same.
func TestSharedFileCoherence(t *testing.T) {
	img := copyImage(t, imagePath(t))
	prog := dumpFromImage(t, img, "/opt/tests/coherent")
	cases := []string{"append2", "pwrite", "mapshared", "fstatsize", "truncate", "reader", "sparse"}
	dir := t.TempDir()
	native := map[string]string{}
	for _, c := range cases {
		out, err := exec.Command(prog, c, filepath.Join(dir, "f")).CombinedOutput()
		if err != nil {
			t.Fatalf("native %s: %v\n%s", c, err, out)
		}
		native[c] = string(out)
	}
	for _, where := range []string{"/root", "/tmp"} {
		var script strings.Builder
		for _, c := range cases {
			fmt.Fprintf(&script, "echo '== %s'; /opt/tests/coherent %s %s/f || echo status $?\n", c, c, where)
		}
		out, stderr, st := runKbox(t, "image", "-S", img, "--", "/bin/sh", "-c", script.String())
		if st != 0 {
			t.Fatalf("%s: status %d\n%s\n%s", where, st, out, stderr)
		}
		for _, part := range strings.Split(out, "== ")[1:] {
			name, got, _ := strings.Cut(part, "\n")
			if got != native[name] {
				t.Errorf("%s in %s: under kbox\n%snatively\n%s", name, where, got, native[name])
			}
		}
	}
}

// Four processes appending to one file lose nothing, as O_APPEND
// guarantees on Linux; in the image and in /tmp, with busybox sh and bash.
func TestConcurrentAppends(t *testing.T) {
	img := copyImage(t, imagePath(t))
	for _, sh := range []string{"/bin/sh", "/bin/bash"} {
		for _, f := range []string{"/root/log", "/tmp/log"} {
			script := fmt.Sprintf(`rm -f %[1]s
for p in 1 2 3 4; do ( i=0; while [ $i -lt 200 ]; do echo "p$p line $i" >> %[1]s; i=$((i+1)); done ) & done
wait; wc -l < %[1]s; sort %[1]s | uniq | wc -l`, f)
			out, stderr, st := runKbox(t, "image", "-S", img, "--", sh, "-c", script)
			if st != 0 || strings.Fields(out)[0] != "800" || strings.Fields(out)[1] != "800" {
				t.Errorf("%s, %s: status %d, lines and distinct lines %q, want 800 800\n%s", sh, f, st, out, stderr)
			}
		}
	}
	// And it reached the image.
	out, _, _ := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c", "wc -l < /root/log")
	if strings.TrimSpace(out) != "800" {
		t.Errorf("next run sees %q lines, want 800", out)
	}
}

var fillLine = regexp.MustCompile(`fill wrote=(\d+) err=(\S+) fsync=(\S+) close=(\S+) size=(\d+) match=(\d)`)

// A write that the image cannot hold fails with ENOSPC at the write, as on
// Linux, and the file holds exactly what the writes reported; the next run
// finds it so, and the image is clean. With the content store's helper
// process (what a non-root user gets) too. With memfd shadows (where no
// size-limited mount can be made) the error comes at fsync.
func TestImageFull(t *testing.T) {
	for _, store := range []string{"", "helper", "memfd"} {
		t.Run("store="+store, func(t *testing.T) {
			img := copyImage(t, imagePath(t))
			cmd := exec.Command(kboxBin(t), "image", "-S", img, "--", "/bin/sh", "-c",
				"/opt/tests/coherent fill /root/fill 80; mv /root/fill /root/kept; dd if=/dev/zero of=/root/dd bs=1M count=80; echo dd=$?; rm /root/kept /root/dd; /opt/tests/coherent fill /root/fill 80")
			cmd.Env = append(os.Environ(), "KBOX_STORE="+store)
			outb, err := cmd.CombinedOutput()
			out := string(outb)
			if store == "memfd" {
				// What the image could not take is lost, and kbox says
				// so with its own status.
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(out, "their data is lost") {
					t.Errorf("memfd store: %v, want status 125 and the loss reported:\n%s", err, out)
				}
			} else if err != nil {
				t.Fatalf("kbox: %v\n%s", err, out)
			}
			m := fillLine.FindAllStringSubmatch(out, -1)
			if len(m) != 2 {
				t.Fatalf("no fill lines:\n%s", out)
			}
			for i, f := range m {
				wrote, _ := strconv.ParseInt(f[1], 10, 64)
				if store != "memfd" && (wrote < 10<<20 || wrote > 40<<20) {
					t.Errorf("fill %d wrote %d bytes into an image with about 29 MB free:\n%s", i, wrote, out)
				}
				if f[6] != "1" {
					t.Errorf("fill %d: size %s differs from what write reported (%s):\n%s", i, f[5], f[1], out)
				}
				if store == "memfd" {
					if f[3] != "-1/ENOSPC" {
						t.Errorf("memfd store: fill %d: fsync %s, want -1/ENOSPC:\n%s", i, f[3], out)
					}
				} else if f[2] != "ENOSPC" || f[3] != "0/0" || f[4] != "0" {
					t.Errorf("fill %d: write error %s fsync %s close %s, want ENOSPC, 0/0, 0:\n%s", i, f[2], f[3], f[4], out)
				}
			}
			if store != "memfd" && (!strings.Contains(out, "No space left on device") || strings.Contains(out, "dd=0")) {
				t.Errorf("dd did not fail with ENOSPC:\n%s", out)
			}
			size, _ := strconv.ParseInt(m[1][5], 10, 64)
			if store == "memfd" {
				// What the image took: not what write() said.
				return
			}
			got, stderr, _ := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c", "wc -c < /root/fill")
			if strings.TrimSpace(got) != strconv.FormatInt(size, 10) {
				t.Errorf("next run: /root/fill has %q bytes, want %d\n%s", got, size, stderr)
			}
			assertCleanImage(t, img)
		})
	}
}

// Data written and fsynced is in the image even when kbox is killed right
// after: the next read-write boot replays the journal and finds all of it.
func TestFsyncSurvivesKill(t *testing.T) {
	img := copyImage(t, imagePath(t))
	k := startKbox(t, "image", "-S", img, "--", "/opt/tests/coherent", "syncwrite", "/root/synced", "8")
	if l := k.Line(); l != "synced" {
		t.Fatalf("guest said %q\n%s", l, k.Stderr())
	}
	k.cmd.Process.Signal(syscall.SIGKILL)
	if st := k.Wait(); st != 128+int(syscall.SIGKILL) {
		t.Fatalf("kbox ended with status %d, want killed\n%s", st, k.Stderr())
	}
	out, se, st := runKbox(t, "image", "-S", img, "--", "/opt/tests/coherent", "check", "/root/synced", "8")
	if st != 0 || out != "check size=8388608 bad=0\n" {
		t.Errorf("after kill: status %d, %q, want all 8 MiB\n%s", st, out, se)
	}
	assertCleanImage(t, img)
}

// Opening and closing every kind of file thousands of times, through a
// shell's redirections and through open/close, leaves the guest's fds,
// kbox's own fds and the kernel's open files where they were.
func TestOpenCloseLeaves(t *testing.T) {
	img := copyImage(t, imagePath(t))
	bind := t.TempDir()
	if err := os.WriteFile(filepath.Join(bind, "b"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kinds := [][2]string{
		{"/root/ro", "r"}, {"/root/rw", "wx"}, {"/root/app", "ax"}, {"/root/new", "cwx"},
		{"/root/d", "d"}, {"/root/fifo", "rn"}, {"/b/b", "r"}, {"/b/c", "cwx"},
		{"/proc/self/status", "r"}, {"/dev/null", "w"}, {"/tmp/t", "cwx"},
	}
	var phase strings.Builder
	phase.WriteString("phase() { n=$1\n")
	for _, k := range kinds {
		fmt.Fprintf(&phase, "/opt/tests/coherent openclose %s %s $n || echo FAIL\n", k[0], k[1])
	}
	// Redirections of the shell itself (no process per round: the C
	// program above covers opens by other processes).
	phase.WriteString(`i=0; while [ $i -lt $n ]; do echo x >> /root/app2; echo y > /root/new2; read l < /root/ro; echo z >> /b/y; i=$((i+1)); done
}
`)
	// The guest waits for the test in the shell alone (a read that times
	// out on a FIFO nobody writes): a sleep process alive at one sample
	// and not at the other would change kbox's fds (a process's pidfd
	// and memory fd).
	phase.WriteString("wait_for() { while [ ! -e $1 ]; do read -t 1 l <> /root/tick; done; true; }\n")
	script := phase.String() + `mkfifo /root/fifo; mkdir /root/d; echo hi > /root/ro; cp /root/ro /root/rw; cp /root/ro /root/app
mkfifo /root/tick; phase 100; /opt/tests/coherent fdcount; echo phase1; wait_for /b/go
phase 5000; /opt/tests/coherent fdcount; echo phase2; wait_for /b/end
`
	o := startObservedPipe(t, "image", "-S", img, "-b", bind+":/b", "--web=0", "--", "/bin/sh", "-c", script)
	sample := func(marker string) (guest int, kboxFds map[string]int, openFiles uint64) {
		lines := o.until(t, marker)
		for _, l := range lines {
			if strings.HasPrefix(l, "FAIL") || strings.Contains(l, "FAIL") {
				t.Errorf("guest: %s", l)
			}
			if strings.HasPrefix(l, "fds ") {
				guest, _ = strconv.Atoi(strings.TrimPrefix(l, "fds "))
			}
			if strings.HasPrefix(l, "openclose ") {
				f := strings.Fields(l)
				if f[len(f)-1] != f[len(f)-3] {
					t.Errorf("guest fds changed: %s", l)
				}
			}
		}
		// A snapshot taken after the marker (the sampler takes one a
		// second; the guest waits).
		at := time.Now().UnixNano()
		var snap snapshot
		for getJSON(t, o.base+"/api/snapshot", &snap); snap.TimeNs < at; getJSON(t, o.base+"/api/snapshot", &snap) {
			time.Sleep(100 * time.Millisecond)
		}
		// kbox's fds once the guest waits (its wait's FIFO open) and the
		// observatory's connection is open, as at the other sample.
		return guest, fdTargets(o.cmd.Process.Pid), snap.Kernel.OpenFiles
	}
	g1, k1, f1 := sample("phase1")
	os.WriteFile(filepath.Join(bind, "go"), nil, 0o644)
	g2, k2, f2 := sample("phase2")
	// The kernel releases a closed file in a worker (LKL's syscalls run
	// in kernel threads, whose last fput is deferred): on a loaded
	// machine some of the last rounds' files may not be released yet. A
	// leak stays; those go within seconds (the sampler takes a snapshot a
	// second).
	for deadline := time.Now().Add(5 * time.Second); f2 > f1+4 && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		var snap snapshot
		getJSON(t, o.base+"/api/snapshot", &snap)
		f2 = min(f2, snap.Kernel.OpenFiles)
	}
	os.WriteFile(filepath.Join(bind, "end"), nil, 0o644)
	if st := o.wait(t, time.Minute); st != 0 {
		t.Errorf("status %d\n%s", st, o.stderr)
	}
	n1, n2 := countFds(k1), countFds(k2)
	t.Logf("after 100 and 5000 rounds: guest fds %d/%d, kbox fds %d/%d, kernel open files %d/%d", g1, g2, n1, n2, f1, f2)
	if g1 == 0 || g2 != g1 {
		t.Errorf("guest fds %d after 100 rounds, %d after 5000", g1, g2)
	}
	if n2 > n1+2 {
		t.Errorf("kbox fds %d after 100 rounds, %d after 5000; more of: %v", n1, n2, fdsGained(k1, k2))
	}
	if f1 == 0 || f2 > f1+4 {
		t.Errorf("kernel open files %d after 100 rounds, %d after 5000", f1, f2)
	}
}

// TestExecLeavesNothing: kbox reads a program it runs into a memfd of its
// own (mapped while it inspects it) and lets it go when the exec is over;
// only the exec cache keeps sealed copies, at most 32. 40 programs of the
// image and 40 of a bind, each a new file, run by the default tier; then
// kbox holds no mapping of a program and at most 32 copies.
func TestExecLeavesNothing(t *testing.T) {
	img := copyImage(t, imagePath(t))
	bind := t.TempDir()
	script := `wait_for() { while [ ! -e $1 ]; do read -t 1 l <> /root/tick; done; true; }
mkfifo /root/tick; i=0
while [ $i -lt 40 ]; do cp /opt/tests/hello /root/p$i; /root/p$i > /dev/null || echo FAIL $i; rm /root/p$i; i=$((i+1)); done
i=0
while [ $i -lt 40 ]; do cp /opt/tests/hello /b/q$i; /b/q$i > /dev/null || echo FAIL bind $i; rm /b/q$i; i=$((i+1)); done
echo ran; wait_for /b/end
`
	o := startObservedPipe(t, "image", "-S", img, "-b", bind+":/b", "--web=0", "--", "/bin/sh", "-c", script)
	for _, l := range o.until(t, "ran") {
		t.Errorf("guest: %s", l)
	}
	pid := o.cmd.Process.Pid
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(maps), "/memfd:kbox-exec:"); n != 0 {
		t.Errorf("kbox maps %d programs after their execs", n)
	}
	copies := 0
	for name, n := range fdTargets(pid) {
		if strings.HasPrefix(name, "/memfd:kbox-exec:") {
			copies += n
		}
	}
	os.WriteFile(filepath.Join(bind, "end"), nil, 0o644)
	if st := o.wait(t, time.Minute); st != 0 {
		t.Errorf("status %d\n%s", st, o.stderr)
	}
	if copies > 32 {
		t.Errorf("kbox holds %d copies of programs (the cache keeps at most 32)", copies)
	}
}

// TestExecAfterWrite: a program read before (its node in the cache), then
// written over by the guest, runs as written (the exec writes the node
// back and takes its content), as a new file and as one kbox ran before.
func TestExecAfterWrite(t *testing.T) {
	img := copyImage(t, imagePath(t))
	script := `cp /opt/tests/hello /root/p; /root/p; cat /root/p > /dev/null
exec 3<>/root/p; cat /bin/echo >&3; exec 3>&-; /root/p written
cat /opt/tests/hello 1<>/root/p; /root/p
`
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--", "/bin/sh", "-c", script)
	if want := "hello from kbox guest\nwritten\nhello from kbox guest\n"; status != 0 || stdout != want {
		t.Errorf("status %d\nstdout %q, want %q\nstderr: %s", status, stdout, want, lastLines(stderr, 10))
	}
}

// fdTargets counts process pid's open fds by what they name (a path, or
// a kind such as "anon_inode:[pidfd]"; the inode of a pipe or socket is
// left out, so equal kinds add up).
func fdTargets(pid int) map[string]int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	m := map[string]int{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if i := strings.Index(l, ":["); i > 0 && !strings.HasPrefix(l, "anon_inode:") {
			l = l[:i]
		}
		m[l]++
	}
	return m
}

func countFds(m map[string]int) (n int) {
	for _, c := range m {
		n += c
	}
	return n
}

// fdsGained lists the kinds of fd after has more of than before.
func fdsGained(before, after map[string]int) []string {
	var more []string
	for k, c := range after {
		if c > before[k] {
			more = append(more, fmt.Sprintf("%s +%d", k, c-before[k]))
		}
	}
	sort.Strings(more)
	return more
}

// observedPipe is a kbox run with the observatory whose stdout is read
// line by line.
type observedPipe struct {
	*observed
	lines chan string
}

func startObservedPipe(t *testing.T, args ...string) *observedPipe {
	t.Helper()
	pr, pw := io.Pipe()
	o := startObservedWith(t, pw, args...)
	p := &observedPipe{observed: o, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	go func() {
		err := <-o.done
		pw.Close()
		o.done <- err
	}()
	return p
}

// until returns the lines printed up to marker.
func (p *observedPipe) until(t *testing.T, marker string) []string {
	t.Helper()
	var got []string
	timeout := time.After(kboxTimeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("kbox ended before %q:\n%s\n%s", marker, strings.Join(got, "\n"), p.stderr)
			}
			if l == marker {
				return got
			}
			got = append(got, l)
		case <-timeout:
			t.Fatalf("no %q within %v:\n%s", marker, kboxTimeout, strings.Join(got, "\n"))
		}
	}
}

// SQLite, a database written by two processes in turn and, in WAL mode
// (shared memory through a MAP_SHARED -shm file, POSIX locks), by two at
// once: every row is there and the database checks clean, in the run and
// in the next one. With a shadow cap of 40,000 bytes the databases (a
// 100 KB blob in each) are virtual fds, whose locks are the host's
// (dispatch/sys_file_locks.go), and the -shm file (32 KiB) a shadow.
func TestSQLiteTwoWriters(t *testing.T) {
	pkg := packageImage(t, "sqlite3")
	const insert = `(i=0; while [ $i -lt 100 ]; do sqlite3 -cmd ".timeout 20000" %s "insert into t values($p)" >/dev/null || echo FAIL $?; i=$((i+1)); done)`
	script := `cd /root
sqlite3 turns.db "create table t(x); create table pad(b); insert into pad values(zeroblob(100000))"
for p in 1 2; do ` + fmt.Sprintf(insert, "turns.db") + `; done
sqlite3 turns.db "select count(*), sum(x) from t; pragma integrity_check"
sqlite3 wal.db "pragma journal_mode=wal; create table t(x); create table pad(b); insert into pad values(zeroblob(100000))"
for p in 1 2; do ` + fmt.Sprintf(insert, "wal.db") + ` & done; wait
sqlite3 wal.db "select count(*), sum(x) from t; pragma integrity_check"
`
	for _, cap := range []string{"", "40000"} {
		img := copyImage(t, pkg)
		env := kboxEnv{vars: []string{"KBOX_SHADOW_MAX=" + cap}}
		out, stderr, st := runKboxEnv(t, env, "image", "-S", img, "--", "/bin/sh", "-c", script)
		want := "200|300\nok\nwal\n200|300\nok\n"
		if st != 0 || out != want {
			t.Fatalf("KBOX_SHADOW_MAX=%q: status %d, got\n%s\nwant\n%s\n%s", cap, st, out, want, stderr)
		}
		// Read-write: a WAL database needs its -shm file even to be read.
		out, stderr, _ = runKboxEnv(t, env, "image", "-S", img, "--", "/bin/sh", "-c",
			`cd /root; sqlite3 turns.db "select count(*) from t; pragma integrity_check"; sqlite3 wal.db "select count(*) from t"`)
		if out != "200\nok\n200\n" {
			t.Errorf("KBOX_SHADOW_MAX=%q, next run: %q\n%s", cap, out, stderr)
		}
	}
}

// A description whose only copy is in flight in a unix socket holds its
// node: the node cache's trim (4400 files fill it) must not drop it, or
// the write made through it once received never reaches the image
// (tests/guest/inflight.c). kbox asks the kernel with a lease; /proc
// shows no such description. Seccomp tier: the in-process tiers put a
// received fd above the guest's range.
func TestInflightDescriptionHoldsNode(t *testing.T) {
	img := copyImage(t, imagePath(t))
	out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode=seccomp", "--", "/opt/tests/inflight", "/root/inf", "/tmp/many", "4400")
	if st != 0 || out != "sent\nmade 4400\nwrote\n" {
		t.Fatalf("status %d: %q\n%s", st, out, lastLines(stderr, 5))
	}
	out, stderr, st = runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/cat", "/root/inf")
	if st != 0 || out != "before\nafter\n" {
		t.Errorf("the file in the image: %q, want both writes (status %d)\n%s", out, st, lastLines(stderr, 5))
	}
}

// Shadows of files on the image and on /tmp at once: each fd's fstat
// names its own file, as natively. Their content files live in two
// stores (one tmpfs per LKL filesystem) whose inode numbers coincide;
// kbox used to find nodes by inode alone, so a /tmp file's fd was taken
// for no shadow (its fstat showed the content file; fsync and /proc/PID/fd
// missed it). The legacy fstat, which musl's fstat makes, gives the
// path's stat too: it ran on the host on every host fd, a shadow's
// showing its content file's device, inode and mode 0600. In every tier,
// and by a child of the fds it inherited. Nor do a shadow's seals show
// (its content memfd has F_SEAL_SEAL; an ext4 file has none: EINVAL).
func TestShadowsOfTwoFilesystems(t *testing.T) {
	img := copyImage(t, imagePath(t))
	bin := dumpFromImage(t, img, "/opt/tests/shadowino")
	dir := t.TempDir()
	native, err := exec.Command(bin, "-c", dir+"/a", dir+"/b").Output()
	if err != nil || strings.Count(string(native), ": yes\n") != 6 {
		t.Fatalf("native: %v\n%s", err, native)
	}
	forEachTier(t, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+tier, "--trusted", "--",
			"/opt/tests/shadowino", "-s", "/tmp/a", "/root/b", "/tmp/c", "/root/d")
		if st != 0 || strings.Count(out, ": yes\n") != 12 {
			t.Errorf("status %d\n%s%s", st, out, lastLines(stderr, 5))
		}
	})
	// A child's fstat of the fds it inherited (the seccomp tier: the
	// in-process tiers cannot fork).
	out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode=seccomp", "--",
		"/opt/tests/shadowino", "-c", "/tmp/e", "/root/f")
	if st != 0 || strings.Count(out, ": yes\n") != 6 {
		t.Errorf("a child: status %d\n%s%s", st, out, lastLines(stderr, 5))
	}
}

// TestOpenIsNewDescription: every open is a new open file description
// whatever an earlier one of the file did before its close: its offset,
// status flags, dups, an fd sent with SCM_RIGHTS, flock and OFD locks, a
// mapping; and no open releases the process's POSIX locks on the file,
// which kbox's own copy of a description would at its close in the
// in-process tiers (shadowfd/spare.go, closeCopyLocked)
// (tests/guest/descreuse.c). The in-process tiers keep a closed
// plain read-only description of a shadowed file for its next open
// (trap/lend.go): each case makes one first. Natively, and in every tier.
func TestOpenIsNewDescription(t *testing.T) {
	img := imagePath(t)
	want := "offset ok\nsetfl ok\nfionbio ok\ndup ok\ndup2 ok\nrights ok\nflock ok\nofd ok\nmmap ok\nposix ok\n"
	if native := nativeOutput(t, img, "/opt/tests/descreuse", "/etc/passwd"); native != want {
		t.Fatalf("natively:\n%s", native)
	}
	for _, mode := range []string{"seccomp", "trap", "rewrite"} {
		// As root, and as uid 1000, whose cached opens LKL checks for
		// read permission first.
		for _, who := range [][]string{{"-S"}, {"-R", "--change-id", "1000:1000"}} {
			args := append(append([]string{"image"}, who[0], img), who[1:]...)
			args = append(args, "--read-only", "--trusted", "--syscall-mode="+mode, "--", "/opt/tests/descreuse", "/etc/passwd")
			stdout, stderr, status := runKbox(t, args...)
			if status != 0 || stdout != want {
				t.Errorf("%s %v: status %d\n%s\nstderr: %s", mode, who, status, stdout, lastLines(stderr, 5))
			}
		}
	}
}

// A path asked again resolves afresh when what its resolution depends on
// changed: the cwd (chdir, fchdir), the process (a child served by the
// same thread), the root (chroot). kbox keeps each serving thread's last
// resolution (dispatch/resolve.go); tests/guest/resolvememo.c asks the
// same strings across those changes, as root and as uid 1000, in every
// tier (fork where the tier has it).
func TestResolveMemo(t *testing.T) {
	img := copyImage(t, imagePath(t))
	forEachTier(t, func(t *testing.T, tier string) {
		for _, run := range [][]string{
			{"-S", "--", "/opt/tests/resolvememo", "/root/rm-" + tier},
			{"-R", "--change-id", "1000:1000", "--", "/opt/tests/resolvememo", "/tmp/rm"},
		} {
			args := append([]string{"image", run[0], img, "--syscall-mode=" + tier}, run[1:]...)
			out, stderr, st := runKbox(t, args...)
			if st != 0 || strings.TrimSpace(out) != "ok" {
				t.Errorf("%v: status %d\n%s\nstderr: %s", run, st, out, lastLines(stderr, 5))
			}
		}
	})
}

// linkfdWant is what tests/guest/linkfd.c prints on Linux as root.
const linkfdWant = `link /proc/self/fd/N: ok
link /dev/fd/N: ok
link fd AT_EMPTY_PATH: ok
link onto a name there: EEXIST
byproc: 8 bytes "tmp+more", 3 links, mode 640
bydev: 8 bytes "tmp+more", 3 links, mode 640
byfd: 8 bytes "tmp+more", 3 links, mode 640
link an O_EXCL temporary file: ENOENT
link a named file's fd: ok
reg2: 3 bytes "reg", 2 links, mode 644
link a bad fd: EBADF
link the cwd: EPERM
link without a flag: the link itself: EXDEV
`

// TestLinkFd: an open file gets a name by linkat of /proc/self/fd/N or
// /dev/fd/N with AT_SYMLINK_FOLLOW and by linkat(fd, "", AT_EMPTY_PATH),
// as open(2) names an O_TMPFILE file: an image file's shadow and an
// O_TMPFILE file alike, in every tier (kbox took the old path for a /proc
// path: EXDEV, and "" for no file: ENOENT). Linux's answers, which a
// native run as root gives too (before Linux 6.10 AT_EMPTY_PATH needs
// CAP_DAC_READ_SEARCH). And a child names its parent's file. The same in
// a bind, where the files are the host's.
func TestLinkFd(t *testing.T) {
	img := imagePath(t)
	if os.Geteuid() == 0 {
		if native := nativeOutput(t, img, "/opt/tests/linkfd", t.TempDir()); native != linkfdWant {
			t.Fatalf("natively:\n%s", native)
		}
	}
	forEachTier(t, func(t *testing.T, m string) {
		out, stderr, st := runKbox(t, "image", "-S", copyImage(t, img), "--syscall-mode="+m, "--trusted", "--", "/opt/tests/linkfd", "/root")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "linkfd", linkfdWant, out)
		// In a bind (-b), the host's files: the same (kbox gave
		// ENOENT for AT_EMPTY_PATH and EXDEV through /proc).
		out, stderr, st = runKbox(t, "image", "-S", copyImage(t, img), "-b", t.TempDir()+":/mnt/h", "--syscall-mode="+m, "--trusted", "--", "/opt/tests/linkfd", "/mnt/h")
		if st != 0 {
			t.Fatalf("in a bind: status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "linkfd in a bind", linkfdWant, out)
	})
	// Another process's fd: a child names its parent's file (the seccomp
	// tier: the in-process tiers cannot fork).
	const want = "a child links its parent's file: ok\nbychild: 8 bytes \"parent's\", 1 links, mode 600\n"
	if os.Geteuid() == 0 {
		if native := nativeOutput(t, img, "/opt/tests/linkfd", "-c", t.TempDir()); native != want {
			t.Fatalf("natively:\n%s", native)
		}
	}
	for _, run := range [][]string{{"/root"}, {"-b", t.TempDir() + ":/mnt/h", "/mnt/h"}} {
		args := append([]string{"image", "-S", copyImage(t, img)}, run[:len(run)-1]...)
		out, stderr, st := runKbox(t, append(args, "--", "/opt/tests/linkfd", "-c", run[len(run)-1])...)
		if st != 0 || out != want {
			t.Errorf("a child, in %s: status %d\n%s\n%s", run[len(run)-1], st, out, stderr)
		}
	}
	// A host file outside the binds, the guest's stdin, gets no name in
	// a bind, though it is on the bind's filesystem.
	t.Run("outside", func(t *testing.T) { forEachTier(t, linkOutside(img)) })
}

// linkOutside runs linkfd -i under tier m with a host file outside the
// binds as its stdin: no name for it in the bind.
func linkOutside(img string) func(t *testing.T, m string) {
	return func(t *testing.T, m string) {
		dir := t.TempDir()
		secret := filepath.Join(dir, "secret")
		bind := filepath.Join(dir, "bind")
		if err := os.WriteFile(secret, []byte("host\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(bind, 0o755); err != nil {
			t.Fatal(err)
		}
		in, err := os.Open(secret)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		ctx, cancel := context.WithTimeout(context.Background(), kboxTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, kboxBin(t), "image", "-S", copyImage(t, img), "-b", bind+":/mnt/h", "--syscall-mode="+m, "--trusted", "--", "/opt/tests/linkfd", "-i", "/mnt/h")
		cmd.Stdin = in
		out, _ := cmd.Output()
		const refused = "link stdin by /proc/self/fd/0: EXDEV\nlink stdin by /dev/fd/0: EACCES\nlink stdin AT_EMPTY_PATH: ENOENT\n"
		if string(out) != refused {
			t.Errorf("stdin's file linked into a bind:\n%s", out)
		}
		if ents, _ := os.ReadDir(bind); len(ents) != 0 {
			t.Errorf("the bind holds %d names", len(ents))
		}
	}
}
