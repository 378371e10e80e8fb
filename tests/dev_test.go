//go:build lkl

package tests

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The guest's /dev and /sys are its own (kbox issue 11): /dev is LKL's
// ramfs with kbox's devices and a private devpts instance, /dev/shm a
// directory of the run's scratch disk, /sys LKL's sysfs with the host's
// CPU topology. These tests compare what the guest sees with the host's.

// hostBlockDev returns the name of a block device in the host's /dev, not
// a loop device: their numbers name the guest's own loop devices on a
// kernel with the loop driver (TestLoopDevice).
func hostBlockDev(t *testing.T) string {
	ents, err := os.ReadDir("/dev")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		var st unix.Stat_t
		if unix.Lstat("/dev/"+e.Name(), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK && unix.Major(st.Rdev) != 7 {
			return e.Name()
		}
	}
	t.Skip("SKIP (the host's /dev has no block device to look for)")
	return ""
}

// TestDevHostNodesAbsent: the host's devices are not in the guest's /dev,
// the guest's /dev is kbox's set, a file created there stays out of the
// host's /dev, and a node made by the guest for a device kbox does not
// serve (the kernel log, a host disk's numbers, LKL's memory, LKL's own
// disk: the image) opens nothing.
func TestDevHostNodesAbsent(t *testing.T) {
	img := copyImage(t, imagePath(t))
	blk := hostBlockDev(t)
	var st unix.Stat_t
	if err := unix.Stat("/dev/"+blk, &st); err != nil {
		t.Fatal(err)
	}
	planted := fmt.Sprintf("kboxtest-%d", os.Getpid())
	t.Cleanup(func() { os.Remove("/dev/" + planted) })
	script := fmt.Sprintf(`
for n in kmsg ttyS0 loop-control %[1]s console mem; do
	if [ -e /dev/$n ]; then echo present $n; else echo absent $n; fi
done
cat /dev/kmsg >/dev/null 2>&1; echo kmsg=$?
echo ls: $(ls /dev)
echo x > /dev/%[2]s; echo created=$?
mknod /tmp/kmsg c 1 11; mknod /tmp/mem c 1 1; mknod /tmp/blk b %[3]d %[4]d; mknod /tmp/console c 5 1
mknod /tmp/vda b 254 0 # LKL's virtio disk: the image itself
/opt/tests/devnodes /tmp/kmsg /tmp/mem /tmp/blk /tmp/console /tmp/vda
`, blk, planted, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--", "/bin/sh", "-c", script)
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	absent := []string{"kmsg", "ttyS0", blk, "console", "mem"}
	// The loop driver's devices are the guest's own where the kernel has
	// them (TestLoopDevice), and absent as LKL's other devices where not.
	ls := "ls: fd full null ptmx pts random shm stderr stdin stdout tty urandom zero\n"
	if linkedKernel(t).has("loop") {
		ls = "ls: fd full loop-control loop0 loop1 loop2 loop3 loop4 loop5 loop6 loop7 null ptmx pts random shm stderr stdin stdout tty urandom zero\n"
		if !strings.Contains(stdout, "present loop-control\n") {
			t.Errorf("/dev/loop-control is absent in the guest on a kernel with loop devices\n%s", stdout)
		}
	} else {
		absent = append(absent, "loop-control")
	}
	for _, n := range absent {
		if !strings.Contains(stdout, "absent "+n+"\n") {
			t.Errorf("/dev/%s is not absent in the guest\n%s", n, stdout)
		}
	}
	for _, want := range []string{
		"kmsg=1\n",
		ls,
		"created=0\n", // as root, in the guest's own /dev (LKL's ramfs)
		"/tmp/kmsg: open ENXIO\n", "/tmp/mem: open ENXIO\n", "/tmp/blk: open ENXIO\n", "/tmp/console: open ENXIO\n",
		"/tmp/vda: open ENXIO\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q\nstdout: %s\nstderr: %s", want, stdout, stderr)
		}
	}
	if _, err := os.Lstat("/dev/" + planted); err == nil {
		t.Errorf("the guest's `echo x > /dev/%s` created the host's /dev/%s", planted, planted)
	}
	assertCleanImage(t, img)
}

