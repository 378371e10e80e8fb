package shadowfd

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Finding a node: by its content file's host inode, by a guest fd that is
// a description of it, or by its LKL inode.

// Lookup returns the node whose content file has host inode ino on device
// dev, or nil.
func (m *Manager) Lookup(dev, ino uint64) *Node {
	if m.count.Load() == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byHost[hostKey{dev, ino}]
}

// OfGuestFd returns the node that fd of process pid is a description of,
// or nil when it is none (a pipe, a terminal, a host file): the file
// /proc/PID/fd/N leads to. In an in-process tier pid is kbox's own,
// whose fd it is (the tier's fd guard keeps the guest to its own
// numbers): OfHostFd. It allocates nothing.
func (m *Manager) OfGuestFd(pid, fd int) *Node {
	if m.count.Load() == 0 {
		return nil
	}
	var st unix.Stat_t
	if StatGuestFd(pid, fd, &st) != nil {
		return nil
	}
	return m.Lookup(st.Dev, st.Ino)
}

// StatGuestFd is fstat(2) of fd of process pid, made by kbox: the stat of
// /proc/PID/fd/N, or of kbox's own fd in an in-process tier (pid is
// kbox's). Served for every fstat of a host fd, it allocates nothing.
func StatGuestFd(pid, fd int, st *unix.Stat_t) error {
	if pid == selfPid {
		return unix.Fstat(fd, st)
	}
	return guestFdStat(pid, fd, st)
}

// OfHostFd returns the node that kbox's own fd fd is a description of,
// or nil.
func (m *Manager) OfHostFd(fd int) *Node {
	if m.count.Load() == 0 {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return nil
	}
	return m.Lookup(st.Dev, st.Ino)
}

// guestFdStat is stat(2) of /proc/PID/fd/N, its path made in a buffer of
// the caller's frame.
func guestFdStat(pid, fd int, st *unix.Stat_t) error {
	var b [48]byte
	p := append(b[:0], "/proc/"...)
	p = strconv.AppendInt(p, int64(pid), 10)
	p = append(p, "/fd/"...)
	p = strconv.AppendInt(p, int64(fd), 10)
	p = append(p, 0)
	return statPath(&p[0], st)
}

// selfPid is kbox's process id.
var selfPid = os.Getpid()

// OfInode returns the node of LKL inode (dev, ino), or nil.
func (m *Manager) OfInode(dev, ino uint64) *Node {
	if m.count.Load() == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodes[nodeKey{dev, ino}]
}
