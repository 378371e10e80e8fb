// The file family's inotify handlers and the guest's inotify fds (FamFile
// in table.go).

package dispatch

import (
	"bytes"
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/lklready"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// inotify for the guest, on LKL's files (docs/tiers.md, "inotify").
//
// The guest's inotify fd is one end of a host SOCK_STREAM socketpair, so
// that read, poll, select and epoll on it stay native and mix with any
// other host fd. Behind it kbox holds an LKL inotify fd (non-blocking,
// registered in an LKL epoll set that is swept without waiting: package
// lklready, as the internet sockets' are). kbox moves LKL's events, whole,
// to its end after each call that may make some (deliver), keeping no more
// than one largest event's bytes unread there: a guest read with the
// buffer inotify(7) asks for takes every event given, never part of one.
// inotify_add_watch and inotify_rm_watch find the LKL fd by the inode of
// the guest's fd (after dup, fork or SCM_RIGHTS as well) and act on it
// with the guest's path, resolved as every path is, and credentials. The
// guest's last close reaches kbox's end as EOF: kbox then closes the LKL
// fd.

// inotifies are the guest's inotify fds.
type inotifies struct {
	mu    sync.Mutex
	byIno map[uint64]*inotifyFd        // by the inode of the guest's end
	live  atomic.Int32                 // len(byIno): dispatch delivers after changes while > 0
	all   atomic.Pointer[[]*inotifyFd] // byIno's values, for notifySweep
	ready lklready.Set                 // the LKL inotify fds' readiness
	// gone is when writersGone last closed a file (UnixNano): its
	// IN_CLOSE_WRITE comes up to two clock ticks later (settleGone).
	gone atomic.Int64

	probe  sync.Once
	absent bool // LKL has no inotify (CONFIG_INOTIFY_USER)
}

// missing reports whether LKL lacks inotify: every inotify call is then
// ENOSYS, as on a kernel without it, whatever its arguments.
func (s *inotifies) missing() bool {
	s.probe.Do(func() {
		fd, le := lkl.Syscall6(lkl.SysInotifyInit1, uintptr(lkl.OpenFlagsToLKL(unix.O_CLOEXEC)), 0, 0, 0, 0, 0)
		if le == 0 {
			lklClose(int(fd))
		}
		s.absent = le == unix.ENOSYS
	})
	return s.absent
}

// changedLocked follows a change of byIno (s.mu held).
func (s *inotifies) changedLocked() {
	all := make([]*inotifyFd, 0, len(s.byIno))
	for _, f := range s.byIno {
		all = append(all, f)
	}
	s.all.Store(&all)
	s.live.Store(int32(len(all)))
}

// has reports whether ino is the inode of a guest inotify fd's end.
func (s *inotifies) has(ino uint64) bool {
	if s.live.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byIno[ino] != nil
}

// fdinfo makes /proc/PID/fdinfo/N of the guest's inotify fd whose end has
// inode ino (the host's fdinfo of that fd is at hostFdinfo): LKL's fdinfo
// of the LKL fd, with its watches ("inotify wd:..."), and the flags of the
// guest's end on an inotify file (read-only). False when ino is none.
func (s *inotifies) fdinfo(cfg procfs.Config, ino uint64, hostFdinfo string) (func() []byte, bool) {
	if s.live.Load() == 0 || !cfg.HasKernelProc {
		return nil, false
	}
	s.mu.Lock()
	f := s.byIno[ino]
	s.mu.Unlock()
	if f == nil {
		return nil, false
	}
	return func() []byte {
		flags := unix.O_RDONLY
		if b, err := hostproc.Read(hostFdinfo); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "flags:\t"); ok {
					if fl, err := strconv.ParseInt(v, 8, 64); err == nil {
						flags |= int(fl) & (unix.O_NONBLOCK | unix.O_CLOEXEC)
					}
				}
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		var b []byte
		if f.lfd >= 0 {
			b, _ = lkl.ReadFileAt(cfg.KernelProc, "self/fdinfo/"+strconv.Itoa(f.lfd))
		}
		return procfs.FdinfoFlags(b, flags)
	}, true
}

