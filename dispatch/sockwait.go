package dispatch

import (
	"encoding/binary"
	"time"

	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The waits of a blocking connect and send that kbox makes for the guest
// (sys_net_socket.go): off the serving loop, ended by the guest's socket timeout
// (SO_SNDTIMEO: EAGAIN) and by a signal it takes (interrupt.go), never
// blocking in a way kbox could not end: the guest's call must fail or
// restart at once then, with nothing sent or connected behind its back.

// sendJob is one send kbox makes for a guest.
type sendJob struct {
	s     sock
	data  []byte
	name  []byte
	oob   []byte
	flags int
	// closeFds are kbox's copies behind the job (the destination's O_PATH
	// fd, SCM_RIGHTS fds), closed once it is sent.
	closeFds []int
}

func (j *sendJob) close() {
	unix.Close(j.s.fd)
	for _, fd := range j.closeFds {
		unix.Close(fd)
	}
	j.closeFds = nil
}

// send makes the send of j for the calling guest thread: at once when it
// does not block, else (a full receiver, a blocking socket) in a
// goroutine, the guest's syscall answered when it is done, by done when
// set (else with the count of bytes or the error). It owns j.
func (e *Engine) send(r *Request, j *sendJob, done func(p Pending, n int, en unix.Errno)) Result {
	if sockRoot && j.s.unixDomain() {
		j.oob = withCreds(j.oob, r.P.Tgid)
	}
	n, err := rawSendmsg(j.s.fd, j.data, j.oob, j.name, j.flags|unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	tgid, tid := r.P.Tgid, r.G.Pid()
	// Would the guest's own call wait? Asked only when it matters.
	blocking := (err == unix.EAGAIN || err == 0 && n < len(j.data)) &&
		j.flags&unix.MSG_DONTWAIT == 0 && !j.s.nonblocking()
	switch {
	case err == unix.EAGAIN && blocking:
	case err == 0 && blocking && j.s.typ == unix.SOCK_STREAM && n < len(j.data):
		// The rest of a blocking stream send waits for room.
		j.data, j.oob = j.data[n:], nil
	default:
		j.close()
		if err != 0 {
			return errno(pipeSignal(err, j.flags, r.G, tgid, tid), Host)
		}
		return ok(int64(n), Host)
	}
	return e.sendWait(r, j, max(n, 0), done)
}

// withCreds adds SCM_CREDENTIALS naming the guest process to control
// data that has none: a receiver with SO_PASSCRED then sees the guest's
// pid, not kbox's (the ids are the host's, kbox's and the guest's alike).
// Only root may name another process.
func withCreds(oob []byte, tgid int) []byte {
	if cmsgFind(oob, unix.SOL_SOCKET, unix.SCM_CREDENTIALS) {
		return oob
	}
	c := unix.Ucred{Pid: int32(tgid), Uid: hostUID, Gid: hostGID}
	// The guest's last message may end unaligned (msg_controllen =
	// CMSG_LEN(n)): the next one begins where CMSG_NXTHDR looks for it.
	out := make([]byte, sysabi.CmsgAlign(len(oob)), sysabi.CmsgAlign(len(oob))+unix.CmsgSpace(unix.SizeofUcred))
	copy(out, oob)
	return append(out, unix.UnixCredentials(&c)...)
}

// cmsgFind reports whether control data holds a message of level and typ.
func cmsgFind(oob []byte, level, typ int32) bool {
	for o := 0; o+sysabi.CmsgHdr <= len(oob); {
		l := int(binary.NativeEndian.Uint64(oob[o:]))
		if l < sysabi.CmsgHdr || o+l > len(oob) {
			return false
		}
		if int32(binary.NativeEndian.Uint32(oob[o+8:])) == level && int32(binary.NativeEndian.Uint32(oob[o+12:])) == typ {
			return true
		}
		o += sysabi.CmsgAlign(l)
	}
	return false
}

// maxControl bounds control data as the kernel's optmem_max does.
const maxControl = 128 << 10

// sentOrErr is en, or 0 once a stream send moved data: the call then
// returns the count.
func sentOrErr(total int, en unix.Errno) unix.Errno {
	if total > 0 {
		return 0
	}
	return en
}

// sndTimeout is fd's SO_SNDTIMEO (0: none).
func sndTimeout(fd int) time.Duration {
	tv, err := unix.GetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO)
	if err != nil {
		return 0
	}
	return time.Duration(tv.Nano())
}

// connectWait makes a blocking connect of unix socket fd (kbox's copy of
// the guest's) to raw, which waits while the listener's backlog is full,
// and answers the guest's deferred call; done runs after the connect.
func (e *Engine) connectWait(r *Request, fd int, raw []byte, done func()) Result {
	limit := sndTimeout(fd)
	p := deferWait(r, limit > 0, true)
	go func() {
		en, answer := connectTicks(p, fd, raw, limit)
		done()
		if !answer {
			return
		}
		e.late(func() {
			if en != 0 {
				p.ReplyErrno(en)
			} else {
				p.Reply(0)
			}
		})
	}()
	return deferred(Host)
}

// connectTicks is the connect of connectWait. Linux's wait for the
// backlog ends at the socket's send timeout, so kbox's connect waits for
// at most sysabi.InterruptTick at a time (SO_SNDTIMEO of the socket, set for the
// wait and put back after it) and looks between the tries for the
// guest's own limit (EAGAIN, as Linux's) and for a signal. A connect that
// timed out left the socket unconnected: the next try starts afresh.
// answer is false when the guest no longer waits.
func connectTicks(p Pending, fd int, raw []byte, limit time.Duration) (en unix.Errno, answer bool) {
	orig, err := unix.GetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO)
	if err != nil {
		return rawConnect(fd, raw), true
	}
	defer unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, orig)
	var deadline time.Time
	if limit > 0 {
		deadline = time.Now().Add(limit)
	}
	for {
		wait := sysabi.InterruptTick
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return unix.EAGAIN, true
			}
			wait = min(wait, left)
		}
		tv := unix.NsecToTimeval(max(wait.Nanoseconds(), 1000))
		if unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv) != nil {
			return rawConnect(fd, raw), true
		}
		if en := rawConnect(fd, raw); en != unix.EAGAIN {
			return en, true
		}
		if p.Valid() != nil {
			return 0, false
		}
		if signalled(p) {
			return intrErrno(limit > 0), true
		}
	}
}