// TestDevNodes: null, zero, full, random and urandom behave as on Linux,
// natively (host fds below the virtual base, the host's devices), also
// through a node the guest made elsewhere, and /dev/stdin, /dev/stdout,
// /dev/fd/N name the caller's fds.
func TestDevNodes(t *testing.T) {
	img := copyImage(t, imagePath(t))
	script := `
mknod /tmp/mynull c 1 3
/opt/tests/devnodes /dev/null /dev/zero /dev/full /dev/random /dev/urandom /tmp/mynull /dev/null!w
cat /dev/tty >/dev/null 2>&1; echo tty=$?
echo hello | cat /dev/stdin
echo to-stdout > /dev/stdout
exec 7</etc/hostname; cat /dev/fd/7
bash -c 'cat <(echo procsub)'
ls -l /dev/stdin | cut -c1
cat /dev/fd/9 2>/dev/null || echo fd9-absent
chmod 600 /dev/stdin 2>/dev/null || echo chmod-stdin-refused
mknod /dev/secret c 1 3; chmod 600 /dev/secret
su -s /bin/sh nobody -c 'echo x > /dev/null && echo nobody-null; echo x > /dev/secret || echo nobody-secret-refused'
s=$EPOCHREALTIME; dd if=/dev/zero of=/dev/null bs=64k count=10000 2>&1 | grep -o '^[0-9]* bytes'; e=$EPOCHREALTIME
echo dd-us=$(( ${e/./} - ${s/./} ))
`
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--", "/bin/bash", "-c", script)
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	for _, want := range []string{
		"/dev/null: fd 3 host 1 rdev 1:3 read 0 write 1\n",
		"/dev/zero: fd 3 host 1 rdev 1:5 read 16 zeros write 1\n",
		"/dev/full: fd 3 host 1 rdev 1:7 read 16 zeros write ENOSPC\n",
		"/dev/random: fd 3 host 1 rdev 1:8 read 16 write 1\n",
		"/dev/urandom: fd 3 host 1 rdev 1:9 read 16 write 1\n",
		"/tmp/mynull: fd 3 host 1 rdev 1:3 read 0 write 1\n",
		"/dev/null: fd 3 host 1 rdev 1:3 write 1\n",
		"tty=1\n", // no controlling terminal: ENXIO
		"hello\n", "to-stdout\n", "kbox-rootfs\n", "procsub\n",
		"l\n", // /dev/stdin is a link
		"fd9-absent\n", "chmod-stdin-refused\n",
		"nobody-null\n", "nobody-secret-refused\n",
		"655360000 bytes\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q\nstdout: %s\nstderr: %s", want, stdout, stderr)
		}
	}
	if m := regexp.MustCompile(`dd-us=(\d+)`).FindStringSubmatch(stdout); m != nil {
		t.Logf("dd of 655 MB from /dev/zero to /dev/null: %s µs", m[1])
	}
}

