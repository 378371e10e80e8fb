//go:build lkl

package tests

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/kbox-project/kbox/lkl"
)

// anonHugeOf runs kbox (mode --read-only or --ephemeral) on a guest
// program and returns the AnonHugePages of kbox's process (the kernel's
// memory), kB, read as BenchmarkStartup reads an idle run: 3 s after the
// guest's start (kbox's settle, a second in, is done), or with ready 3 s
// after the guest's stdout says "ready".
func anonHugeOf(t *testing.T, mode string, ready bool, guest ...string) int {
	t.Helper()
	cmd := exec.Command(kboxBin(t), append([]string{"image", "-S", imagePath(t), mode, "--"}, guest...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	for sc := bufio.NewScanner(out); ready && sc.Scan() && sc.Text() != "ready"; {
	}
	time.Sleep(3 * time.Second)
	if _, err := os.Stat("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/smaps_rollup"); err != nil {
		t.Fatalf("kbox is gone before its memory was read: %v", err)
	}
	return rollupKB(cmd.Process.Pid, "AnonHugePages:")
}

// TestKernelHugePages: what a guest's work takes of the kernel's memory
// beyond its start (the page cache of 25 MB read) comes in huge pages
// (lkl.HugeRest), while an idle run (BenchmarkStartup's: /bin/sleep)
// keeps only the huge pages of boot's prefaulted ends (6 MB at kbox
// image's 128M: lkl's TestPrefault): its first pages, within 4 MB above
// boot's, stay small pages. A shell that then execs sleep (busybox, read
// whole) goes beyond them: it holds one partly used 2 MB page more. The
// work is 25 MB written in an ephemeral run: the image's files read, in
// a read-only or ephemeral run, come from the image's blocks
// (rootfs/extents.go) and leave the kernel's page cache as it was, which
// the runs that only read show.
func TestKernelHugePages(t *testing.T) {
	if ok, how := lkl.HostHugePages(); !ok {
		t.Skipf("*** %s: the host gives no huge pages to who asks; nothing to check ***", how)
	}
	const ends = 6 << 10
	idle := anonHugeOf(t, "--read-only", false, "/bin/sleep", "20")
	shell := anonHugeOf(t, "--read-only", true, "/bin/sh", "-c", "echo ready; exec /bin/sleep 20")
	t.Logf("AnonHugePages: an idle run %d kB, a shell's %d kB", idle, shell)
	if idle > ends || shell > ends+2<<10 {
		t.Errorf("%d kB of an idle run's memory in huge pages (want at most boot's %d), %d of a shell's (want at most %d)", idle, ends, shell, ends+2<<10)
	}
	const reads = "find /usr -type f -exec cat {} + >/dev/null; echo ready; sleep 20"
	const writes = "find /usr -type f -exec cat {} + >/root/all; echo ready; sleep 20"
	var wrote int
	for try := 0; try < 2; try++ { // a huge page may be refused once while the host compacts memory
		if wrote = anonHugeOf(t, "--ephemeral", true, "/bin/sh", "-c", writes); wrote >= ends+12<<10 {
			break
		}
	}
	t.Logf("AnonHugePages: after 25 MB written %d kB", wrote)
	if wrote < ends+12<<10 {
		t.Errorf("after 25 MB written: %d kB of kbox's memory in huge pages, want at least 12 MB more than boot's %d", wrote, ends)
	}
	for _, mode := range []string{"--read-only", "--ephemeral"} {
		read := anonHugeOf(t, mode, true, "/bin/sh", "-c", reads)
		t.Logf("AnonHugePages: after 25 MB read, %s, %d kB", mode, read)
		if read > ends+2<<10 {
			t.Errorf("after 25 MB read, %s: %d kB of kbox's memory in huge pages, want at most %d: the reads went through the kernel's page cache", mode, read, ends+2<<10)
		}
	}
}