// sendWait sends the rest of j (sent bytes went already) as the guest's
// blocking call would, on a goroutine, and answers the guest's deferred
// call: by done when set, else with the count of bytes or the error. A
// signal ends the wait as Linux's does: a stream send that moved data
// returns its count, else the call is interrupted. It owns j.
func (e *Engine) sendWait(r *Request, j *sendJob, sent int, done func(p Pending, n int, en unix.Errno)) Result {
	tgid, tid, g := r.P.Tgid, r.G.Pid(), r.G
	limit := sndTimeout(j.s.fd)
	p := deferWait(r, limit > 0, true)
	go func() {
		defer j.close()
		m, err, answer := sendTicks(p, j, limit)
		if !answer {
			return
		}
		n := sent + m
		if err != 0 && n == 0 {
			err = pipeSignal(err, j.flags, g, tgid, tid)
		} else {
			err = 0
		}
		e.late(func() {
			switch {
			case done != nil:
				done(p, n, err)
			case err != 0:
				p.ReplyErrno(err)
			default:
				p.Reply(int64(n))
			}
		})
	}()
	return deferred(Host)
}

// sendTicks sends j without ever blocking in the kernel: between tries
// it waits for room (poll, at most sysabi.InterruptTick at a time) and looks for
// the guest's send timeout (EAGAIN) and for a signal (intrErrno); either
// ends a stream send that moved data with its count. It returns the
// bytes sent and the error; answer is false when the guest no longer
// waits.
func sendTicks(p Pending, j *sendJob, limit time.Duration) (total int, en unix.Errno, answer bool) {
	var deadline time.Time
	if limit > 0 {
		deadline = time.Now().Add(limit)
	}
	idle := time.Duration(0) // backoff when poll says room but the send finds none
	looked := time.Now()
	for {
		if p.Valid() != nil {
			return total, 0, false
		}
		n, err := rawSendmsg(j.s.fd, j.data, j.oob, j.name, j.flags|unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EINTR:
			continue
		case err == 0:
			total += n
			if j.s.typ != unix.SOCK_STREAM || n >= len(j.data) {
				return total, 0, true
			}
			j.data, j.oob = j.data[n:], nil
			idle = 0
			continue
		case err != unix.EAGAIN:
			return total, err, true
		}
		wait := sysabi.InterruptTick
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return total, sentOrErr(total, unix.EAGAIN), true
			}
			wait = min(wait, left)
		}
		if idle > 0 {
			// A datagram to a named socket: poll of the sender cannot
			// see the receiver's queue.
			time.Sleep(min(idle, wait))
			idle = min(2*idle, 20*time.Millisecond)
		}
		pfd := []unix.PollFd{{Fd: int32(j.s.fd), Events: unix.POLLOUT}}
		if k, _ := unix.Poll(pfd, int(wait/time.Millisecond)+1); k > 0 && idle == 0 {
			idle = time.Millisecond
		}
		// A signal is looked for once per sysabi.InterruptTick, whether the
		// poll timed out or a slow receiver makes room bit by bit.
		if time.Since(looked) >= sysabi.InterruptTick {
			if signalled(p) {
				return total, sentOrErr(total, intrErrno(limit > 0)), true
			}
			looked = time.Now()
		}
	}
}

// rcvTimeout is fd's SO_RCVTIMEO (0: none).
func rcvTimeout(fd int) time.Duration {
	tv, err := unix.GetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO)
	if err != nil {
		return 0
	}
	return time.Duration(tv.Nano())
}

// recvTicks is a blocking receive on stream socket fd into buf (flags
// the guest's), made without blocking in the kernel: between tries it
// waits for data (poll, at most sysabi.InterruptTick at a time) and looks for
// the guest's receive timeout (EAGAIN) and for a signal (the call is
// interrupted, or returns what MSG_WAITALL gathered). answer is false
// when the guest no longer waits.
func recvTicks(p Pending, fd int, buf []byte, flags int, limit time.Duration) (n int, en unix.Errno, answer bool) {
	var deadline time.Time
	if limit > 0 {
		deadline = time.Now().Add(limit)
	}
	all := flags&unix.MSG_WAITALL != 0 && flags&unix.MSG_PEEK == 0
	got := 0
	for {
		if p.Valid() != nil {
			return 0, 0, false
		}
		m, _, _, _, err := unix.Recvmsg(fd, buf[got:], nil, flags|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EINTR:
			continue
		case err == nil && (!all || m == 0 || got+m >= len(buf)):
			return got + m, 0, true
		case err == nil:
			got += m
			continue
		case err != unix.EAGAIN:
			if got > 0 {
				return got, 0, true
			}
			return 0, sysabi.Errno(err), true
		}
		wait := sysabi.InterruptTick
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				if got > 0 {
					return got, 0, true
				}
				return 0, unix.EAGAIN, true
			}
			wait = min(wait, left)
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if k, _ := unix.Poll(pfd, int(wait/time.Millisecond)+1); k < 1 && signalled(p) {
			if got > 0 {
				return got, 0, true
			}
			return 0, intrErrno(limit > 0), true
		}
	}
}
