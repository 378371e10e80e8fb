//go:build linux

package trap

import (
	"sync/atomic"

	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// Lent descriptions. A plain read-only open of a shadowed file gives the
// guest a description of the node's content that kbox keeps a copy of
// (dispatch.Lender): when the guest's fd closes, the description goes
// back to its node as the next such open's (shadowfd/spare.go), instead of
// being released and another made. It must come back as a new open's
// would be: its offset is set to 0 when it is taken, and it is given back
// clean only if
//
//   - no call that could copy a description to another fd or process, or
//     change a description's state, ran while it was lent: dup, dup2,
//     dup3, fcntl other than the fd flags, F_GETFL and process-owned
//     locks, flock, sendmsg, sendmmsg (sharesEpoch);
//   - its status flags are as opened (F_GETFL): ioctl's FIONBIO and
//     FIOASYNC change them natively;
//
// else kbox's copy is closed and the description ends with the guest's
// last copy, as before. What a kept description keeps beyond the close is
// the readahead state (fadvise), which no call reports. Process-owned
// locks (F_SETLK) are the guest's files_struct's: its close releases them
// whatever else holds the description.

// maxLent bounds the descriptions lent at once: each is an fd of kbox's
// range while the guest holds it.
const maxLent = 64

// lentFD is what kbox keeps of a description lent to a guest fd.
type lentFD struct {
	back  dispatch.Returner // nil: not lent
	fd    int32             // kbox's copy
	epoch uint64            // sharesEpoch when lent
}

// sharesEpoch moves at the start and at the end of every call that could
// copy a guest's description or change its state (mayShare, cont.go);
// sharing counts those under way. A description comes back clean only
// if, once its guest fd is gone, none is under way and the epoch is the
// one read after it was lent: a copy made of it lies inside a call that
// began before the close's look and either still runs or moved the epoch
// when it ended (the end moves the epoch before it leaves the count).
var (
	sharesEpoch atomic.Uint64
	sharing     atomic.Int32
)

func sharesBegin() {
	sharing.Add(1)
	sharesEpoch.Add(1)
}

func sharesEnd() {
	sharesEpoch.Add(1)
	sharing.Add(-1)
}

// lend places hostfd at the lowest free guest fd, as place does, and keeps
// it there for back while fewer than maxLent are lent; else it closes
// kbox's copy at once.
func (s *fdSpace) lend(hostfd int, cloexec bool, back dispatch.Returner) (int, error) {
	fd, err := s.alloc(0)
	if err != nil {
		back.Return(hostfd, true)
		return -1, err
	}
	flags := uintptr(0)
	if cloexec {
		flags = unix.O_CLOEXEC
	}
	s.mu.Lock()
	// Over a placeholder: nothing closes, a raw syscall (install).
	_, _, e := unix.RawSyscall(unix.SYS_DUP3, uintptr(hostfd), uintptr(fd), flags)
	keep := e == 0 && s.nlent < maxLent
	if keep {
		s.lent[fd] = lentFD{back: back, fd: int32(hostfd), epoch: sharesEpoch.Load()}
		s.nlent++
	}
	if e != 0 {
		s.free[fd] = true
	}
	s.mu.Unlock()
	if e != 0 {
		back.Return(hostfd, true)
		return -1, e
	}
	if !keep {
		back.Return(hostfd, false)
	}
	return fd, nil
}

// replaceLent puts src at guest fd, which holds a lent description (a
// placeholder: a close), and gives that description back. kbox keeps a
// copy of it, so nothing closes: a raw dup3. The caller holds s.mu,
// which replaceLent lets go.
func (s *fdSpace) replaceLent(src, fd int, flags uintptr, placeholder bool) error {
	_, _, e := unix.RawSyscall(unix.SYS_DUP3, uintptr(src), uintptr(fd), flags)
	var l lentFD
	if e == 0 {
		s.free[fd] = placeholder
		l = s.lent[fd]
		s.lent[fd] = lentFD{}
		s.nlent--
	}
	s.mu.Unlock()
	l.giveBack()
	if e != 0 {
		return e
	}
	return nil
}

// giveBack hands kbox's copy of a description whose guest fd was closed
// or replaced to its node: clean when nothing could have copied it or
// changed its state since it was lent.
func (l lentFD) giveBack() {
	if l.back == nil {
		return
	}
	clean := sharing.Load() == 0 && sharesEpoch.Load() == l.epoch
	if clean {
		const kept = unix.O_ACCMODE | unix.O_APPEND | unix.O_NONBLOCK | unix.O_ASYNC | unix.O_DIRECT | unix.O_NOATIME
		fl, _, e := unix.RawSyscall(unix.SYS_FCNTL, uintptr(l.fd), unix.F_GETFL, 0)
		clean = e == 0 && fl&kept == unix.O_RDONLY
	}
	l.back.Return(int(l.fd), clean)
}