// inotifyFd is one guest inotify fd.
type inotifyFd struct {
	set  *inotifies
	ino  uint64
	kfd  int      // kbox's end
	file *os.File // kfd, in Go's poller
	rdy  chan struct{}
	id   uint64 // in set.ready

	mu     sync.Mutex
	lfd    int  // the LKL inotify fd; -1 once closed (by the pump)
	closed bool // the guest closed its end everywhere

	dmu      sync.Mutex // deliver's, for what follows
	buf      []byte     // events read from LKL; buf[head:tail] are held
	head     int
	tail     int
	unread   int    // bytes sent since the guest's end was last seen empty
	lastSent []byte // the last event sent
}

func (f *inotifyFd) Wake(uint32) { lklready.Signal(f.rdy) }

// inotifyFlags are inotify_init1's flags.
const inotifyFlags = unix.IN_NONBLOCK | unix.IN_CLOEXEC

// inotifyEventMax is the size of the largest inotify event: its header
// and a name of NAME_MAX bytes with its NUL.
const inotifyEventMax = unix.SizeofInotifyEvent + unix.NAME_MAX + 1

// sysInotifyInit serves inotify_init(2).
func sysInotifyInit(e *Engine, r *Request) Result { return e.inotifyInit(r, 0) }

// sysInotifyInit1 serves inotify_init1(2).
func sysInotifyInit1(e *Engine, r *Request) Result { return e.inotifyInit(r, int(int32(r.Args[0]))) }

func (e *Engine) inotifyInit(r *Request, flags int) Result {
	if e.notify.missing() {
		return errno(unix.ENOSYS, ENOSYS)
	}
	if flags&^inotifyFlags != 0 {
		return errno(unix.EINVAL, Emulated)
	}
	// EMFILE past the user's max_user_instances.
	lfd, le := lkl.Syscall6(lkl.SysInotifyInit1, uintptr(lkl.OpenFlagsToLKL(unix.O_NONBLOCK|unix.O_CLOEXEC)), 0, 0, 0, 0, 0)
	if le != 0 {
		return errno(le, LKL)
	}
	p, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		lklClose(int(lfd))
		return fail(err, Host)
	}
	gend, kfd := p[0], p[1]
	var st unix.Stat_t
	if err := unix.Fstat(gend, &st); err != nil {
		unix.Close(gend)
		unix.Close(kfd)
		lklClose(int(lfd))
		return fail(err, Host)
	}
	if flags&unix.IN_NONBLOCK != 0 {
		unix.SetNonblock(gend, true)
	}
	unix.SetNonblock(kfd, true)
	f := &inotifyFd{set: &e.notify, ino: st.Ino, kfd: kfd, file: os.NewFile(uintptr(kfd), "inotify"), rdy: make(chan struct{}, 1), lfd: int(lfd),
		buf: make([]byte, 16*inotifyEventMax)}
	id, le := e.notify.ready.Add(f.lfd, f, unix.EPOLLIN|unix.EPOLLET)
	if le != 0 {
		unix.Close(gend)
		f.file.Close()
		lklClose(f.lfd)
		return errno(le, LKL)
	}
	f.id = id
	s := &e.notify
	s.mu.Lock()
	if s.byIno == nil {
		s.byIno = map[uint64]*inotifyFd{}
	}
	first := len(s.byIno) == 0
	s.byIno[f.ino] = f
	s.changedLocked()
	s.mu.Unlock()
	go f.pump()
	go f.watchClose()
	// Writes and closes of shadows then reach LKL, which reports them,
	// at once, not at the flusher's next round (shadowfd/prompt.go).
	e.Shadows.WatchWrites()
	if first {
		// With no inotify fd before, no watch saw what was written and
		// closed: it reaches LKL now, unseen.
		e.Shadows.QuietAll()
	}
	// kbox's copy goes once the guest has its own: the guest's last
	// close is then the end's last (watchClose).
	gfd, err := r.G.AddFD(gend, -1, flags&unix.IN_CLOEXEC != 0)
	unix.Close(gend)
	if err != nil {
		return fail(err, Host)
	}
	return ok(int64(gfd), Emulated)
}

// inotifyUnread bounds what the guest's end holds unread: the buffer
// inotify(7) asks a reader for (one event with the longest name) always
// takes whole events, as on Linux, and a reader of bare events (16 bytes
// each) takes them one at a time.
const inotifyUnread = inotifyEventMax

