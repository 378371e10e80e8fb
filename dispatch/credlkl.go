package dispatch

import (
	"runtime"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// procCred is a process's credentials (cred.go) with the views LKL checks
// them through: fs for every file operation, access for access(2) and
// faccessat(2) without AT_EACCESS (real ids as filesystem ids). Both are
// interned by lkl.NewCred, so they are usually the same *lkl.Cred, and
// processes with the same credentials share them.
type procCred struct {
	Cred
	fs, access *lkl.Cred
	// vfsRoot says LKL's permission checks pass for any file mode:
	// CAP_DAC_OVERRIDE is effective (see openCached).
	vfsRoot bool
}

func newProcCred(c Cred) *procCred {
	a := c.Access()
	return &procCred{
		Cred:    c,
		fs:      lkl.NewCred(c.FSUID, c.FSGID, c.Groups, c.Eff),
		access:  lkl.NewCred(a.FSUID, a.FSGID, a.Groups, a.Eff),
		vfsRoot: c.Has(capDacOverride),
	}
}

// initialCred is the first process's credentials: root with -S/-0, UID:GID
// with --change-id, otherwise kbox's own host ids and groups.
func initialCred(opt *Options) Cred {
	switch {
	case opt.RootID:
		return RootCred()
	case opt.ChangeID:
		return UserCred(opt.UID, opt.GID, []uint32{opt.GID})
	}
	var groups []uint32
	if gs, err := unix.Getgroups(); err == nil {
		for _, g := range gs {
			groups = append(groups, uint32(g))
		}
	}
	return UserCred(uint32(unix.Getuid()), uint32(unix.Getgid()), groups)
}

// unknownCred is what a process of unknown credentials (Lookup) holds
// until its kill takes effect: the overflow ids, no group, no capability.
func unknownCred() Cred {
	return UserCred(65534, 65534, nil)
}

// creds returns p's credentials.
func (p *Proc) creds() *procCred { return p.cred.Load() }

// setCred gives p new credentials (a set*id or capset, an exec). Children
// that p forked before and that have not made a notified syscall yet are
// registered first, with the credentials they were forked with.
func (e *Engine) setCred(p *Proc, c Cred) {
	if cur := p.cred.Load(); cur.Equal(&c) {
		return
	}
	e.registerChildren(p)
	if !c.Equal(&e.initCred.Cred) {
		e.credsChanged.Store(true)
	}
	p.cred.Store(newProcCred(c))
}

// useCred makes this thread's LKL calls run with the caller's credentials
// (applied lazily, by the next LKL call that needs them: lkl.UseCred).
func useCred(r *Request) unix.Errno {
	if r.P == nil {
		return 0
	}
	if err := lkl.UseCred(r.P.creds().fs); err != nil {
		return unix.ENOMEM
	}
	return 0
}

// asRoot runs kbox's own LKL work on the serving thread (shadow fills and
// write-backs, reading a program for exec) as root, whatever guest it
// serves (lkl.AsRoot).
func asRoot(f func()) { lkl.AsRoot(f) }

// lklOpen opens an image path in LKL for e.open with the caller's
// credentials. lflags may ask for read access the guest did not (a
// write-only open of a file that becomes a shadow is filled from the
// file): when that is all the caller lacks, the file is opened as the
// guest asked, which checks permissions, creates and truncates under its
// credentials, and a regular file that will be a shadow is then reopened
// for kbox, as root, read-write.
func (e *Engine) lklOpen(r *Request, path string, lflags int, mode uint32, flags int) (uintptr, unix.Errno) {
	return e.lklOpenAt(r, atFdcwd, path, lflags, mode, flags)
}

// lklOpenAt is lklOpen relative to the LKL fd dirfd.
func (e *Engine) lklOpenAt(r *Request, dirfd uintptr, path string, lflags int, mode uint32, flags int) (uintptr, unix.Errno) {
	fd, le := lklPath(lkl.SysOpenat, 1, path, [6]uintptr{dirfd, 0, uintptr(lflags), uintptr(mode)})
	if le != unix.EACCES || flags&unix.O_ACCMODE != unix.O_WRONLY || lflags&unix.O_ACCMODE != unix.O_RDWR {
		return fd, le
	}
	wflags := lflags&^unix.O_ACCMODE | unix.O_WRONLY
	wfd, le := lklPath(lkl.SysOpenat, 1, path, [6]uintptr{dirfd, 0, uintptr(wflags), uintptr(mode)})
	if le != 0 {
		return 0, le
	}
	st, err := lkl.Fstat(int(wfd))
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || !e.Shadows.Fits(st.Size) || flags&unix.O_PATH != 0 {
		return wfd, 0 // a virtual fd, write-only as asked
	}
	rflags := lflags &^ (unix.O_CREAT | unix.O_EXCL | unix.O_TRUNC)
	asRoot(func() {
		fd, le = lklPath(lkl.SysOpenat, 1, path, [6]uintptr{dirfd, 0, uintptr(rflags), 0})
	})
	if le == 0 {
		if rst, err := lkl.Fstat(int(fd)); err != nil || rst.Dev != st.Dev || rst.Ino != st.Ino {
			lkl.Close(int(fd))
			le = unix.EACCES
		}
	}
	lkl.Close(int(wfd))
	return fd, le
}

// lklAccess is faccessat2 in LKL for an image path: the effective ids with
// AT_EACCESS, otherwise the real ones (applied as filesystem ids for this
// call; LKL itself then always checks with AT_EACCESS, since its task's
// real ids are root's).
func lklAccess(r *Request, path string, mode, flags int) unix.Errno {
	var restore *lkl.Cred
	if flags&unix.AT_EACCESS == 0 && r.P != nil {
		if c := r.P.creds(); c.access != c.fs {
			if lkl.UseCred(c.access) != nil {
				return unix.ENOMEM
			}
			restore = c.fs
		}
	}
	sc := getScratch()
	b := sc.cstring(path)
	_, le := lkl.Syscall6(lkl.SysFaccessat2, atFdcwd, uptr(b), uintptr(mode), uintptr(flags|unix.AT_EACCESS), 0, 0)
	runtime.KeepAlive(b)
	putScratch(sc)
	if restore != nil {
		lkl.UseCred(restore) // the same groups as before: nothing to allocate
	}
	return le
}
