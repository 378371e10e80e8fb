package procfs

import (
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Writable files of the guest's /proc whose value kbox keeps
// (oom_score_adj, oom_adj: Node.Store). Opened read-only they are texts
// like the others (TextFd). Opened for writing they are virtual fds whose
// fdtable node is a *Var and whose writes kbox serves: each write(2),
// pwrite64(2) and each segment of writev(2) is one write of the file, as
// Linux calls the file's write for each, with the writer's credentials at
// that moment and the errno Linux gives. Their host fd is a memfd holding
// the text, opened with the guest's access mode, rewritten after each
// write, so that reads through the same fd (O_RDWR) read the current
// value, at the fd's own position.
//
// A dup2 onto a host fd number (a shell's `>`) makes a write pump (the
// engine's) that serves what the pipe brings (Var.Pump): the value is
// applied before the shell's next dup2 or close returns, but a refused
// write cannot be reported to the writer, whose write into the pipe
// succeeded.

// Var is the fdtable node of a writable /proc file open for writing.
type Var struct {
	text  func() []byte
	store func(w Creds, b []byte) (int, unix.Errno)
}

// NewVar makes the host fd of writable node n (at guest path p) opened
// with access mode acc (O_WRONLY or O_RDWR): a memfd holding its text.
func NewVar(n *Node, p string, acc int) (*Var, int, error) {
	if acc != unix.O_WRONLY {
		acc = unix.O_RDWR
	}
	mfd, err := unix.MemfdCreate("kbox:"+p, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, -1, err
	}
	hfd, err := unix.Open(selfFd(mfd), acc|unix.O_CLOEXEC, 0)
	unix.Close(mfd)
	if err != nil {
		return nil, -1, err
	}
	v := &Var{text: n.Text, store: n.Store}
	v.refresh(hfd)
	return v, hfd, nil
}

// refresh writes the file's current text into hfd, its memfd.
func (v *Var) refresh(hfd int) {
	b := v.text()
	unix.Ftruncate(hfd, 0)
	for off := 0; off < len(b); {
		n, err := unix.Pwrite(hfd, b[off:], int64(off))
		if err != nil {
			return
		}
		off += n
	}
}

// Write serves one write of the guest's bytes at addr (n of them, in m)
// by a writer of credentials w, hfd the file's memfd: Linux's file writes
// read at most NumBuf-1 bytes, so no more are read here.
func (v *Var) Write(m Memory, w Creds, hfd int, addr, n uint64) (int64, unix.Errno) {
	b := make([]byte, min(n, NumBuf-1))
	if len(b) > 0 && m.Read(addr, b) != nil {
		return 0, unix.EFAULT
	}
	got, en := v.store(w, b)
	if en != 0 {
		return 0, en
	}
	v.refresh(hfd)
	return int64(got), 0
}

// Seg is one segment of a vectored read or write: n bytes at addr.
type Seg struct{ Addr, Len uint64 }

// Guest is the guest memory a vectored read of a Var writes into.
type Guest interface {
	Memory
	Write(addr uint64, b []byte) error
}

// VecIO serves readv, writev and their positioned forms (off >= 0) on a
// Var whose memfd is hfd: a write per segment, as Linux does for a file
// without vectored writes; reads gather from the memfd. It returns the
// bytes done, or the errno of a first segment that failed.
func (v *Var) VecIO(g Guest, w Creds, hfd int, segs []Seg, write bool, off int64) (int64, unix.Errno) {
	var done int64
	for _, s := range segs {
		if s.Len == 0 {
			continue
		}
		var n int64
		var en unix.Errno
		if write {
			n, en = v.Write(g, w, hfd, s.Addr, s.Len)
		} else {
			b := make([]byte, s.Len)
			var got int
			var err error
			if off >= 0 {
				got, err = unix.Pread(hfd, b, off+done)
			} else {
				got, err = unix.Read(hfd, b)
			}
			if err == nil && got > 0 && g.Write(s.Addr, b[:got]) != nil {
				err = unix.EFAULT
			}
			n, en = int64(got), sysabi.Errno(err)
		}
		if en != 0 {
			if done > 0 {
				break
			}
			return 0, en
		}
		done += n
		if !write && n < int64(s.Len) {
			break
		}
	}
	return done, 0
}

// Pump serves what a pipe (src) brings to the file, each read one write
// with the credentials owner gives then; busy is set around each. It
// returns at the pipe's end.
func (v *Var) Pump(src int, owner func() Creds, busy func(bool)) {
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(src, buf)
		if err == unix.EINTR {
			continue
		}
		if n <= 0 {
			return
		}
		busy(true)
		v.store(owner(), buf[:n])
		busy(false)
	}
}
