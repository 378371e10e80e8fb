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
// or nil when it is none (a pipe, a terminal, a host file). In an
// in-process tier pid is kbox's own, whose fd it is (the tier's fd guard
// keeps the guest to its own numbers): its fstat, without a path.
func (m *Manager) OfGuestFd(pid, fd int) *Node {
	if m.count.Load() == 0 {
		return nil
	}
	var st unix.Stat_t
	var err error
	if pid == selfPid {
		err = unix.Fstat(fd, &st)
	} else {
		err = unix.Stat("/proc/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), &st)
	}
	if err != nil {
		return nil
	}
	return m.Lookup(st.Dev, st.Ino)
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
