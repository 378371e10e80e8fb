//go:build lkl

package tests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The guest's /tmp is a private ext4 scratch disk (rootfs/scratch.go,
// package scratchfs): an unnamed sparse file in $TMPDIR attached as a
// second LKL disk. These tests give kbox a private TMPDIR so they can check
// what it leaves there.

// runKboxIn runs kbox with TMPDIR set to tmpdir and returns stdout, stderr
// and the exit status.
func runKboxIn(t *testing.T, tmpdir string, args ...string) (string, string, int) {
	t.Helper()
	return runKboxEnv(t, kboxEnv{vars: []string{"TMPDIR=" + tmpdir}}, args...)
}

// assertEmptyDir fails unless dir has no entries.
func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left in TMPDIR: %s", filepath.Join(dir, e.Name()))
	}
}

// fdsInto lists the fds of process pid (all processes if pid is 0) whose
// target lies in dir: an O_TMPFILE file shows as "DIR/#INODE (deleted)".
func fdsInto(dir string, pid int) []string {
	pids := []string{strconv.Itoa(pid)}
	if pid == 0 {
		pids, _ = filepath.Glob("/proc/[0-9]*")
		for i := range pids {
			pids[i] = filepath.Base(pids[i])
		}
	}
	var found []string
	for _, p := range pids {
		links, _ := filepath.Glob("/proc/" + p + "/fd/*")
		for _, l := range links {
			if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dir+"/") {
				found = append(found, l+" -> "+target)
			}
		}
	}
	return found
}

// TestTmpBigFile: a 200 MB file in /tmp, written with dd from
// /dev/urandom, has its size and reads back the same three times (twice
// through sha256sum's own reads, once through a pipe from cat), with a
// read-write and with a read-only image. With the old ramfs /tmp, dd's
// file was lost at write-back ("file too large") and stat saw 0 bytes.
func TestTmpBigFile(t *testing.T) {
	img := imagePath(t)
	script := strings.Join([]string{
		`dd if=/dev/urandom of=/tmp/big bs=1M count=200 2>/dev/null; echo dd=$?`,
		`stat -c size=%s /tmp/big`,
		`sha256sum /tmp/big`,
		`sha256sum /tmp/big`,
		`cat /tmp/big | sha256sum`,
	}, "\n")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"read-write", []string{"image", "-S", copyImage(t, img)}},
		{"read-only", []string{"image", "-S", img, "--read-only"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmpdir := t.TempDir()
			stdout, stderr, status := runKboxIn(t, tmpdir, append(c.args, "-c", script)...)
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			if status != 0 || len(lines) != 5 || lines[0] != "dd=0" || lines[1] != "size=209715200" {
				t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
			}
			var sums []string
			for _, l := range lines[2:] {
				sums = append(sums, strings.Fields(l)[0])
			}
			if sums[0] != sums[1] || sums[1] != sums[2] || len(sums[0]) != 64 {
				t.Errorf("the file reads back differently: %q", sums)
			}
			if strings.Contains(stderr, "warning") {
				t.Errorf("stderr: %s", stderr)
			}
			assertEmptyDir(t, tmpdir)
		})
	}
}

// TestTmpMidSizes: the 3 MB and 8 MB files that the old ramfs /tmp lost
// at write-back (ENOMEM, EFBIG), written with dd and read back; their
// content is compared with the same bytes hashed here on the host.
func TestTmpMidSizes(t *testing.T) {
	img := imagePath(t)
	var script strings.Builder
	var want strings.Builder
	for _, mb := range []int{3, 8} {
		fmt.Fprintf(&script, "yes kbox-scratch | dd of=/tmp/f%d bs=1M count=%d iflag=fullblock 2>/dev/null; stat -c %%s /tmp/f%d; sha256sum < /tmp/f%d\n", mb, mb, mb, mb)
		data := bytes.Repeat([]byte("kbox-scratch\n"), mb<<20/13+1)[:mb<<20]
		fmt.Fprintf(&want, "%d\n%x  -\n", mb<<20, sha256.Sum256(data))
	}
	stdout, stderr, status := runKboxIn(t, t.TempDir(), "image", "-S", img, "--read-only", "-c", script.String())
	if status != 0 || stdout != want.String() {
		t.Errorf("status %d\nstdout %q\nwant   %q\nstderr: %s", status, stdout, want.String(), stderr)
	}
}