// deliver moves the events LKL has queued to kbox's end, whole, in order,
// without waiting: up to inotifyUnread bytes unread by the guest, the rest
// kept (held) until the guest has read. An event the same as the last
// one the guest has not read yet is merged into it, as Linux merges a
// queue's tail. gone reports that the guest's end or the LKL fd is gone.
// The serving thread calls it after each call that may have changed
// LKL's files (notifySweep), so a read after that call finds its events
// as on Linux; the pump calls it for the others.
func (f *inotifyFd) deliver() (held, gone bool) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	f.mu.Lock()
	closed, lfd := f.closed, f.lfd
	f.mu.Unlock()
	if closed || lfd < 0 {
		return false, true
	}
	if f.unread > 0 && f.endQueued() == 0 {
		f.unread = 0 // the guest has read all it was given
	}
	for {
		if f.head > 0 && len(f.buf)-f.tail < inotifyEventMax {
			f.tail = copy(f.buf, f.buf[f.head:f.tail])
			f.head = 0
		}
		if len(f.buf)-f.tail >= inotifyEventMax {
			n, le := lkl.Syscall6(lkl.SysRead, uintptr(lfd), lkl.Ptr(f.buf[f.tail:]), uintptr(len(f.buf)-f.tail), 0, 0, 0)
			runtime.KeepAlive(f.buf)
			switch {
			case le == unix.EINTR:
				continue
			case le == 0 && n > 0:
				f.take(int(n))
				continue
			case le != unix.EAGAIN:
				return false, true
			}
		}
		break
	}
	// The whole events that fit beside what the guest has not read.
	end := f.head
	for end < f.tail {
		l := eventLen(f.buf[end:f.tail])
		if end+l-f.head > inotifyUnread-f.unread {
			break
		}
		end += l
	}
	if end > f.head {
		n, err := unix.SendmsgN(f.kfd, f.buf[f.head:end], nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		switch {
		case err == unix.EAGAIN:
		case err != nil:
			return false, true // the guest's end is gone
		default:
			f.lastSent = append(f.lastSent[:0], lastEvent(f.buf[f.head:f.head+n])...)
			f.unread += n
			f.head += n
		}
	}
	return f.head < f.tail, false
}

// take appends the n bytes LKL read at f.tail to the held events, but
// those the same as the guest's last unread event (Linux merges them).
func (f *inotifyFd) take(n int) {
	src := f.tail
	for off := src; off < src+n; {
		l := eventLen(f.buf[off : src+n])
		ev := f.buf[off : off+l]
		off += l
		var last []byte
		switch {
		case f.tail > f.head:
			last = lastEvent(f.buf[f.head:f.tail])
		case f.unread > 0 && f.endQueued() > 0:
			last = f.lastSent
		}
		if last != nil && bytes.Equal(last, ev) {
			continue
		}
		f.tail += copy(f.buf[f.tail:], ev)
	}
}

// lastEvent is the last whole inotify event of events b.
func lastEvent(b []byte) []byte {
	off := 0
	for off+eventLen(b[off:]) < len(b) {
		off += eventLen(b[off:])
	}
	return b[off:]
}

// eventLen is the length of the inotify event at the start of b (all of b
// when it is not a whole event).
func eventLen(b []byte) int {
	if len(b) < unix.SizeofInotifyEvent {
		return len(b)
	}
	if l := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:])); l <= len(b) {
		return l
	}
	return len(b)
}

// endQueued is how much the guest has not read of what kbox sent: the
// bytes its end still queues (0 when it has read all; -1 on error).
func (f *inotifyFd) endQueued() int {
	n, err := unix.IoctlGetInt(f.kfd, unix.SIOCOUTQ)
	if err != nil {
		return -1
	}
	return n
}

