package dispatch

import (
	"encoding/binary"
	"os"

	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// SO_PEERCRED and SO_PEERPIDFD of a unix connection kbox made
// (unixsock/peercred.go): the host records kbox as the connecting process,
// Linux the guest process that called connect, with its effective ids.
// A pidfd of kbox would let the guest signal its supervisor
// (pidfd_send_signal runs natively).

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5).
const soPeerPidfd = 77

// notePeer records the guest process of r as the one connecting s, a
// stream or seqpacket socket kbox is about to connect.
func (e *Engine) notePeer(r *Request, s sock) {
	if e.Sockets == nil || s.typ == unix.SOCK_DGRAM {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(s.fd, &st) != nil {
		return
	}
	c := r.P.creds()
	e.Sockets.NotePeer(st.Ino, unixsock.Ucred{Pid: int32(r.P.Tgid), Uid: c.EUID, Gid: c.EGID})
}

// peerCred serves getsockopt(SOL_SOCKET, SO_PEERCRED) of a host socket:
// natively unless the host's answer is kbox, which made the connect; then
// what notePeer kept, written as Linux writes it (at most optlen bytes of
// struct ucred, optlen set to what was written).
//
// SO_PEERPIDFD likewise: a pidfd of the guest process that connected.
func (e *Engine) peerCred(r *Request) Result {
	if e.Sockets == nil || isVirtual(r, r.Args[0]) {
		return sysSockNative(e, r)
	}
	s, en := sockOf(r, r.Args[0])
	if en != 0 {
		return sysSockNative(e, r)
	}
	defer unix.Close(s.fd)
	u, err := unix.GetsockoptUcred(s.fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || int(u.Pid) != os.Getpid() || !s.unixDomain() {
		return sysSockNative(e, r)
	}
	var st unix.Stat_t
	if unix.Fstat(s.fd, &st) != nil {
		return sysSockNative(e, r)
	}
	c, found := e.Sockets.PeerCred(st.Ino)
	if int32(r.Args[2]) == soPeerPidfd {
		return e.peerPidfd(r, s.fd, c, found)
	}
	if !found {
		return sysSockNative(e, r)
	}
	var lb [4]byte
	if r.G.Read(r.Args[4], lb[:]) != nil {
		return errno(unix.EFAULT, Host)
	}
	n := int32(binary.NativeEndian.Uint32(lb[:]))
	if n < 0 {
		return errno(unix.EINVAL, Host)
	}
	var out [12]byte // struct ucred
	binary.NativeEndian.PutUint32(out[0:], uint32(c.Pid))
	binary.NativeEndian.PutUint32(out[4:], c.Uid)
	binary.NativeEndian.PutUint32(out[8:], c.Gid)
	n = min(n, int32(len(out)))
	if r.G.Write(r.Args[3], out[:n]) != nil {
		return errno(unix.EFAULT, Host)
	}
	binary.NativeEndian.PutUint32(lb[:], uint32(n))
	if r.G.Write(r.Args[4], lb[:]) != nil {
		return errno(unix.EFAULT, Host)
	}
	return ok(0, Host)
}

// peerPidfd answers SO_PEERPIDFD of socket sfd (kbox's copy), whose host
// peer is kbox: a pidfd of c's process when found (ESRCH once it is gone,
// as Linux when the peer has exited), never one of kbox. The kernel's own
// answer comes first, for its errors (ENOPROTOOPT before 6.5, EINVAL for
// a short optlen).
func (e *Engine) peerPidfd(r *Request, sfd int, c unixsock.Ucred, found bool) Result {
	var lb [4]byte
	if r.G.Read(r.Args[4], lb[:]) != nil {
		return errno(unix.EFAULT, Host)
	}
	if int32(binary.NativeEndian.Uint32(lb[:])) < 4 {
		return errno(unix.EINVAL, Host)
	}
	kfd, err := unix.GetsockoptInt(sfd, unix.SOL_SOCKET, soPeerPidfd)
	if err != nil {
		return fail(err, Host)
	}
	unix.Close(kfd) // kbox's own pidfd
	if !found {
		return errno(unix.ESRCH, Emulated)
	}
	pfd, err := unix.PidfdOpen(int(c.Pid), 0)
	if err != nil {
		return errno(unix.ESRCH, Emulated)
	}
	defer unix.Close(pfd)
	gfd, err := r.G.AddFD(pfd, -1, true) // a pidfd is close-on-exec
	if err != nil {
		return fail(err, Host)
	}
	var out [4]byte
	binary.NativeEndian.PutUint32(out[:], uint32(gfd))
	binary.NativeEndian.PutUint32(lb[:], 4)
	if r.G.Write(r.Args[3], out[:]) != nil || r.G.Write(r.Args[4], lb[:]) != nil {
		return errno(unix.EFAULT, Host)
	}
	return ok(0, Host)
}
