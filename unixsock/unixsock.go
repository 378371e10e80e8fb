// Package unixsock names the guest's AF_UNIX sockets.
//
// A guest's unix socket is a host socket: socket(2), and every call on
// its fd but bind, connect and sending to an address, run natively. Its
// names are not the host's:
//
//   - A path is a guest path. Binding one makes a socket node in the
//     image (LKL: S_IFSOCK, so stat, ls and unlink see it) and binds the
//     host socket through the binder (seccomp/supervisor/binder.c), a
//     helper process that chroots into a private directory and binds with
//     the guest's own string: getsockname, getpeername, accept and
//     recvfrom then give the guest's path, and no host path is shown. The
//     binder hands back an O_PATH fd of the socket's host name and removes
//     the name; Set keeps that fd, keyed by the image node's device and
//     inode numbers, and kbox connects and sends to the socket through
//     /proc/self/fd/N of it.
//   - Abstract names live in the guest's network namespace (made at
//     start-up): private to the kbox run. Without one they are refused.
package unixsock

import (
	"encoding/binary"
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// Binder operations (binder.c).
const (
	opBindPath = 1
	opBindAt   = 2
	opOpenIPC  = 3
)

// Binder is kbox's end of the socket binder.
type Binder struct {
	mu sync.Mutex
	fd int
	// start starts the binder at its first use (NewLazyBinder); nil
	// once called, or for a binder started with the guest.
	start func() (int, error)
	// hello says the binder's first answer was read: whether it chrooted
	// (chroot). It is read at the first request, so that the guest's
	// start never waits for the binder.
	hello, chroot bool
}

// NewBinder takes kbox's end of the binder's socketpair.
func NewBinder(fd int) *Binder { return &Binder{fd: fd} }

// NewLazyBinder is a binder that start starts at its first use, returning
// kbox's end of its socketpair (the in-process tiers: most programs never
// bind a path).
func NewLazyBinder(start func() (int, error)) *Binder { return &Binder{fd: -1, start: start} }

// helloLocked reads the binder's first answer, once, after starting a
// lazy binder.
func (b *Binder) helloLocked() error {
	if b.hello {
		return nil
	}
	if b.fd < 0 && b.start != nil {
		start := b.start
		b.start = nil
		fd, err := start()
		if err != nil {
			return err
		}
		b.fd = fd
	}
	if b.fd < 0 {
		return errBinderGone
	}
	v, rfd, err := b.recv()
	if err != nil {
		return err
	}
	if rfd >= 0 {
		unix.Close(rfd)
	}
	b.hello, b.chroot = true, v == 1
	return nil
}

// Chroot says that the binder runs chrooted in its private directory, so
// that a socket's address is the guest's very string. Otherwise paths are
// bound relative to that directory (the guest sees its path without the
// leading slash). It waits for the binder's first answer.
func (b *Binder) Chroot() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hello {
		return b.chroot
	}
	if b.helloLocked() != nil {
		return false
	}
	return b.chroot
}

// Close closes kbox's end: the binder exits.
func (b *Binder) Close() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.start = nil
	if b.fd >= 0 {
		unix.Close(b.fd)
		b.fd = -1
	}
}

var errBinderGone = errors.New("socket binder gone")

func (b *Binder) recv() (int32, int, error) {
	var buf [4]byte
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(b.fd, buf[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, -1, err
		}
		if n != 4 {
			return 0, -1, errBinderGone
		}
		fd := -1
		if oobn > 0 {
			if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for i := range msgs {
					if fds, err := unix.ParseUnixRights(&msgs[i]); err == nil {
						for _, f := range fds {
							if fd < 0 {
								fd = f
							} else {
								unix.Close(f)
							}
						}
					}
				}
			}
		}
		return int32(binary.NativeEndian.Uint32(buf[:])), fd, nil
	}
}

// call sends one request and returns the binder's answer: an fd (or -1)
// and nil, or the errno it failed with.
func (b *Binder) call(op, umask uint32, dir, name string, fds ...int) (int, error) {
	v, fd, err := b.callRaw(op, umask, dir, name, fds...)
	if err == nil && v != 0 {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, unix.Errno(v)
	}
	return fd, err
}

