package shadowfd

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestSpares gives descriptions back to nodes: a clean one becomes the
// node's spare, taken again at offset 0; a node keeps one; the least
// recently returned goes when maxSpares are kept; a dropped node, or one
// given back not clean, closes it; spares count as kbox's own fds.
func TestSpares(t *testing.T) {
	m := New()
	open := func() int {
		fd, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	isOpen := func(fd int) bool {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		return err == nil
	}
	node := func() *Node { return &Node{mgr: m, spare: -1, content: -1} }

	n := node()
	fd := open()
	unix.Read(fd, make([]byte, 100))
	n.Return(fd, true)
	if n.spare != fd || m.spares != 1 || !m.masters[fd] {
		t.Fatalf("a clean return: spare %d, %d spares, master %v", n.spare, m.spares, m.masters[fd])
	}
	second := open()
	n.Return(second, true) // the node has one: closed
	if isOpen(second) || n.spare != fd {
		t.Errorf("a second spare of a node: open %v, spare %d", isOpen(second), n.spare)
	}
	if got := m.takeSpare(n); got != fd || n.spare != -1 || m.spares != 0 || m.masters[fd] {
		t.Fatalf("takeSpare: %d (want %d), spare %d, %d spares", got, fd, n.spare, m.spares)
	}
	if off, _ := unix.Seek(fd, 0, unix.SEEK_CUR); off != 0 {
		t.Errorf("a spare taken at offset %d", off)
	}
	if m.takeSpare(n) != -1 {
		t.Error("a second take found a spare")
	}
	n.Return(fd, false)
	if isOpen(fd) || n.spare != -1 {
		t.Error("a return not clean kept the description")
	}

	nodes := make([]*Node, maxSpares+1)
	fds := make([]int, len(nodes))
	for i := range nodes {
		nodes[i], fds[i] = node(), open()
		nodes[i].Return(fds[i], true)
	}
	if m.spares != maxSpares || isOpen(fds[0]) || nodes[0].spare != -1 || nodes[1].spare != fds[1] {
		t.Errorf("%d returns: %d spares, the first still open %v", len(nodes), m.spares, isOpen(fds[0]))
	}
	// Taken from the middle of the list, then dropped nodes.
	if got := m.takeSpare(nodes[5]); got != fds[5] {
		t.Fatalf("takeSpare from the list's middle: %d", got)
	}
	unix.Close(fds[5])
	m.mu.Lock()
	for _, n := range nodes[1:] {
		m.forgetLocked(n)
	}
	m.mu.Unlock()
	if m.spares != 0 || m.spareHead != nil || m.spareTail != nil {
		t.Errorf("after the drops: %d spares", m.spares)
	}
	for i, fd := range fds[1:] {
		if isOpen(fd) && i+1 != 5 {
			t.Errorf("a dropped node's spare %d is open", fd)
		}
	}
	fd = open()
	nodes[2].Return(fd, true)
	if isOpen(fd) || nodes[2].spare != -1 {
		t.Error("a dropped node took a spare")
	}
}

// TestCopiesParkedForPOSIXLocks: with SharedFiles, kbox's copy of a
// description of a file this process holds a POSIX lock on is parked, not
// closed (the close would release the lock), until the lock is gone.
func TestCopiesParkedForPOSIXLocks(t *testing.T) {
	m := New()
	m.SharedFiles = true
	path := t.TempDir() + "/f"
	lockfd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lockfd)
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: unix.SEEK_SET}
	if err := unix.FcntlFlock(uintptr(lockfd), unix.F_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	open := func() int {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	n := &Node{mgr: m, spare: -1, content: -1}
	c := open()
	n.CloseCopy(c)
	if len(n.parked) != 1 || n.parked[0] != c || !posixLocked(c) {
		t.Fatalf("a copy closed under a lock: parked %v, locked %v", n.parked, posixLocked(c))
	}
	n.Return(open(), false) // not clean: closed, or parked
	m.mu.Lock()
	left := m.unparkLocked(n)
	m.mu.Unlock()
	if !left || len(n.parked) != 2 {
		t.Fatalf("unparked under the lock: %v", n.parked)
	}
	lk.Type = unix.F_UNLCK
	if err := unix.FcntlFlock(uintptr(lockfd), unix.F_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	left = m.unparkLocked(n)
	m.mu.Unlock()
	if left || n.parked != nil {
		t.Errorf("parked after the lock went: %v", n.parked)
	}
	if _, err := unix.FcntlInt(uintptr(c), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("a parked copy is still open after unparking")
	}
	// Without SharedFiles (the seccomp tier) a copy is closed.
	m.SharedFiles = false
	lk.Type = unix.F_WRLCK
	unix.FcntlFlock(uintptr(lockfd), unix.F_SETLK, &lk)
	c = open()
	n.CloseCopy(c)
	if len(n.parked) != 0 {
		t.Errorf("parked without SharedFiles")
	}
}