// TestTmpSizeAndMode: /tmp is root's, mode 1777, holds the kernel's
// ownership and modes, has the size --tmp-size gave it (df and statfs),
// and is confined: its parent is the image's root, and the scratch disk's
// own root (which holds shm beside tmp) is out of reach. The default size is half of
// TMPDIR's free space, at most 8 GiB.
func TestTmpSizeAndMode(t *testing.T) {
	img := imagePath(t)
	tmpdir := t.TempDir()
	script := strings.Join([]string{
		`stat -c '%a %u %g' /tmp`,
		`/bin/df -k /tmp | tail -n 1 | awk '{print "df", $2}'`,
		`stat -f -c 'statfs %b %S' /tmp`,
		`touch /tmp/f && chown 123:456 /tmp/f && chmod 2640 /tmp/f && stat -c '%u %g %a' /tmp/f`,
		`mkdir /tmp/d && chmod 1730 /tmp/d && stat -c '%a' /tmp/d`,
		`ls -a /tmp | tr '\n' ' '; echo`,
		`[ "$(stat -c %i /tmp/..)" = "$(stat -c %i /)" ] && echo parent-is-root`,
		`ls /tmp/../shm 2>&1 | grep -c 'No such file'`,
	}, "\n")
	var st syscall.Statfs_t
	if err := syscall.Statfs(tmpdir, &st); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, status := runKboxIn(t, tmpdir, "image", "-S", img, "--read-only", "--tmp-size", "1G", "-c", script)
	want := "1777 0 0\ndf 1048576\nstatfs 262144 4096\n123 456 2640\n1730\n. .. d f \nparent-is-root\n1\n"
	if status != 0 || stdout != want || (stderr != "" && int64(st.Bavail)*st.Bsize > 1<<30) {
		t.Errorf("status %d\nstdout %q\nwant   %q\nstderr: %s", status, stdout, want, stderr)
	}

	def := min(int64(st.Bavail)*st.Bsize/2, 8<<30)
	def = max(def, 64<<20)
	stdout, stderr, status = runKboxIn(t, tmpdir, "image", "-S", img, "--read-only", "-c", `stat -f -c '%b' /tmp`)
	blocks, err := strconv.ParseInt(strings.TrimSpace(stdout), 10, 64)
	if status != 0 || err != nil {
		t.Fatalf("default size: status %d, %v\nstdout: %s\nstderr: %s", status, err, stdout, stderr)
	}
	// The host's free space moves a little between the two statfs calls.
	if got := blocks * 4096; got < def*99/100 || got > def*101/100 {
		t.Errorf("default size %d bytes, want about %d (half of TMPDIR's free space, at most 8 GiB)", got, def)
	}

	// Larger than the host's free space: allowed (the file is sparse), with
	// a warning, since the kernel would learn of a full host filesystem only
	// from failed writes back.
	if int64(st.Bavail)*st.Bsize >= 1<<40 {
		t.Skip("TMPDIR has 1 TiB free: cannot check the warning for a disk larger than the free space")
	}
	stdout, stderr, status = runKboxIn(t, tmpdir, "image", "-S", img, "--read-only", "--tmp-size", "1T", "-c", `stat -f -c '%b' /tmp`)
	if status != 0 || stdout != "268435456\n" || !strings.Contains(stderr, "kbox: warning: /tmp (1048576 MiB) is larger than the free space where its file is") {
		t.Errorf("--tmp-size 1T: status %d, stdout %q\nstderr: %s", status, stdout, stderr)
	}
}

