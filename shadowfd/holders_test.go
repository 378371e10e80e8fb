package shadowfd

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOwnFds: the look for holders in kbox's own table is given every
// number below the guest's range once (placeholders are skipped there by
// the caller) and every open number above it, wherever the listing of
// /proc/thread-self/fd starts; closed numbers above it are not given.
func TestOwnFds(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Open fds at known numbers, some above the largest open before.
	var opened []int
	for _, at := range []int{300, 301, 517, 1030} {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Dup3(fd, at, unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		opened = append(opened, at)
	}
	defer func() {
		for _, fd := range opened {
			unix.Close(fd)
		}
	}()
	for _, tc := range []struct {
		name  string
		below int
	}{{"no guest range", 0}, {"a range below the fds", 64}, {"a range between them", 301}, {"a range above them all", 2048}} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[int]int{}
			ownFds(tc.below, func(fd int) { seen[fd]++ })
			for fd := 0; fd < tc.below; fd++ {
				if seen[fd] != 1 {
					t.Errorf("number %d below the range given %d times, want 1", fd, seen[fd])
				}
			}
			for _, fd := range opened {
				if seen[fd] != 1 {
					t.Errorf("open fd %d given %d times, want 1", fd, seen[fd])
				}
			}
			for fd, n := range seen {
				if fd < tc.below {
					continue
				}
				if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
					t.Errorf("closed number %d given (%d times)", fd, n)
				}
			}
		})
	}
}
