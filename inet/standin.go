package inet

import (
	"encoding/binary"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The stand-in of a fresh stream socket (docs/networking.md, "Sockets and
// readiness"). Until its first connect or listen, the guest's fd is an
// unconnected host TCP socket that kbox never connects, binds or listens
// on: its reads fail with ENOTCONN, its writes with EPIPE (and SIGPIPE
// without MSG_NOSIGNAL), poll reports POLLOUT and POLLHUP, shutdown says
// ENOTCONN: Linux's answers, given natively by the host kernel, since the
// guest's reads and writes on a host fd are not notified. At the first
// connect or listen the pair takes its place (renew).
//
// kbox holds no copy of it (a copy would keep the socket open): it sees
// the guest's last close through an inotify watch on the socket's inode,
// whose IN_CLOSE the kernel reports once the file's last reference is
// closed. The watch stays after renew until that close, so a copy the
// guest made before (dup, fork) stays known as a stand-in: kbox refuses
// to let the host listen on it (standInLeft).
//
// A kernel that reports no close of a socket (probed once) or a failed
// watch leaves the socket with the stand-in of before: a pair whose kbox
// end is shut for writing (reads give EOF, writes are dropped).
//
// The same watches keep the guest's end of a reset socket known until
// the guest closes it (watchReset, reset.go).

// standIns are the watches of the stand-ins and of reset sockets' ends.
type standIns struct {
	once  sync.Once
	fd    atomic.Int32        // the inotify fd; -1: none (New), no stand-ins
	byIno map[uint64]*standIn // by the stand-in's inode (Net.mu)
	byWd  map[int32]*standIn  // by the watch (Net.mu)
}

type standIn struct {
	ino uint64
	wd  int32
	s   *Sock // nil: the guest's end of a reset socket (watchReset)
}

// closesKey is the reaper's epoll data of the inotify fd: no inode.
const closesKey = ^uint64(0)

// closesFd returns the inotify fd of the stand-ins' watches, made (and
// given to the reaper) at the first call; -1 when the kernel does not
// report the close of a socket.
func (n *Net) closesFd() int {
	w := &n.stands
	w.once.Do(func() {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return
		}
		if !closeReported(fd) {
			unix.Close(fd)
			return
		}
		n.mu.Lock()
		w.byIno, w.byWd = map[uint64]*standIn{}, map[int32]*standIn{}
		n.mu.Unlock()
		w.fd.Store(int32(fd))
		n.once.Do(func() { go n.reap() })
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: -1, Pad: -1} // closesKey
		if unix.EpollCtl(n.reaper, unix.EPOLL_CTL_ADD, fd, &ev) != nil {
			w.fd.Store(-1)
			unix.Close(fd)
		}
	})
	return int(w.fd.Load())
}

// closeReported says whether the kernel reports the last close of a
// socket to inotify fd (it does for every file not marked otherwise):
// a socket watched, closed, and its event read.
func closeReported(fd int) bool {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	wd, err := unix.InotifyAddWatch(fd, fdPath(s), unix.IN_CLOSE)
	unix.Close(s)
	if err != nil {
		return false
	}
	defer unix.InotifyRmWatch(fd, uint32(wd))
	seen := false
	forEvents(fd, func(w int32, mask uint32) { seen = seen || w == int32(wd) && mask&unix.IN_CLOSE != 0 })
	return seen
}

// fdPath names kbox's own fd fd for a path lookup.
func fdPath(fd int) string { return "/proc/thread-self/fd/" + strconv.Itoa(fd) }

// forEvents reads inotify fd's pending events (without waiting) and calls
// f with each event's watch and mask.
func forEvents(fd int, f func(wd int32, mask uint32)) {
	buf := make([]byte, 4096)
	for {
		m, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= m; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			l := int(binary.NativeEndian.Uint32(buf[off+12:]))
			f(wd, mask)
			off += unix.SizeofInotifyEvent + l
		}
	}
}

// standIn makes fresh stream socket lfd's stand-in and registers the
// socket; the caller installs sfd in the guest and closes it. It fails
// when the kernel reports no close of a socket or the watch cannot be
// had: the caller then makes the socket's pair (pair).
func (n *Net) standIn(lfd, family int, nonblock bool) (s *Sock, sfd int, en unix.Errno) {
	ifd := n.closesFd()
	if ifd < 0 {
		return nil, -1, unix.ENOSYS
	}
	typ := unix.SOCK_STREAM | unix.SOCK_CLOEXEC
	if nonblock {
		typ |= unix.SOCK_NONBLOCK
	}
	sfd, err := unix.Socket(unix.AF_INET, typ, 0)
	if err != nil {
		return nil, -1, sysabi.Errno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		unix.Close(sfd)
		return nil, -1, sysabi.Errno(err)
	}
	wd, err := unix.InotifyAddWatch(ifd, fdPath(sfd), unix.IN_CLOSE)
	if err != nil {
		unix.Close(sfd)
		return nil, -1, sysabi.Errno(err)
	}
	s = &Sock{n: n, lfd: lfd, kfd: -1, ino: st.Ino, family: family, typ: unix.SOCK_STREAM, fresh: true}
	if en := n.addReady(s); en != 0 {
		unix.InotifyRmWatch(ifd, uint32(wd))
		unix.Close(sfd)
		return nil, -1, en
	}
	si := &standIn{ino: st.Ino, wd: int32(wd), s: s}
	n.mu.Lock()
	n.byIno[st.Ino] = s
	n.stands.byIno[st.Ino] = si
	n.stands.byWd[si.wd] = si
	n.mu.Unlock()
	n.Opened.Add(1)
	return s, sfd, 0
}

// reapStandIns ends the sockets whose stand-in the guest closed before
// their first connect or listen, and forgets the stand-ins of renewed
// sockets that are closed now.
func (n *Net) reapStandIns() {
	n.ending.Add(1) // anyGone: a close read here is not lost meanwhile
	defer n.ending.Add(-1)
	fd := int(n.stands.fd.Load())
	forEvents(fd, func(wd int32, mask uint32) {
		if mask&unix.IN_CLOSE == 0 {
			return // IN_IGNORED: a watch removed
		}
		n.mu.Lock()
		si := n.stands.byWd[wd]
		var s *Sock
		if si != nil {
			delete(n.stands.byWd, wd)
			delete(n.stands.byIno, si.ino)
			if si.s != nil && n.byIno[si.ino] == si.s { // still fresh: the socket ends
				s = si.s
				n.ending.Add(1)
				n.noting.Add(1)
				delete(n.byIno, si.ino)
			}
		}
		n.mu.Unlock()
		if si == nil {
			return
		}
		unix.InotifyRmWatch(fd, uint32(wd))
		if s != nil {
			go func() {
				s.end()
				n.ending.Add(-1)
			}()
		}
	})
}

// closesPending says whether a stand-in's close waits to be read.
func (n *Net) closesPending() bool {
	fd := int(n.stands.fd.Load())
	if fd < 0 {
		return false
	}
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	m, err := unix.Poll(pfd[:], 0)
	return err == nil && m == 1
}