// TestTmpLeavesNothing: the backing file is open in kbox during the run
// but has no name in TMPDIR; after a normal exit, and after a SIGKILL of
// kbox in the middle of a write, TMPDIR is empty and no process holds the
// file any more (the host has freed its blocks). The old code had no
// backing file, and left the supervisor's stage directory behind after a
// SIGKILL (the keeper now removes it): both checks fail on it.
func TestTmpLeavesNothing(t *testing.T) {
	img := imagePath(t)
	tmpdir := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), kboxTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kboxBin(t), "image", "-S", img, "--read-only", "-c",
		"echo start $$; exec dd if=/dev/zero of=/tmp/big bs=1M count=300")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmpdir)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	var guest int
	if _, err := fmt.Sscanf(line, "start %d", &guest); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("guest printed %q\nstderr: %s", line, &stderr)
	}
	keeper := parentOf(guest)
	held := fdsInto(tmpdir, cmd.Process.Pid)
	if len(held) != 1 || !strings.Contains(held[0], "(deleted)") {
		t.Errorf("kbox's fds into TMPDIR: %q; want one unnamed backing file\nstderr: %s", held, &stderr)
		held = nil
	}
	// During the run, TMPDIR holds only the supervisor's stage directory
	// (the guest's host working directory, seccomp/supervisor).
	ents, _ := os.ReadDir(tmpdir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "kbox-stage-") {
			t.Errorf("in TMPDIR during the run: %s", e.Name())
		}
	}
	// Wait until dd's data reaches the backing file, then kill kbox.
	deadline := time.Now().Add(30 * time.Second)
	for held != nil {
		link := strings.Fields(held[0])[0]
		var st syscall.Stat_t
		if err := syscall.Stat(link, &st); err != nil || st.Blocks*512 >= 64<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the backing file never grew to 64 MB\nstderr: %s", &stderr)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !alive(guest) {
		t.Errorf("dd was done before kbox was killed: not a kill during a write")
	}
	cmd.Process.Kill()
	if st := exitStatus(cmd.Wait()); st != -int(syscall.SIGKILL) {
		t.Errorf("kbox status %d, want killed", st)
	}
	waitGone(t, "guest dd and keeper of a SIGKILLed kbox", guest, keeper)
	assertEmptyDir(t, tmpdir)
	if held := fdsInto(tmpdir, 0); len(held) != 0 {
		t.Errorf("after SIGKILL, still open: %q", held)
	}

	// A normal run: same.
	stdout, stderr2, status := runKboxIn(t, tmpdir, "image", "-S", img, "--read-only", "-c", "echo data > /tmp/x && cat /tmp/x")
	if status != 0 || stdout != "data\n" {
		t.Errorf("status %d, stdout %q\nstderr: %s", status, stdout, stderr2)
	}
	assertEmptyDir(t, tmpdir)
	if held := fdsInto(tmpdir, 0); len(held) != 0 {
		t.Errorf("after exit, still open: %q", held)
	}
}

// TestTmpFallback: when no backing file can be made (here RLIMIT_FSIZE is
// below the size asked for, so its ftruncate fails with EFBIG), kbox says
// so on one line and /tmp is the kernel's ramfs, which still takes small
// files. --tmp-size 0 asks for the ramfs and gets it silently; --tmp-size
// without a /tmp mount is a usage error.
func TestTmpFallback(t *testing.T) {
	img := imagePath(t)
	script := `echo small > /tmp/s && cat /tmp/s && stat -f -c %T /tmp && stat -c %a /tmp`
	tmpdir := t.TempDir()
	// ulimit -f counts 512-byte blocks: 64 MiB.
	cmd := exec.Command("/bin/sh", "-c", `ulimit -f 131072 && exec "$@"`, "sh", kboxBin(t), "image", "-S", img, "--read-only", "--tmp-size", "1G", "-c", script)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmpdir)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	status := exitStatus(cmd.Run())
	stdout, stderr := so.String(), se.String()
	wantErr := "kbox: warning: no scratch disk for /tmp (cannot make a backing file in " + tmpdir + ": set length 1073741824: file too large)"
	if status != 0 || stdout != "small\nramfs\n1777\n" || !strings.HasPrefix(stderr, wantErr) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("no backing file: status %d\nstdout %q\nstderr: %s", status, stdout, stderr)
	}
	assertEmptyDir(t, tmpdir)
	stdout, stderr, status = runKboxIn(t, tmpdir, "image", "-S", img, "--read-only", "--tmp-size", "0", "-c", script)
	if status != 0 || stdout != "small\nramfs\n1777\n" || stderr != "" {
		t.Errorf("--tmp-size 0: status %d\nstdout %q\nstderr: %s", status, stdout, stderr)
	}
	_, stderr, status = runKboxIn(t, tmpdir, "image", "-r", img, "--read-only", "--tmp-size", "1G", "--", "/bin/true")
	if status != 2 || !strings.Contains(stderr, "--tmp-size needs a /tmp") {
		t.Errorf("--tmp-size with -r: status %d, stderr: %s", status, stderr)
	}
}