// callRaw sends one request and returns the binder's answer as it came:
// its i32 and its fd (or -1); an error only when the binder could not be
// asked.
func (b *Binder) callRaw(op, umask uint32, dir, name string, fds ...int) (int32, int, error) {
	if b == nil {
		return 0, -1, unix.EPERM
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.helloLocked() != nil {
		return 0, -1, unix.EIO
	}
	msg := make([]byte, 16, 16+len(dir)+len(name))
	binary.NativeEndian.PutUint32(msg[0:], op)
	binary.NativeEndian.PutUint32(msg[4:], umask)
	binary.NativeEndian.PutUint32(msg[8:], uint32(len(dir)))
	binary.NativeEndian.PutUint32(msg[12:], uint32(len(name)))
	msg = append(append(msg, dir...), name...)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(b.fd, msg, oob, nil, 0); err != nil {
		return 0, -1, unix.EIO
	}
	v, fd, err := b.recv()
	if err != nil {
		return 0, -1, unix.EIO
	}
	return v, fd, nil
}

// BindPath binds sock to name, a guest path string, from directory cd
// (made if missing; the guest's working directory for a relative name),
// making directory mk (the socket's) too; both are clean absolute paths
// of the binder's root. It returns an O_PATH fd of the socket's host
// name, which is already removed.
func (b *Binder) BindPath(sock int, cd, mk, name string) (int, error) {
	fd, err := b.call(opBindPath, 0, cd+"\x00"+mk, name, sock)
	if err == nil && fd < 0 {
		err = unix.EIO
	}
	return fd, err
}

// BindAt binds sock to name, one path component, in the host directory
// dir (a bind's), with the guest's umask. The name stays.
func (b *Binder) BindAt(sock, dir int, name string, umask uint32) error {
	fd, err := b.call(opBindAt, umask, "", name, sock, dir)
	if fd >= 0 {
		unix.Close(fd)
	}
	return err
}

// OpenIPC opens /proc/sysvipc/NAME (shm, sem or msg) in the guest's IPC
// namespace.
func (b *Binder) OpenIPC(name string) (int, error) {
	fd, err := b.call(opOpenIPC, 0, "", name)
	if err == nil && fd < 0 {
		err = unix.EIO
	}
	return fd, err
}

// Key is an image socket node: LKL's device and inode numbers.
type Key struct{ Dev, Ino uint64 }

// Set is the state of one kbox run: the binder, whether the guest has a
// network namespace of its own, and the host sockets bound to image
// nodes.
type Set struct {
	Binder *Binder
	// NetNS says that abstract names are private to the run (the guest's
	// network namespace); without it they are refused.
	NetNS bool

	mu    sync.Mutex
	names map[Key]int // O_PATH fds of bound sockets' (removed) host names

	peers peers // the connects kbox made (peercred.go)
}

// New returns a Set.
func New(b *Binder, netns bool) *Set {
	return &Set{Binder: b, NetNS: netns, names: map[Key]int{}}
}

// Bound records that the socket node k is bound to the host socket whose
// O_PATH fd is fd (Set takes it); a node bound before is replaced.
func (s *Set) Bound(k Key, fd int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.names[k]; ok {
		unix.Close(old)
	}
	s.names[k] = fd
}

// Open returns a new O_PATH fd (the caller closes it) of the host socket
// bound to node k, through whose /proc/self/fd link kbox connects and
// sends to it. ok is false for a node no socket was bound to in this run.
func (s *Set) Open(k Key) (fd int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pfd, found := s.names[k]
	if !found {
		return -1, false
	}
	fd, err := unix.FcntlInt(uintptr(pfd), unix.F_DUPFD_CLOEXEC, 0)
	return fd, err == nil
}

// Forget drops node k (its last name was removed, or a new node has its
// numbers).
func (s *Set) Forget(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fd, ok := s.names[k]; ok {
		unix.Close(fd)
		delete(s.names, k)
	}
}

// Any reports whether some node is bound (a cheap test before a stat).
func (s *Set) Any() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.names) > 0
}

// Close closes the binder and the host names.
func (s *Set) Close() {
	if s == nil {
		return
	}
	s.Binder.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, fd := range s.names {
		unix.Close(fd)
		delete(s.names, k)
	}
}

// TestBinder is a Binder with no process behind it, for unit tests of its
// callers: Chroot reports chroot, requests fail with EIO.
func TestBinder(chroot bool) *Binder { return &Binder{fd: -1, hello: true, chroot: chroot} }
