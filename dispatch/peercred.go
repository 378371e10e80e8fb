package dispatch

import (
	"encoding/binary"
	"os"

	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// SO_PEERCRED of a unix connection kbox made (unixsock/peercred.go): the
// host records kbox as the connecting process, Linux the guest process
// that called connect, with its effective ids.

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
