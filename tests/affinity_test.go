//go:build lkl

package tests

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The seccomp tier pins a task that opens files, and the serving thread, to
// one CPU (seccomp/supervisor/colocate.go). The guest must still see its own
// CPU mask: in sched_getaffinity after opens, in a child forked after them
// (which must not inherit the pin), in nproc, and after it sets its own mask;
// and the pin must really end once the task goes quiet, for it and for the
// child and thread it made meanwhile that made no system call.
func TestAffinityHidesPin(t *testing.T) {
	img := imagePath(t)
	n := runtime.NumCPU() // kbox and its guest inherit this test's mask
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/opt/tests/affinity")
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	var before, after, child, childReal, set, setAfter, released, heirs, threadHeir int
	if _, err := fmt.Sscanf(out, "before=%d after=%d child=%d childreal=%d set=%d setafter=%d released=%d heirs=%d threadheir=%d",
		&before, &after, &child, &childReal, &set, &setAfter, &released, &heirs, &threadHeir); err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	if heirs != n || threadHeir != n {
		t.Errorf("a child and a thread made while pinned, with no system call since: real masks %d and %d CPUs, want %d (they kept the pin)",
			heirs, threadHeir, n)
	}
	if before != n || after != n || child != n || set != 1 || setAfter != 1 {
		t.Errorf("guest saw %q; want %d CPUs before/after opens and in the child, 1 after setting its own mask", out, n)
	}
	if released != n {
		t.Errorf("real mask after 200 ms without a notification: %d CPUs, want %d (the pin outlived its hold)", released, n)
	}
	if n > 1 && childReal != 1 {
		t.Logf("the child was not pinned (real mask %d CPUs): the pin was not exercised", childReal)
	}
	out, stderr, st = runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/bash", "-c",
		"for i in 1 2 3; do read x < /etc/hostname; done; exec 3</etc/hostname; nproc")
	if st != 0 || strings.TrimSpace(out) != strconv.Itoa(n) {
		t.Errorf("nproc after opens = %q (status %d), want %d\n%s", out, st, n, stderr)
	}
}
