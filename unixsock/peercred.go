package unixsock

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// SO_PEERCRED of the guest's connections. Linux gives the accepting side
// of a stream or seqpacket connection the process that called connect(2)
// (its pid and effective ids at that moment). kbox makes every connect to
// a name on its copy of the guest's socket, so the host records kbox.
// NotePeer keeps, by the connecting socket's inode, the guest process
// that asked and its credentials; PeerCred, for a socket whose host
// answer is kbox, finds its peer's inode through the socket-diagnostics
// netlink of the guest's network namespace (a socket the binder opens
// there: binder.c, OP_OPEN_DIAG) and answers what NotePeer kept.

// opOpenDiag opens a NETLINK_SOCK_DIAG socket in the binder's namespace.
const opOpenDiag = 6

// peersMax bounds the connects kept: the oldest goes first.
const peersMax = 4096

// Ucred is SO_PEERCRED's answer (struct ucred).
type Ucred struct {
	Pid      int32
	Uid, Gid uint32
}

type peers struct {
	mu    sync.Mutex
	n     atomic.Int32 // len(byIno)
	byIno map[uint64]Ucred
	order []uint64
	diag  int // the diagnostics socket; 0 before it is asked for
	seq   uint32
	none  bool // the binder could not open one
}

// NotePeer records that the guest process of c connected the socket whose
// inode is ino.
func (s *Set) NotePeer(ino uint64, c Ucred) {
	p := &s.peers
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byIno == nil {
		p.byIno = map[uint64]Ucred{}
	}
	if _, found := p.byIno[ino]; !found {
		p.order = append(p.order, ino)
		if len(p.order) > peersMax {
			delete(p.byIno, p.order[0])
			p.order = p.order[1:]
		}
	}
	p.byIno[ino] = c
	p.n.Store(int32(len(p.byIno)))
}

// PeerCred returns what NotePeer kept for the peer of the socket whose
// inode is ino, if kbox made that connect.
func (s *Set) PeerCred(ino uint64) (Ucred, bool) {
	p := &s.peers
	if p.n.Load() == 0 {
		return Ucred{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	peer, ok := p.peerOf(s.Binder, ino)
	if !ok {
		return Ucred{}, false
	}
	c, found := p.byIno[peer]
	return c, found
}

// peerOf asks the diagnostics socket for the peer of unix socket ino.
func (p *peers) peerOf(b *Binder, ino uint64) (uint64, bool) {
	if p.none || ino > 0xffffffff {
		return 0, false
	}
	if p.diag <= 0 {
		fd, err := b.call(opOpenDiag, 0, "", "")
		if err != nil || fd < 0 {
			p.none = true
			return 0, false
		}
		tv := unix.Timeval{Sec: 1}
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		p.diag = fd
	}
	p.seq++
	// struct nlmsghdr, then struct unix_diag_req for one socket with
	// UDIAG_SHOW_PEER and no cookie.
	const reqLen = unix.NLMSG_HDRLEN + 24
	req := make([]byte, reqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], reqLen)
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], p.seq)
	d := req[unix.NLMSG_HDRLEN:]
	d[0] = unix.AF_UNIX
	ne.PutUint32(d[4:], 0xffffffff) // every state
	ne.PutUint32(d[8:], uint32(ino))
	ne.PutUint32(d[12:], 4)          // UDIAG_SHOW_PEER
	ne.PutUint32(d[16:], 0xffffffff) // INET_DIAG_NOCOOKIE
	ne.PutUint32(d[20:], 0xffffffff)
	if err := unix.Sendto(p.diag, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, false
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(p.diag, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, false
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(ne.Uint32(b[0:]))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return 0, false
			}
			typ, seq, data := ne.Uint16(b[4:]), ne.Uint32(b[8:]), b[unix.NLMSG_HDRLEN:l]
			b = b[min((l+3)&^3, len(b)):]
			if seq != p.seq {
				continue // the answer to an earlier request that timed out
			}
			if typ != unix.SOCK_DIAG_BY_FAMILY || len(data) < 16 {
				return 0, false // NLMSG_ERROR: no such socket
			}
			return diagPeer(data[16:])
		}
	}
}

// diagPeer finds UNIX_DIAG_PEER among the attributes after a struct
// unix_diag_msg.
func diagPeer(attrs []byte) (uint64, bool) {
	ne := binary.NativeEndian
	for len(attrs) >= 4 {
		l, typ := int(ne.Uint16(attrs[0:])), ne.Uint16(attrs[2:])
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if typ == 2 && l >= 8 { // UNIX_DIAG_PEER
			return uint64(ne.Uint32(attrs[4:])), true
		}
		attrs = attrs[min((l+3)&^3, len(attrs)):]
	}
	return 0, false
}