// TestTmpImageUnchanged: writes to /tmp never reach the image. Read-only,
// the image file is bit-for-bit the same after the run; read-write (where
// the mount itself updates the superblock and atimes), the image's free
// blocks and inodes are the same, its /tmp is still empty and it is clean.
// The 40 MB written would not even fit in the test image's free space.
func TestTmpImageUnchanged(t *testing.T) {
	img := imagePath(t)
	script := `dd if=/dev/zero of=/tmp/z bs=1M count=40 2>/dev/null && mkdir /tmp/d && echo x > /tmp/d/x && stat -c %s /tmp/z`

	before := fileSum(t, img)
	stdout, stderr, status := runKboxIn(t, t.TempDir(), "image", "-S", img, "--read-only", "-c", script)
	if status != 0 || stdout != "41943040\n" {
		t.Errorf("read-only: status %d, stdout %q\nstderr: %s", status, stdout, stderr)
	}
	if after := fileSum(t, img); after != before {
		t.Errorf("read-only image changed: sha256 %s -> %s", before, after)
	}

	rw := copyImage(t, img)
	counts := func() string {
		out, err := exec.Command("dumpe2fs", "-h", rw).Output()
		if err != nil {
			t.Fatalf("dumpe2fs: %v", err)
		}
		var keep []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "Free blocks:") || strings.HasPrefix(l, "Free inodes:") {
				keep = append(keep, strings.Join(strings.Fields(l), " "))
			}
		}
		return strings.Join(keep, ", ")
	}
	was := counts()
	stdout, stderr, status = runKboxIn(t, t.TempDir(), "image", "-S", rw, "-c", script)
	if status != 0 || stdout != "41943040\n" {
		t.Errorf("read-write: status %d, stdout %q\nstderr: %s", status, stdout, stderr)
	}
	if now := counts(); now != was {
		t.Errorf("read-write image changed: %s -> %s", was, now)
	}
	out, err := exec.Command("debugfs", "-R", "ls /tmp", rw).Output()
	if f := strings.Fields(string(out)); err != nil || len(f) != 6 || f[2] != "." || f[5] != ".." {
		t.Errorf("the image's /tmp is not empty: %v\n%s", err, out)
	}
	assertCleanImage(t, rw)
}

// parentOf returns the parent pid of pid, or 0.
func parentOf(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestTmpHostFull: /tmp's disk is a sparse host file, so writes to /tmp are
// bounded by the host's free space too: with the file on a 24 MB host
// tmpfs, writing 60 MB to a 100 MB /tmp fails with ENOSPC at the write,
// and what was written reads back intact (it used to read back with zeros,
// the loss reported nowhere). Mounting the small tmpfs needs root.
func TestTmpHostFull(t *testing.T) {
	img := imagePath(t)
	dir := t.TempDir()
	if err := syscall.Mount("kbox-test", dir, "tmpfs", 0, "size=24m"); err != nil {
		t.Skipf("SKIP (needs to mount a small tmpfs, i.e. root): %v", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	out, stderr, st := runKboxIn(t, dir, "image", "-S", img, "--read-only", "--tmp-size", "100M", "--", "/bin/sh", "-c",
		`yes abcdefg | head -c 60000000 > /tmp/big; echo status=$?; stat -c size=%s /tmp/big; [ $(tr -d 'abcdefg\n' < /tmp/big | wc -c) = 0 ] && echo intact`)
	if st != 0 || !strings.Contains(out, "status=1\n") || !strings.Contains(out, "intact\n") {
		t.Fatalf("status %d, the write should fail with ENOSPC and what was written read back:\n%s\n%s", st, out, stderr)
	}
	var size int64
	fmt.Sscanf(out[strings.Index(out, "size=")+5:], "%d", &size)
	if size < 10<<20 || size > 24<<20 {
		t.Errorf("%d bytes written to /tmp, want about what 24 MB of host space takes", size)
	}
}
