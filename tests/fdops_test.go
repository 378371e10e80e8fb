//go:build lkl

package tests

import "testing"

// Descriptor operations on virtual fds and across the host/virtual fd
// ranges, and write-back of mapped shadows.
func TestFdOps(t *testing.T) {
	img := copyImage(t, imagePath(t))
	runCases(t, []string{"image", "-S", img}, []guestCase{
		{"F_SETFL O_NONBLOCK and O_APPEND on virtual fds", []string{"--", "/opt/tests/fdflags"}, 0, []string{"fdflags ok\n"}, []string{"FAIL"}},
	})
}
