// Package fifo serves the FIFOs (named pipes) of the image with host FIFOs.
//
// In LKL a FIFO of the image is only a name: kbox gives each one, keyed by
// LKL's device and inode numbers, a FIFO of the host kernel. It is made with
// mkfifo in a new private directory (mode 0700) and unlinked at once, so no
// host path names it; kbox keeps an O_PATH fd of it and opens it again
// through /proc/self/fd for every guest open. The guest gets the resulting
// host fd, so reads, writes, poll, EOF and SIGPIPE are the host kernel's own
// and cost no notification.
//
// Only an open can block: a read-only open waits for a writer, a write-only
// open for a reader. kbox never makes such an open itself. Every file of a
// host FIFO is opened by kbox, so kbox sees each reader and writer arrive
// and can pair them as Linux does:
//
//   - A guest open that must wait is parked: the caller defers its seccomp
//     notification, and the open is answered when the other end opens (from
//     the serving goroutine, while it serves that other open). Meanwhile the
//     guest waits in the kernel, and nothing in kbox blocks.
//   - A parked reader counts as a reader, as a blocked one does on Linux: it
//     holds a non-blocking read end (its token), so writers can open.
//   - Whether a new reader must wait depends on writers kbox cannot count
//     (guests may hold, dup and pass their files): tee(2) of the empty FIFO
//     tells, failing with EAGAIN while a writer is there and returning 0
//     when none is.
//   - A goroutine checks every Poll that parked guests still wait, and drops
//     those that died, closing their tokens. A parked guest with a signal
//     to handle is answered as a wait that a signal interrupts is.
package fifo

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Key identifies a FIFO of the image: LKL's device and inode numbers.
type Key struct{ Dev, Ino uint64 }

// Opener is a guest open waiting for its answer (a deferred seccomp
// notification).
type Opener interface {
	// Valid returns nil while the guest still waits in the open.
	Valid() error
	// Pid is the host tid of the guest thread that opens.
	Pid() int
	// AddFD installs hostfd in the guest (without answering) and returns
	// the guest's fd number.
	AddFD(hostfd int, cloexec bool) (int, error)
	// Reply answers the open with val.
	Reply(val int64) error
	// ReplyErrno fails the open with en.
	ReplyErrno(en unix.Errno) error
}

// Set holds the host FIFOs of one kbox run.
type Set struct {
	// Poll is how often parked opens are checked for guests that are gone
	// or have a signal to take.
	Poll time.Duration

	mu      sync.Mutex
	nodes   map[Key]*node
	waiting map[*node]bool // nodes with parked opens
	scratch [2]int         // pipe receiving tee(2) probes, made on first use
	closed  bool
	stop    chan struct{} // ends the watch goroutine
	wg      sync.WaitGroup
}

// New returns an empty Set. It creates nothing on the host until a FIFO is
// opened.
func New() *Set {
	return &Set{Poll: 25 * time.Millisecond, nodes: map[Key]*node{}, waiting: map[*node]bool{}, scratch: [2]int{-1, -1}}
}

// node is the host FIFO of one image FIFO.
type node struct {
	pathfd int    // O_PATH fd of the host FIFO
	proc   string // /proc/self/fd/<pathfd>: opens it again
	// dev and ino identify the host FIFO; name is the guest path it was
	// first opened by (Name), for the guest's /proc/PID/fd links.
	dev, ino uint64
	name     string
	// readers and writers are the parked guest opens.
	readers, writers []parked
}

type parked struct {
	o     Opener
	flags int
	token int // a reader's read end; -1 for a writer
}

// grant is a file for a parked open, given once the Set's state is
// settled.
type grant struct {
	p    parked
	file int
}

// lookupFlags are open flags that concern the path lookup in the image or
// the creation of the name, not the FIFO's file.
const lookupFlags = unix.O_CREAT | unix.O_EXCL | unix.O_TRUNC | unix.O_NOCTTY | unix.O_NOFOLLOW |
	unix.O_DIRECTORY | unix.O_TMPFILE | unix.O_PATH | unix.O_CLOEXEC

