//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// ErrTargetGone reports ENOENT from the kernel: the notification no longer
// exists because the notifying task died, or because its syscall was
// interrupted by a signal before the supervisor received it (the task then
// restarts the syscall and a fresh notification follows; with
// WAIT_KILLABLE_RECV only fatal signals can do this after reception).
// Callers should drop the notification and Recv again. It is returned as is,
// never wrapped, so comparing with == is fine.
var ErrTargetGone = errors.New("seccomp: notification target is gone")

// ErrSyncWakeupUnsupported is returned by SetSyncWakeup on kernels without
// SECCOMP_IOCTL_NOTIF_SET_FLAGS (before 6.6). It wraps errors.ErrUnsupported.
var ErrSyncWakeupUnsupported = fmt.Errorf("seccomp: SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: %w", errors.ErrUnsupported)

// Listener is a seccomp user-notification fd. The methods Recv and Send do
// not allocate; callers should reuse one Notif and one NotifResp per
// servicing goroutine.
//
// A Listener may be used from several goroutines: the kernel hands each
// notification to exactly one Recv caller.
type Listener struct {
	fd int
}

// NewListener wraps a listener fd, e.g. one returned by Install or received
// from the guest-side process over SCM_RIGHTS. The Listener owns fd.
func NewListener(fd int) *Listener { return &Listener{fd: fd} }

// Fd returns the underlying file descriptor.
func (l *Listener) Fd() int { return l.fd }

// Close closes the listener fd. Tasks blocked in notified syscalls then fail
// with ENOSYS, and future notified syscalls fail the same way.
func (l *Listener) Close() error {
	if l.fd < 0 {
		return nil
	}
	err := unix.Close(l.fd)
	l.fd = -1
	return err
}

// Recv blocks until a notification is available and stores it in n, which is
// zeroed first (the kernel rejects a dirty buffer). EINTR is retried. If the
// notification was withdrawn between queuing and reception (target died or
// was interrupted), ErrTargetGone is returned and the caller should simply
// call Recv again.
//
// Once no task uses the filter, kernels with SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
// (6.6+) fail a blocked Recv with ENOENT (ErrTargetGone; Poll then reports
// POLLHUP); older kernels keep it blocked, so callers there Poll first.
func (l *Listener) Recv(n *Notif) error {
	for {
		*n = Notif{}
		switch e := ioctlRecv(l.fd, n); e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		case unix.ENOENT:
			return ErrTargetGone
		default:
			return e
		}
	}
}

// Send delivers a response. ErrTargetGone means the target died or was
// interrupted by a fatal signal meanwhile; it is not a supervisor bug.
// A second answer to the same ID fails with unix.EINPROGRESS (or
// ErrTargetGone once the target has consumed the first one).
func (l *Listener) Send(r *NotifResp) error {
	for {
		switch e := ioctlSend(l.fd, r); e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		case unix.ENOENT:
			return ErrTargetGone
		default:
			return e
		}
	}
}

// IDValid checks that notification id is still pending, i.e. that the
// target has not died and its pid has not been reused. Call it after reading
// target memory (process_vm_readv, /proc/pid/mem) and before acting on it.
func (l *Listener) IDValid(id uint64) error {
	switch e := ioctlIDValid(l.fd, &id); e {
	case 0:
		return nil
	case unix.ENOENT:
		return ErrTargetGone
	default:
		return e
	}
}

// Addfd installs a supervisor fd into the target (SECCOMP_IOCTL_NOTIF_ADDFD)
// and returns the fd number chosen in the target. With
// SECCOMP_ADDFD_FLAG_SEND the kernel also answers the notification with that
// number, so no Send must follow.
func (l *Listener) Addfd(a *NotifAddfd) (int, error) {
	for {
		fd, e := ioctlAddfd(l.fd, a)
		switch e {
		case 0:
			return fd, nil
		case unix.EINTR:
			continue
		case unix.ENOENT:
			return -1, ErrTargetGone
		default:
			return -1, e
		}
	}
}

// SetSyncWakeup asks the kernel to wake the target synchronously on the
// supervisor's CPU when a response is sent (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP),
// which lowers round-trip latency when supervisor and target ping-pong.
// Kernels before 6.6 lack the ioctl; ErrSyncWakeupUnsupported is returned.
func (l *Listener) SetSyncWakeup() error {
	switch e := ioctlSetFlags(l.fd, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP); e {
	case 0:
		return nil
	case unix.EINVAL, unix.ENOTTY:
		return ErrSyncWakeupUnsupported
	default:
		return fmt.Errorf("seccomp: SECCOMP_IOCTL_NOTIF_SET_FLAGS: %w", e)
	}
}

// Continue lets the notified syscall run natively in the target
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE). Only safe for syscalls whose arguments
// the supervisor does not need to be stable (no TOCTOU reliance).
func (l *Listener) Continue(id uint64) error {
	r := NotifResp{ID: id, Flags: FlagContinue}
	return l.Send(&r)
}

// Errno fails the notified syscall with errno.
func (l *Listener) Errno(id uint64, errno unix.Errno) error {
	r := NotifResp{ID: id, Error: -int32(errno)}
	return l.Send(&r)
}

// Return completes the notified syscall with result val.
func (l *Listener) Return(id uint64, val int64) error {
	r := NotifResp{ID: id, Val: val}
	return l.Send(&r)
}

// Poll waits up to timeout (negative: forever) for the listener to become
// readable. hangup is true when no task uses the filter any more, after which
// Recv would block forever.
func (l *Listener) Poll(timeout time.Duration) (readable, hangup bool, err error) {
	ms := -1
	if timeout >= 0 {
		ms = int(timeout / time.Millisecond)
	}
	fds := [1]unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}
	for {
		_, err = unix.Poll(fds[:], ms)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return false, false, err
	}
	re := fds[0].Revents
	return re&unix.POLLIN != 0, re&(unix.POLLHUP|unix.POLLERR) != 0, nil
}
