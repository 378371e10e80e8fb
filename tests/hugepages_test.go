//go:build lkl

package tests

import (
	"bufio"
	"os/exec"
	"testing"

	"github.com/kbox-project/kbox/lkl"
)

// anonHugeAfter runs kbox on a guest shell command that prints "ready"
// when it is done and then sleeps, and returns the AnonHugePages of kbox's
// process (the kernel's memory) at that point, kB.
func anonHugeAfter(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command(kboxBin(t), "image", "-S", imagePath(t), "--read-only", "--", "/bin/sh", "-c", script+"; echo ready; sleep 20")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
	}
	return rollupKB(cmd.Process.Pid, "AnonHugePages:")
}

// TestKernelHugePages: what a guest's work takes of the kernel's memory
// beyond its start (the page cache of 25 MB read) comes in huge pages
// (lkl.HugeRest), while a guest's start alone leaves only the huge pages
// of boot's prefaulted ends (6 MB at kbox image's 128M: lkl's
// TestPrefault), so that an idle run has no more memory.
func TestKernelHugePages(t *testing.T) {
	if ok, how := lkl.HostHugePages(); !ok {
		t.Skipf("*** %s: the host gives no huge pages to who asks; nothing to check ***", how)
	}
	idle := anonHugeAfter(t, "true")
	t.Logf("AnonHugePages: a guest's start %d kB", idle)
	if idle > 6<<10 {
		t.Errorf("a guest's start: %d kB of kbox's memory in huge pages, want at most boot's 6144", idle)
	}
	var read int
	for try := 0; try < 2; try++ { // a huge page may be refused once while the host compacts memory
		if read = anonHugeAfter(t, "find /usr -type f -exec cat {} + >/dev/null"); read >= idle+12<<10 {
			break
		}
	}
	t.Logf("AnonHugePages: after 25 MB read %d kB", read)
	if read < idle+12<<10 {
		t.Errorf("after 25 MB read: %d kB of kbox's memory in huge pages, want at least 12 MB more than a guest's start alone (%d kB)", read, idle)
	}
}
