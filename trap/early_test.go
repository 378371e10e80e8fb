//go:build linux && amd64 && cgo

package trap

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFDTableGrownEarly: this test binary links early.c, whose
// constructor grew the fd table before the Go runtime's threads existed,
// so Prepare's fds above the guest's range need no grace period.
func TestFDTableGrownEarly(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Max < fdTableSlots {
		t.Skipf("hard limit on open files below %d (%d)", fdTableSlots, lim.Max)
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^FDSize:\s+(\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no FDSize in /proc/self/status:\n%s", b)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < fdTableSlots {
		t.Fatalf("fd table has %d slots, want %d or more", n, fdTableSlots)
	}
}