// TestDevPty: a guest gets a pseudo-terminal from /dev/ptmx and opens its
// slave by name in /dev/pts; the slave is the controlling terminal of a
// child (tty names it, /dev/tty reaches it). The pty is in kbox's own
// devpts instance, not the host's /dev/pts.
func TestDevPty(t *testing.T) {
	img := copyImage(t, imagePath(t))
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--", "/opt/tests/pty", "tty; echo hi; echo via-tty > /dev/tty; echo ls: $(ls /dev/pts)")
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	for _, want := range []string{"pty 0 dev ", "out: /dev/pts/0\n", "out: hi\n", "out: via-tty\n", "out: ls: 0 ptmx\n", "status 0\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q\nstdout: %s\nstderr: %s", want, stdout, stderr)
		}
	}
	m := regexp.MustCompile(`pty \d+ dev (\d+):(\d+)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no pty line\nstdout: %s", stdout)
	}
	var host unix.Stat_t
	if err := unix.Stat("/dev/pts", &host); err != nil {
		t.Fatal(err)
	}
	if maj, min := unix.Major(host.Dev), unix.Minor(host.Dev); m[1] == strconv.Itoa(int(maj)) && m[2] == strconv.Itoa(int(min)) {
		t.Errorf("the guest's pty is in the host's /dev/pts (device %d:%d)", maj, min)
	}
}

// TestDevShm: /dev/shm is the run's own: a host file there is invisible,
// a guest file never reaches the host's and is gone after the run, POSIX
// shared memory and a named semaphore work between two guest processes,
// and chmod works.
func TestDevShm(t *testing.T) {
	img := copyImage(t, imagePath(t))
	tag := fmt.Sprintf("kbox-%d", os.Getpid())
	planted := "/dev/shm/" + tag + "-planted"
	if err := os.WriteFile(planted, []byte("host\n"), 0o644); err != nil {
		t.Skipf("SKIP (cannot plant a file in the host's /dev/shm): %v", err)
	}
	t.Cleanup(func() {
		for _, n := range []string{planted, "/dev/shm/" + tag + "-guest", "/dev/shm/" + tag, "/dev/shm/" + tag + ".sem"} {
			os.Remove(n)
		}
	})
	// The guest holds its file while the test looks at the host's
	// /dev/shm, then reads it back.
	script := fmt.Sprintf(`
ls -a /dev/shm | tr '\n' ' '; echo
cat %[1]s 2>&1 || echo planted-invisible
echo guest-data > /dev/shm/%[2]s-guest && chmod 640 /dev/shm/%[2]s-guest && stat -c mode=%%a /dev/shm/%[2]s-guest
echo ready
read x
cat /dev/shm/%[2]s-guest
/opt/tests/shmsem %[2]s
`, planted, tag)
	stdout, se, err := converseKbox(t, func(line string, in io.WriteCloser, _ int) {
		if line == "ready" {
			if _, err := os.Lstat("/dev/shm/" + tag + "-guest"); err == nil {
				t.Errorf("the guest's /dev/shm file is in the host's /dev/shm")
			}
			in.Write([]byte("go\n"))
			in.Close()
		}
	}, "image", "-S", img, "--", "/bin/sh", "-c", script)
	if err != nil {
		t.Fatalf("kbox: %v\nstdout: %s\nstderr: %s", err, stdout, se)
	}
	for _, want := range []string{". .. \n", "planted-invisible\n", "mode=640\n", "ready\n", "guest-data\n", "parent read: hello from", "shmsem ok\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q\nstdout: %s\nstderr: %s", want, stdout, se)
		}
	}
	left, _ := filepath.Glob("/dev/shm/" + tag + "*")
	sort.Strings(left)
	if len(left) != 1 || left[0] != planted {
		t.Errorf("the host's /dev/shm holds %v after the run, want only the planted file", left)
	}
	assertCleanImage(t, img)
}

// TestDevPythonPool: Python's multiprocessing (semaphores in /dev/shm,
// fork, pipes) in an image with python3.
func TestDevPythonPool(t *testing.T) {
	img := copyImage(t, packageImage(t, "python3"))
	start := time.Now()
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--", "python3", "-c",
		"from multiprocessing import Pool; print(sum(Pool(2).map(abs, range(-10,10))))")
	if status != 0 || stdout != "100\n" {
		t.Fatalf("status %d, want 0 and 100\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	t.Logf("multiprocessing.Pool(2) run in %v", time.Since(start))
}

// TestSys: the guest's /sys is LKL's (its network devices and disks) with
// the host's CPU topology, read-only.
func TestSys(t *testing.T) {
	img := copyImage(t, imagePath(t))
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Skipf("SKIP (the host has no /sys/devices/system/cpu/online): %v", err)
	}
	nproc, err := exec.Command("nproc").Output()
	if err != nil {
		t.Fatal(err)
	}
	script := `
echo net: $(ls /sys/class/net)
echo block: $(ls /sys/block)
echo online: $(cat /sys/devices/system/cpu/online)
echo nproc: $(nproc)
ls /sys/devices/system/cpu | grep -c '^cpu[0-9]'
for f in /sys/devices/system/cpu/cpu*/online /sys/devices/system/cpu/online; do
	if [ -e $f ]; then (echo 1 > $f) 2>/dev/null && echo wrote $f; fi
done
echo done
`
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--", "/bin/sh", "-c", script)
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	hostNet, _ := os.ReadDir("/sys/class/net")
	for _, n := range hostNet {
		if n.Name() != "lo" && regexp.MustCompile(`\b`+regexp.QuoteMeta(n.Name())+`\b`).MatchString(lineOf(stdout, "net:")) {
			t.Errorf("the guest sees the host's network interface %s: %s", n.Name(), lineOf(stdout, "net:"))
		}
	}
	if !strings.Contains(lineOf(stdout, "net:"), " lo") {
		t.Errorf("no lo in the guest's /sys/class/net: %s", lineOf(stdout, "net:"))
	}
	// LKL's disks: the image and the scratch disk; and the loop devices
	// LKL made at boot where it has the driver (TestLoopDevice).
	want := "block: vda vdb"
	if linkedKernel(t).has("loop") {
		want = "block: loop0 loop1 loop2 loop3 loop4 loop5 loop6 loop7 vda vdb"
	}
	if got := lineOf(stdout, "block:"); got != want {
		t.Errorf("%q, want the guest's two disks (%s)", got, want)
	}
	if got, want := lineOf(stdout, "online:"), "online: "+strings.TrimSpace(string(online)); got != want {
		t.Errorf("%q, want the host's %q", got, want)
	}
	if got, want := lineOf(stdout, "nproc:"), "nproc: "+strings.TrimSpace(string(nproc)); got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if strings.Contains(stdout, "wrote") {
		t.Errorf("the guest wrote the host's CPU topology:\n%s", stdout)
	}
	if !strings.Contains(stdout, "done\n") {
		t.Errorf("stdout: %s\nstderr: %s", stdout, stderr)
	}
}

// lineOf returns the first line of s that starts with prefix.
func lineOf(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
