package dispatch

import (
	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Writable files of the guest's /proc whose value kbox keeps
// (oom_score_adj, oom_adj: procfs.Node.Store). Opened read-only they are texts
// like the others (openText). Opened for writing they are virtual fds
// (fdtable.File.Node is a procVarFile) whose writes kbox serves: each
// write(2), pwrite64(2) and each segment of writev(2) is one write of
// the file, as Linux calls the file's write for each, with the writer's
// credentials at that moment and the errno Linux gives. Their host fd is
// a memfd holding the text, opened with the guest's access mode, rewritten
// after each write, so that reads through the same fd (O_RDWR) read the
// current value, at the fd's own position.
//
// A dup2 onto a host fd number (a shell's `>`) makes a write pump
// (bridge.go) that serves what the pipe brings: the value is applied
// before the shell's next dup2 or close returns, but a refused write
// cannot be reported to the writer, whose write into the pipe succeeded.

// procVarFile is the fdtable node of a writable /proc file.
type procVarFile struct {
	text  func() []byte
	store func(w procfs.Creds, b []byte) (int, unix.Errno)
}

// openVar opens a writable node n (at guest path p) for writing, after the
// permission check of its owner's file (mode 0644, the process's
// effective ids).
func (e *Engine) openVar(r *Request, p string, n *procfs.Node, flags int) Result {
	if n.Owner != nil {
		o := n.Owner.IDs()
		c := r.P.creds()
		if !c.mayWrite(o.EUID, o.EGID, 0o644) {
			return errno(unix.EACCES, Emulated)
		}
	}
	acc := flags & unix.O_ACCMODE
	if acc == unix.O_RDONLY {
		return e.openText(r, p, n.Text(), flags&^unix.O_TRUNC) // O_TRUNC asked for write permission only
	}
	if acc != unix.O_WRONLY {
		acc = unix.O_RDWR
	}
	mfd, err := unix.MemfdCreate("kbox:"+p, unix.MFD_CLOEXEC)
	if err != nil {
		return fail(err, Emulated)
	}
	hfd, err := unix.Open(guestpath.ProcFd(mfd), acc|unix.O_CLOEXEC, 0)
	unix.Close(mfd)
	if err != nil {
		return fail(err, Emulated)
	}
	v := &procVarFile{text: n.Text, store: n.Store}
	v.refresh(hfd)
	gfd, err := r.P.FDs.OpenNode(hfd, v, p, flags, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, Emulated)
	}
	return ok(int64(gfd), Emulated)
}

// refresh writes the file's current text into hfd, its memfd.
func (v *procVarFile) refresh(hfd int) {
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

// varOf returns the writable /proc file behind a guest virtual fd.
func varOf(r *Request, fd uint64) (*procVarFile, int, bool) {
	ent, found := r.P.FDs.Get(int(int32(fd)))
	if !found || !ent.File.Host {
		return nil, -1, false
	}
	v, isVar := ent.File.Node.(*procVarFile)
	return v, ent.File.HostFd, isVar
}

// varWrite serves one write of the guest's bytes at addr (n of them) to
// v: Linux's file writes read at most procfs.NumBuf-1 bytes, so no more
// are read here.
func (v *procVarFile) varWrite(r *Request, hfd int, addr, n uint64) (int64, unix.Errno) {
	b := make([]byte, min(n, procfs.NumBuf-1))
	if len(b) > 0 && r.G.Read(addr, b) != nil {
		return 0, unix.EFAULT
	}
	w, en := v.store(r.P.IDs(), b)
	if en != 0 {
		return 0, en
	}
	v.refresh(hfd)
	return int64(w), 0
}

// varIO serves write and pwrite64 of a writable /proc file (the
// position does not matter); reads are its memfd's.
func varIO(r *Request, v *procVarFile, hfd int, write, withOff bool) Result {
	if !write {
		return hostIO(r, hfd, false, withOff)
	}
	w, en := v.varWrite(r, hfd, r.Args[1], r.Args[2])
	if en != 0 {
		return errno(en, Emulated)
	}
	return ok(w, Emulated)
}

// varVecIO serves readv, writev and their positioned forms on a writable
// /proc file: a write per segment, as Linux does for a file without
// vectored writes; reads gather from its memfd.
func varVecIO(r *Request, v *procVarFile, hfd int, write bool, off int64) Result {
	iov, _, en := readIovecs(r, r.Args[1], r.Args[2])
	if en != 0 {
		return errno(en, Emulated)
	}
	var done int64
	for _, s := range iov {
		if s.len == 0 {
			continue
		}
		var n int64
		if write {
			n, en = v.varWrite(r, hfd, s.base, s.len)
		} else {
			b := make([]byte, s.len)
			var got int
			var err error
			if off >= 0 {
				got, err = unix.Pread(hfd, b, off+done)
			} else {
				got, err = unix.Read(hfd, b)
			}
			if err == nil && got > 0 && r.G.Write(s.base, b[:got]) != nil {
				err = unix.EFAULT
			}
			n, en = int64(got), sysabi.Errno(err)
		}
		if en != 0 {
			if done > 0 {
				break
			}
			return errno(en, Emulated)
		}
		done += n
		if !write && n < int64(s.len) {
			break
		}
	}
	return ok(done, Emulated)
}

// bridgeVar serves a dup2 of a writable /proc file open for writing onto
// host fd number target: a pipe whose content a pump writes to the file,
// with the dup2's caller's credentials then (see above). A read-write
// open is EINVAL, as for an LKL file (bridge.go).
func (e *Engine) bridgeVar(r *Request, f *fdtable.File, v *procVarFile, target int, cloexec bool) Result {
	if f.Flags&unix.O_ACCMODE != unix.O_WRONLY {
		return errno(unix.EINVAL, Emulated)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fail(err, Emulated)
	}
	_, err := r.G.AddFD(p[1], target, cloexec)
	unix.Close(p[1])
	if err != nil {
		unix.Close(p[0])
		return fail(err, Emulated)
	}
	owner := r.P
	e.writePump(p[0], func(pm *pump) {
		buf := make([]byte, 4096)
		for {
			n, err := unix.Read(pm.src, buf)
			if err == unix.EINTR {
				continue
			}
			if n <= 0 {
				return
			}
			pm.busy.Store(true)
			v.store(owner.IDs(), buf[:n])
			pm.busy.Store(false)
		}
	})
	return ok(int64(target), Emulated)
}