// setflFlags are the status flags a guest's open asks for that kbox sets
// with F_SETFL after opening non-blocking. O_ASYNC is not among them: open
// ignores it.
const setflFlags = unix.O_APPEND | unix.O_DIRECT | unix.O_NOATIME

// Open opens the host FIFO behind k for a guest open with flags (open(2)
// flags). It returns a host fd for the caller to install in the guest and
// close before the guest resumes (so that kbox's copy never counts as a
// reader or writer the guest could notice). When the open must wait for the
// other end, Open calls later for the deferred notification, parks it and
// returns parked: the caller must not answer the open.
func (s *Set) Open(k Key, flags int, later func() Opener) (fd int, isParked bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return -1, false, unix.EIO
	}
	n, err := s.nodeLocked(k)
	if err != nil {
		return -1, false, err
	}
	// Parked opens released by this one are answered last, once their
	// files and this one's are open.
	var grants []grant
	defer func() { give(grants) }()
	acc, blocking := flags&unix.O_ACCMODE, flags&unix.O_NONBLOCK == 0
	if acc == unix.O_RDONLY && blocking {
		// A reader waits unless a writer is there, and its arrival
		// releases the parked writers, which makes one.
		tok, err := openRetry(n.proc, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC)
		if err != nil {
			return -1, false, err
		}
		grants = n.release(&n.writers, grants)
		wr := len(grants) > 0
		if !wr {
			if wr, err = s.hasWriter(tok); err != nil {
				unix.Close(tok)
				return -1, false, err
			}
		}
		if !wr {
			n.readers = append(n.readers, parked{later(), flags, tok})
			s.parkedLocked(n)
			return -1, true, nil
		}
		fd, err = n.openNow(flags)
		unix.Close(tok)
		return fd, false, err
	}
	// O_RDWR never waits; with O_NONBLOCK a reader opens at once and a
	// writer fails with ENXIO when there is no reader, as it should.
	fd, err = n.openNow(flags)
	if err == unix.ENXIO && blocking {
		n.writers = append(n.writers, parked{later(), flags, -1})
		s.parkedLocked(n)
		return -1, true, nil
	}
	if err != nil {
		return -1, false, err
	}
	if acc != unix.O_RDONLY {
		grants = n.release(&n.readers, grants)
	}
	if acc != unix.O_WRONLY {
		grants = n.release(&n.writers, grants)
	}
	return fd, false, nil
}

// release opens a file for each parked open of *list, whose other end has
// just come, and empties the list. Readers' tokens are closed once their
// files are open. The files are given (the guests answered) later, by give.
func (n *node) release(list *[]parked, grants []grant) []grant {
	for _, p := range *list {
		if p.o.Valid() == nil {
			f, err := n.openNow(p.flags)
			if err != nil {
				p.o.ReplyErrno(sysabi.Errno(err))
			} else {
				grants = append(grants, grant{p, f})
			}
		}
		if p.token >= 0 {
			unix.Close(p.token)
		}
	}
	clear(*list)
	*list = (*list)[:0]
	return grants
}

// give installs each grant's file in its guest, closes it, and answers the
// guest's open with the guest's fd number.
func give(grants []grant) {
	for _, g := range grants {
		gfd, err := g.p.o.AddFD(g.file, g.p.flags&unix.O_CLOEXEC != 0)
		unix.Close(g.file)
		if err != nil {
			g.p.o.ReplyErrno(sysabi.Errno(err))
			continue
		}
		g.p.o.Reply(int64(gfd))
	}
}

// hasWriter tells whether the FIFO read through tok (non-blocking) has a
// writer (scratch: s.scratch, under s.mu).
func (s *Set) hasWriter(tok int) (bool, error) { return hasWriter(tok, &s.scratch) }

