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
	// Two numbers open before, with a gap: they stay as they are, kbox's.
	var before []int
	for fd := 40; fd < g && len(before) < 2; fd += 7 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == unix.EBADF {
			zero, err := unix.Open("/dev/zero", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Dup3(zero, fd, unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			unix.Close(zero)
			before = append(before, fd)
			defer unix.Close(fd)
		}
	}
	s, err := newFDSpace(g)
	if err != nil {
		t.Fatal(err)
	}
	for fd := 0; fd < g; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			t.Fatalf("fd %d below %d is not filled: %v", fd, g, err)
		}
	}
	for _, fd := range before {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(1, 5) || !s.kbox[fd] || s.placeholder(fd) {
			t.Errorf("fd %d, open before, is not /dev/zero and kbox's: %v rdev %#x kbox %v", fd, err, st.Rdev, s.kbox[fd])
		}
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

// returns records what lend gives back.
type returns struct {
	fds   []int
	clean []bool
}

func (r *returns) Return(fd int, clean bool) {
	r.fds = append(r.fds, fd)
	r.clean = append(r.clean, clean)
}

// TestLentDescriptions lends descriptions of a file to guest fds and
// closes or replaces those: each comes back to its lender, clean only when
// no call that could copy it or change its state ran while it was lent
// and its status flags are as opened (lend.go).
func TestLentDescriptions(t *testing.T) {
	const g = 600
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Max < g+maxLent+300 {
		t.Skipf("hard limit on open files too low (%d)", lim.Max)
	}
	s, err := newFDSpace(g)
	if err != nil {
		t.Fatal(err)
	}
	open := func() int {
		fd, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil || fd < g {
			t.Fatalf("open: %d %v", fd, err)
		}
		return fd
	}
	cases := []struct {
		name   string
		before func()
		during func(gfd int)
		after  func()
		clean  bool
	}{
		{name: "closed as lent", clean: true},
		{name: "read meanwhile", during: func(gfd int) { unix.Read(gfd, make([]byte, 10)) }, clean: true},
		{name: "a sharing call ran", during: func(int) { sharesBegin(); sharesEnd() }, clean: false},
		// It began before the lend: the epoch is the lend's at the close.
		{name: "a sharing call under way", before: sharesBegin, after: sharesEnd, clean: false},
		{name: "O_NONBLOCK set natively", during: func(gfd int) { unix.SetNonblock(gfd, true) }, clean: false},
	}
	for _, c := range cases {
		if c.before != nil {
			c.before()
		}
		r := &returns{}
		h := open()
		gfd, err := s.lend(h, true, r)
		if err != nil || gfd >= g {
			t.Fatalf("%s: lend: %d %v", c.name, gfd, err)
		}
		if c.during != nil {
			c.during(gfd)
		}
		if len(r.fds) != 0 {
			t.Errorf("%s: given back while lent: %v", c.name, r.fds)
		}
		if err := s.release(gfd); err != nil {
			t.Fatalf("%s: release: %v", c.name, err)
		}
		if c.after != nil {
			c.after()
		}
		if len(r.fds) != 1 || r.fds[0] != h || r.clean[0] != c.clean {
			t.Errorf("%s: given back %v clean %v, want [%d] clean %v", c.name, r.fds, r.clean, h, c.clean)
		}
		if !s.placeholder(gfd) {
			t.Errorf("%s: guest fd %d not a placeholder after its close", c.name, gfd)
		}
		unix.Close(h)
	}

	// dup2 over a lent fd gives it back; the number stays the guest's.
	r := &returns{}
	h := open()
	gfd, _ := s.lend(h, true, r)
	other, _ := s.place(open(), 0, true)
	if err := s.install(other, gfd, false); err != nil {
		t.Fatal(err)
	}
	if len(r.fds) != 1 || r.fds[0] != h || !s.open(gfd) || s.nlent != 0 {
		t.Errorf("install over a lent fd: given back %v, open %v, lent %d", r.fds, s.open(gfd), s.nlent)
	}
	s.release(gfd)
	s.release(other)
	unix.Close(h)

	// Beyond maxLent, kbox keeps no copy: it is given back at once, not
	// clean (the guest holds it).
	r = &returns{}
	var gfds []int
	for range maxLent + 1 {
		fd, err := s.lend(open(), true, r)
		if err != nil {
			t.Fatal(err)
		}
		gfds = append(gfds, fd)
	}
	if len(r.fds) != 1 || r.clean[0] || s.nlent != maxLent {
		t.Errorf("lent %d: given back %v clean %v, %d kept", maxLent+1, r.fds, r.clean, s.nlent)
	}
	for _, fd := range gfds {
		s.release(fd)
	}
	if len(r.fds) != maxLent+1 || s.nlent != 0 {
		t.Errorf("after the closes: %d given back, %d kept", len(r.fds), s.nlent)
	}
	for _, fd := range r.fds {
		unix.Close(fd)
	}
}