// pump delivers the LKL fd's events that no call of the guest's made
// (another process's, a write-back's), and those held until the guest
// reads, until the guest closes its end; it closes the LKL fd then.
func (f *inotifyFd) pump() {
	defer f.end()
	rc, err := f.file.SyscallConn()
	if err != nil {
		return
	}
	for {
		held, gone := f.deliver()
		switch {
		case gone:
			return
		case !held:
			lklready.Await(f.rdy, 0)
			continue
		}
		// Held: wait (in Go's poller, no thread) until the guest has
		// read; each read frees what kbox sent and makes kbox's end
		// writable again. LKL's queue meanwhile fills, up to its
		// overflow event, as Linux's does.
		if err := rc.Write(func(uintptr) bool { return f.endQueued() <= 0 || f.isClosed() }); err != nil {
			return
		}
	}
}

// isClosed reports whether the guest closed its end everywhere.
func (f *inotifyFd) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// end closes what kbox holds of f, once its pump has stopped.
func (f *inotifyFd) end() {
	f.set.ready.Drop(f.id)
	f.mu.Lock()
	lfd := f.lfd
	f.lfd = -1
	f.closed = true
	f.mu.Unlock()
	f.forget()
	lklClose(lfd)
	f.file.Close()
}

// forget takes f out of the set.
func (f *inotifyFd) forget() {
	s := f.set
	s.mu.Lock()
	if s.byIno[f.ino] == f {
		delete(s.byIno, f.ino)
	}
	s.changedLocked()
	s.mu.Unlock()
}

// watchClose waits for the guest's last close of its end (EOF on kbox's
// end; what the guest writes to its end is read and dropped) and stops
// the pump.
func (f *inotifyFd) watchClose() {
	var b [64]byte
	rc, err := f.file.SyscallConn()
	if err != nil {
		return
	}
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, _, _, rerr = unix.Recvmsg(int(fd), b[:], nil, unix.MSG_DONTWAIT)
			return rerr != unix.EAGAIN
		}); err != nil {
			rerr = err
		}
		if rerr == unix.EINTR {
			continue
		}
		if rerr != nil || n == 0 && sysabi.GuestGone(f.kfd) {
			break
		}
	}
	f.forget()
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	lklready.Signal(f.rdy)
}

// inotifyBits are the bits of inotify_add_watch's mask that Linux knows.
const inotifyBits = unix.IN_ALL_EVENTS | unix.IN_UNMOUNT | unix.IN_Q_OVERFLOW | unix.IN_IGNORED |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK | unix.IN_MASK_CREATE | unix.IN_MASK_ADD |
	unix.IN_ISDIR | unix.IN_ONESHOT

// inotifyOf finds the inotify fd behind guest fd fd: EBADF when the guest
// has no such fd, EINVAL when it is not an inotify fd.
func (e *Engine) inotifyOf(r *Request, fd uint64) (*inotifyFd, unix.Errno) {
	if isVirtual(r, fd) {
		if _, ok := r.P.FDs.Get(int(int32(fd))); !ok {
			return nil, unix.EBADF
		}
		return nil, unix.EINVAL // an LKL file, or a host file kbox keeps
	}
	hfd, err := r.P.getfd(int(int32(fd)))
	if err != nil {
		return nil, unix.EBADF
	}
	defer unix.Close(hfd)
	var st unix.Stat_t
	if err := unix.Fstat(hfd, &st); err != nil {
		return nil, unix.EBADF
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		if l, err := os.Readlink(guestpath.ProcFd(hfd)); err == nil && strings.HasPrefix(l, procfs.FreeFdName) {
			return nil, unix.EBADF // the in-process tiers' free number (trap/fds.go)
		}
		return nil, unix.EINVAL
	}
	ino := st.Ino
	s := &e.notify
	s.mu.Lock()
	f := s.byIno[ino]
	s.mu.Unlock()
	if f == nil {
		return nil, unix.EINVAL
	}
	return f, 0
}

