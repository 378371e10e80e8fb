//go:build linux

package trap

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestFDSpace fills the free numbers below g with placeholders in this
// test process: a new fd of the process lands at g or above, guest fds
// are placed at the lowest free number and released back to
// placeholders, and numbers at g or above, or open before, are refused.
func TestFDSpace(t *testing.T) {
	const g = 200
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Max < g+300 {
		t.Skipf("hard limit on open files too low (%d)", lim.Max)
	}
	s, err := newFDSpace(g)
	if err != nil {
		t.Fatal(err)
	}
	nfd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if nfd < g {
		t.Fatalf("a new fd of the process is %d, below %d", nfd, g)
	}
	fd, err := s.place(nfd, 0, true)
	if err != nil || fd >= g || fd < 3 {
		t.Fatalf("place: %d %v", fd, err)
	}
	if !s.open(fd) {
		t.Errorf("placed fd %d not open", fd)
	}
	fd2, err := s.move(nfd) // moves and closes nfd
	if err != nil || fd2 <= fd || fd2 >= g {
		t.Fatalf("move: %d %v", fd2, err)
	}
	if _, err := unix.FcntlInt(uintptr(nfd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("move left %d open", nfd)
	}
	if err := s.release(fd); err != nil {
		t.Fatal(err)
	}
	if s.open(fd) {
		t.Errorf("released fd %d still open", fd)
	}
	if err := s.release(fd); err != unix.EBADF {
		t.Errorf("second release: %v, want EBADF", err)
	}
	// The released number is still taken on the host: a new fd of the
	// process does not land there.
	n2, _ := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if n2 < g {
		t.Errorf("after release, a new fd of the process is %d", n2)
	}
	unix.Close(n2)
	if got, err := s.alloc(0); err != nil || got != fd {
		t.Errorf("alloc after release: %d %v, want %d", got, err, fd)
	}
	if err := s.install(0, g, false); err != unix.EBADF {
		t.Errorf("install at g: %v, want EBADF", err)
	}
	if _, err := s.alloc(g); err != unix.EINVAL {
		t.Errorf("alloc from g: %v, want EINVAL", err)
	}
	for fd := range s.kbox {
		if s.kbox[fd] && (s.open(fd) || s.release(fd) != unix.EBADF || s.install(0, fd, false) != unix.EBADF) {
			t.Errorf("fd %d open before newFDSpace is the guest's", fd)
		}
	}
}