// hasWriter tells whether the FIFO read through tok (non-blocking) has a
// writer. tee(2) of an empty pipe fails with EAGAIN while a writer is there
// and returns 0 when none is. When data waits in the FIFO, tee copies a
// byte instead, which tells nothing: it is taken as a writer's. scratch is
// the pipe tee writes to, made on first use.
func hasWriter(tok int, scratch *[2]int) (bool, error) {
	if scratch[0] < 0 {
		if err := unix.Pipe2(scratch[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			*scratch = [2]int{-1, -1}
			return false, err
		}
	}
	for {
		n, err := unix.Tee(tok, scratch[1], 1, unix.SPLICE_F_NONBLOCK)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true, nil
		case err != nil:
			return false, err
		case n > 0:
			var b [1]byte
			unix.Read(scratch[0], b[:])
			return true, nil
		}
		return false, nil
	}
}

// probe is the scratch pipe of WriterCame.
var probe = struct {
	sync.Mutex
	fds [2]int
}{fds: [2]int{-1, -1}}

// WriterCame tells whether a writer came to the FIFO that tok reads: a
// read end opened non-blocking while the FIFO had no writer (a FIFO that
// is not only kbox's, of a bind). One came when one is there, when data
// is, or when one came and went: Linux holds poll's POLLHUP back on such
// a read end until a writer was seen.
func WriterCame(tok int) (bool, error) {
	pfd := []unix.PollFd{{Fd: int32(tok), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 0); err == nil && n > 0 && pfd[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0 {
		return true, nil
	}
	probe.Lock()
	defer probe.Unlock()
	return hasWriter(tok, &probe.fds)
}

// parkedLocked notes that n has parked opens, and starts the watch.
func (s *Set) parkedLocked(n *node) {
	s.waiting[n] = true
	if s.stop == nil {
		s.stop = make(chan struct{})
		s.wg.Add(1)
		go s.watch(s.stop)
	}
}

// watch drops, every Poll, the parked opens whose guests are gone or
// interrupted (prune), until none is parked.
func (s *Set) watch(stop chan struct{}) {
	defer s.wg.Done()
	t := time.NewTicker(s.Poll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		for n := range s.waiting {
			n.readers = prune(n.readers)
			n.writers = prune(n.writers)
			if len(n.readers)+len(n.writers) == 0 {
				delete(s.waiting, n)
			}
		}
		if len(s.waiting) == 0 {
			s.stop = nil
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// prune drops the parked opens of list whose guests are gone, and
// interrupts those whose guests have a signal to take (see interrupted).
func prune(list []parked) []parked {
	live := list[:0]
	for _, p := range list {
		switch {
		case p.o.Valid() != nil:
		case interrupted(p.o.Pid()):
			p.o.ReplyErrno(errRestartSys)
		default:
			live = append(live, p)
			continue
		}
		if p.token >= 0 {
			unix.Close(p.token)
		}
	}
	clear(list[len(live):])
	return live
}

// errRestartSys is the kernel's ERESTARTSYS. As the answer to a notified
// syscall it acts as it does for a syscall that a signal interrupts: after
// the signal, the kernel restarts the syscall (a handler with SA_RESTART,
// a stop, no handler run at all) or fails it with EINTR.
const errRestartSys = unix.Errno(512)

// stopSignals stop a process by default.
const stopSignals = 1<<(unix.SIGTSTP-1) | 1<<(unix.SIGTTIN-1) | 1<<(unix.SIGTTOU-1) | 1<<(unix.SIGSTOP-1)

// interrupted reports whether thread tid has a pending, unblocked signal
// that would interrupt a wait in open(2) on Linux without killing the
// process: one it handles, or one that stops it. A guest waiting in a
// notified syscall takes only fatal signals (the listener's
// WAIT_KILLABLE_RECV); the others wait for the answer.
func interrupted(tid int) bool {
	b, err := hostproc.Read("/proc/" + strconv.Itoa(tid) + "/status")
	return err == nil && interrupts(string(b))
}

// Interrupted is interrupted, for the engine's other waits (a blocking
// accept or connect on an internet socket, inet/connect.go
// and inet/accept.go).
func Interrupted(tid int) bool { return interrupted(tid) }

// RestartSys is errRestartSys, for the same.
const RestartSys = errRestartSys

// interrupts is interrupted for the text of /proc/TID/status.
func interrupts(status string) bool {
	var pnd, shd, blk, ign, cgt uint64
	for _, l := range strings.Split(status, "\n") {
		k, v, _ := strings.Cut(l, ":\t")
		m, err := strconv.ParseUint(v, 16, 64)
		if err != nil {
			continue
		}
		switch k {
		case "SigPnd":
			pnd = m
		case "ShdPnd":
			shd = m
		case "SigBlk":
			blk = m
		case "SigIgn":
			ign = m
		case "SigCgt":
			cgt = m
		}
	}
	return (pnd|shd)&^blk&(cgt|stopSignals&^ign) != 0
}

// Close fails the opens still parked (when kbox exits, their guests are
// gone), ends the watch and closes the host FIFOs.
func (s *Set) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	if s.stop != nil {
		close(s.stop)
		s.stop = nil
	}
	for _, n := range s.nodes {
		for _, p := range append(n.readers, n.writers...) {
			p.o.ReplyErrno(unix.EINTR)
			if p.token >= 0 {
				unix.Close(p.token)
			}
		}
		n.readers, n.writers = nil, nil
		unix.Close(n.pathfd)
	}
	s.nodes, s.waiting = nil, nil
	if s.scratch[0] >= 0 {
		unix.Close(s.scratch[0])
		unix.Close(s.scratch[1])
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Len returns the number of host FIFOs.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.nodes)
}

// Parked returns the number of guest opens waiting.
func (s *Set) Parked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := 0
	for n := range s.waiting {
		c += len(n.readers) + len(n.writers)
	}
	return c
}

func (s *Set) nodeLocked(k Key) (*node, error) {
	if n := s.nodes[k]; n != nil {
		return n, nil
	}
	fd, err := makeFIFO()
	if err != nil {
		return nil, err
	}
	n := &node{pathfd: fd, proc: "/proc/self/fd/" + strconv.Itoa(fd)}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		n.dev, n.ino = st.Dev, st.Ino
	}
	s.nodes[k] = n
	return n, nil
}

// Name records p as the guest path of the FIFO k, unless it has one: the
// path its first open named.
func (s *Set) Name(k Key, p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nodes[k]; n != nil && n.name == "" {
		n.name = p
	}
}

// PathOf returns the guest path of the image FIFO whose host FIFO is
// (dev, ino), as Name recorded it.
func (s *Set) PathOf(dev, ino uint64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		if n.ino == ino && n.dev == dev && n.name != "" {
			return n.name, true
		}
	}
	return "", false
}

// makeFIFO makes a host FIFO that no path names and returns an O_PATH fd
// of it: mkfifo in a new private directory, then both names removed.
func makeFIFO() (int, error) {
	dir, err := os.MkdirTemp("", "kbox-fifo-")
	if err != nil {
		return -1, sysabi.Errno(err)
	}
	defer os.Remove(dir)
	name := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(name, 0o600); err != nil {
		return -1, err
	}
	defer unix.Unlink(name)
	fd, err := unix.Open(name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		unix.Close(fd)
		return -1, unix.EIO
	}
	return fd, nil
}

// openNow opens the FIFO for a guest open with flags without blocking: with
// O_NONBLOCK, then the guest's own status flags. A writer fails with ENXIO
// when there is no reader.
func (n *node) openNow(flags int) (int, error) {
	fd, err := openRetry(n.proc, flags&^lookupFlags|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil || flags&unix.O_NONBLOCK != 0 {
		return fd, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags&setflFlags); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openRetry is open(2) retried on EINTR.
func openRetry(p string, flags int) (int, error) {
	for {
		fd, err := unix.Open(p, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
