package shadowfd

import "golang.org/x/sys/unix"

// Spare descriptions. In the in-process tiers the guest shares kbox's fd
// table, and kbox sees every call that could copy a description or change
// its state (trap/lend.go). There a plain read-only description of a
// content file that kbox hands out can come back to its node when the
// guest closes its fd, clean (never copied, its flags as opened), and
// serve the node's next plain read-only open from offset 0: the open
// costs an lseek instead of a new description (a lookup by name, a
// file's allocation, and its release at the close).
//
// A node keeps at most one spare; at most maxSpares spares exist, the
// least recently returned closed first. A spare is kbox's own fd: a look
// for holders skips it (masters), and a write lease's check of its node
// closes it first (leaseHeld), so a spare never keeps a node held.

// maxSpares bounds the spares of all nodes together.
const maxSpares = 32

// Plain reports whether a read-only open with guest flags flags may take
// a node's spare and leave one at its close: nothing but O_RDONLY among
// the flags a description keeps.
func Plain(flags int) bool {
	const kept = unix.O_ACCMODE | unix.O_APPEND | unix.O_NONBLOCK | unix.O_NOATIME | unix.O_DIRECT |
		unix.O_ASYNC | unix.O_SYNC | unix.O_DSYNC | unix.O_PATH | unix.O_TRUNC | unix.O_CREAT
	return flags&kept == unix.O_RDONLY
}

// takeSpare returns n's spare moved to offset 0, or -1.
func (m *Manager) takeSpare(n *Node) int {
	m.mu.Lock()
	fd := n.spare
	if fd >= 0 {
		m.unlinkSpareLocked(n)
	}
	m.mu.Unlock()
	if fd < 0 {
		return -1
	}
	if _, _, e := unix.RawSyscall(unix.SYS_LSEEK, uintptr(fd), 0, unix.SEEK_SET); e != 0 {
		closeRaw(fd)
		return -1
	}
	return fd
}

// Return gives back fd, a plain read-only description of n's content that
// was handed out (OpenCached's lend), once the guest's fd of it closed:
// it becomes n's spare when clean, else it is closed. A read through it
// gives LKL its access time first, if due (closedRead).
func (n *Node) Return(fd int, clean bool) {
	m := n.mgr
	if n.atimeDue.Load() {
		m.closedRead(n, fd)
	}
	if clean {
		m.mu.Lock()
		if !n.dropped && n.spare < 0 && !m.closed.Load() {
			if m.spares >= maxSpares {
				m.dropSpareLocked(m.spareHead)
			}
			n.spare = fd
			m.spares++
			n.sprev, n.snext = m.spareTail, nil
			if m.spareTail != nil {
				m.spareTail.snext = n
			} else {
				m.spareHead = n
			}
			m.spareTail = n
			m.markMasterLocked(fd, true)
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
	}
	n.CloseCopy(fd)
}

// CloseCopy ends kbox's copy fd of a description of n's content: closed,
// or parked while the guest holds POSIX locks on the file (SharedFiles).
func (n *Node) CloseCopy(fd int) {
	m := n.mgr
	m.mu.Lock()
	m.closeCopyLocked(n, fd)
	m.mu.Unlock()
}

// closeCopyLocked is CloseCopy; the caller holds m.mu. In the in-process
// tiers the guest's POSIX locks belong to the fd table it shares with
// kbox, and Linux releases a process's locks on a file at the close of
// any of its fds of the file: kbox's close of its copy would release
// the guest's locks, which the guest did not close. Such a copy waits
// in n.parked until the guest holds none (unparkLocked) or the node goes.
func (m *Manager) closeCopyLocked(n *Node, fd int) {
	if m.SharedFiles && posixLocked(fd) {
		n.parked = append(n.parked, fd)
		m.markMasterLocked(fd, true)
		return
	}
	closeRaw(fd)
}

// unparkLocked closes n's parked copies once the guest holds no POSIX
// lock on the file, and reports whether any is left. The caller holds
// m.mu.
func (m *Manager) unparkLocked(n *Node) bool {
	if len(n.parked) == 0 || posixLocked(n.parked[0]) {
		return len(n.parked) > 0
	}
	for _, fd := range n.parked {
		m.markMasterLocked(fd, false)
		closeRaw(fd)
	}
	n.parked = nil
	return false
}

// posixLocked reports whether a lock of another owner than fd's
// description (the guest's POSIX locks, owned by the fd table) lies on
// fd's file: F_OFD_GETLK of a write lock over the whole file conflicts
// with any.
func posixLocked(fd int) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: unix.SEEK_SET}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}

// dropSpareLocked closes n's spare, if any. The caller holds m.mu.
func (m *Manager) dropSpareLocked(n *Node) {
	if n == nil || n.spare < 0 {
		return
	}
	fd := n.spare
	m.unlinkSpareLocked(n)
	m.closeCopyLocked(n, fd)
}

// unlinkSpareLocked takes n's spare out of the Manager's list, leaving
// the fd to the caller. The caller holds m.mu.
func (m *Manager) unlinkSpareLocked(n *Node) {
	m.markMasterLocked(n.spare, false)
	n.spare = -1
	m.spares--
	if n.sprev != nil {
		n.sprev.snext = n.snext
	} else {
		m.spareHead = n.snext
	}
	if n.snext != nil {
		n.snext.sprev = n.sprev
	} else {
		m.spareTail = n.sprev
	}
	n.sprev, n.snext = nil, nil
}

// markMasterLocked records fd as kbox's own (or no longer) for the looks
// for holders. The caller holds m.mu.
func (m *Manager) markMasterLocked(fd int, own bool) {
	if fd >= len(m.masters) {
		if !own {
			return
		}
		m.masters = append(m.masters, make([]bool, fd+1-len(m.masters))...)
	}
	m.masters[fd] = own
}

// closeRaw closes fd, a description of a content file (tmpfs or memfd),
// whose close never waits: a raw syscall, without the scheduler's
// hand-off.
func closeRaw(fd int) { unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0) }