// sysInotifyAddWatch serves inotify_add_watch(2) on LKL's files.
func sysInotifyAddWatch(e *Engine, r *Request) Result {
	// A path kbox serves from the host (a bind, /proc, kbox's /dev nodes)
	// gets EOPNOTSUPP: the host's files are watched by no one
	// (docs/tiers.md, "inotify").
	if e.notify.missing() {
		return errno(unix.ENOSYS, ENOSYS)
	}
	mask := uint32(r.Args[2])
	if mask&inotifyBits == 0 || mask&unix.IN_MASK_ADD != 0 && mask&unix.IN_MASK_CREATE != 0 {
		return errno(unix.EINVAL, Emulated)
	}
	f, en := e.inotifyOf(r, r.Args[0])
	if en != 0 {
		return errno(en, Emulated)
	}
	t, en := e.target(r, unix.AT_FDCWD, r.Args[1])
	if en != 0 {
		return errno(en, LKL)
	}
	if t.Host {
		return errno(unix.EOPNOTSUPP, Emulated)
	}
	if n := e.nodeAt(t.LKLPath(), mask&unix.IN_DONT_FOLLOW != 0); n != nil {
		// What was written before the watch reaches LKL now, unseen.
		e.Shadows.Quiet(n)
	} else {
		e.Shadows.QuietIn(t.Path) // a directory's files, likewise
	}
	e.notify.settleGone()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lfd < 0 {
		return errno(unix.EBADF, Emulated) // closed by another thread meanwhile
	}
	wd, le := lklPath(lkl.SysInotifyAddWatch, 1, t.LKLPath(), [6]uintptr{uintptr(f.lfd), 0, uintptr(mask)})
	if le != 0 {
		return errno(le, LKL)
	}
	return ok(int64(wd), LKL)
}

// sysInotifyRmWatch serves inotify_rm_watch(2) in LKL.
func sysInotifyRmWatch(e *Engine, r *Request) Result {
	// EINVAL for a watch LKL does not have; its IN_IGNORED event follows.
	if e.notify.missing() {
		return errno(unix.ENOSYS, ENOSYS)
	}
	f, en := e.inotifyOf(r, r.Args[0])
	if en != 0 {
		return errno(en, Emulated)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lfd < 0 {
		return errno(unix.EBADF, Emulated)
	}
	if _, le := lkl.Syscall6(lkl.SysInotifyRmWatch, uintptr(f.lfd), uintptr(int32(r.Args[1])), 0, 0, 0, 0); le != 0 {
		return errno(le, LKL)
	}
	return ok(0, LKL)
}

// notifySweep follows a call that may have changed LKL's files while the
// guest has inotify fds: their events reach the guest's ends before the
// call returns, as Linux queues them (deliver).
func (e *Engine) notifySweep() {
	if e.notify.live.Load() == 0 {
		return
	}
	for _, f := range *e.notify.all.Load() {
		if held, _ := f.deliver(); held {
			lklready.Signal(f.rdy) // the pump waits for the guest's read
		}
	}
}

// settleGone waits, before a watch is added, for the IN_CLOSE_WRITE of
// writersGone's last close if LKL may not have made it yet (its deferred
// fput runs when a one-tick timer next fires): that close came before the
// watch, and on Linux its event would have too. Only a watch added within
// two ticks of a write-back that found a shadow's writers gone waits.
func (s *inotifies) settleGone() {
	if g := s.gone.Load(); g != 0 {
		if d := time.Until(time.Unix(0, g).Add(2*lkl.Tick + time.Millisecond)); d > 0 {
			time.Sleep(d)
		}
	}
}

// writersGone is told by the shadows' flusher that a shadow's last writer
// closed it (the guest's close is native: kbox does not see it). While
// the guest has inotify fds, kbox opens the LKL file for writing through
// LKL's /proc/self/fd and closes it: LKL reports IN_OPEN and
// IN_CLOSE_WRITE, the close the guest made (docs/tiers.md,
// "inotify").
func (e *Engine) writersGone(lklfd int) {
	if e.notify.live.Load() == 0 || !e.Opt.HasKernelProc {
		return
	}
	asRoot(func() {
		fl := uintptr(lkl.OpenFlagsToLKL(unix.O_WRONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK))
		if fd, le := e.kprocPath(lkl.SysOpenat, 1, "self/fd/"+strconv.Itoa(lklfd), [6]uintptr{0, 0, fl}); le == 0 {
			lklClose(int(fd))
			e.notify.gone.Store(time.Now().UnixNano())
		}
	})
	e.notifySweep()
	// The close's IN_CLOSE_WRITE comes when LKL's deferred fput runs, a
	// clock tick on (lkl.Tick): delivered then, not at the readiness
	// ticker's next round.
	time.AfterFunc(lkl.Tick+time.Millisecond, e.notifySweep)
}
