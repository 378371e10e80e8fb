// Package sysabi holds the small facts of Linux's system-call interface
// that the engine (dispatch), the subsystems it serves through (inet) and
// the tiers share, so that each is written once: the sizes and limits of
// the guest's ABI, the errno a Go error gives, what a host socket end
// says of its state, and how often a deferred call looks for a signal.
package sysabi

import (
	"time"

	"golang.org/x/sys/unix"
)

// The guest's ABI (64-bit Linux: x86_64 and arm64 alike).
const (
	// SockaddrStorage is sizeof(struct sockaddr_storage), the most any
	// socket address may be.
	SockaddrStorage = 128
	// MsghdrSize is sizeof(struct msghdr), MmsghdrSize sizeof(struct
	// mmsghdr).
	MsghdrSize  = 56
	MmsghdrSize = 64
	// UioMaxIOV is UIO_MAXIOV, the most iovecs one call takes.
	UioMaxIOV = 1024
	// CmsgHdr is sizeof(struct cmsghdr): a u64 length, i32 level and
	// type; the data is aligned to 8 (CmsgAlign).
	CmsgHdr = 16
)

// CloneNamespaces are the flags of clone(2) that make new namespaces
// (CLONE_NEWTIME is clone3's and unshare's only: in clone its bit is the
// exit signal's). Made on the host they would be host namespaces the
// supervisor cannot model, so kbox refuses them as it refuses unshare.
const CloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// CmsgAlign rounds n up to a control message's alignment (CMSG_ALIGN).
func CmsgAlign(n int) int { return (n + 7) &^ 7 }

// InterruptTick is how often a deferred call looks for a signal that ends
// its wait: the engine's waits and inet's alike.
const InterruptTick = 100 * time.Millisecond

// Errno is err's errno (EIO for an error that is none, 0 for nil).
func Errno(err error) unix.Errno { return ErrnoOr(err, unix.EIO) }

// ErrnoOr is err's errno, other for an error that is none, 0 for nil.
func ErrnoOr(err error, other unix.Errno) unix.Errno {
	if err == nil {
		return 0
	}
	if en, isErrno := err.(unix.Errno); isErrno {
		return en
	}
	return other
}

// Nonblocking says whether a host fd has O_NONBLOCK set.
func Nonblocking(fd int) bool {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_NONBLOCK != 0
}

// EndEvents is what poll reports at once of kbox's end kfd of a host
// socketpair, asked for POLLIN and POLLRDHUP (0 when it fails).
func EndEvents(kfd int) int16 {
	pfd := [1]unix.PollFd{{Fd: int32(kfd), Events: unix.POLLIN | unix.POLLRDHUP}}
	if n, err := unix.Poll(pfd[:], 0); err != nil || n != 1 {
		return 0
	}
	return pfd[0].Revents
}

// GuestGone reports whether the other end of kbox's end kfd of a host
// socketpair is closed everywhere (POLLHUP), not just shut for writing.
func GuestGone(kfd int) bool { return EndEvents(kfd)&unix.POLLHUP != 0 }
