// The meta family's statx(2) (FamMeta in table.go): an image path's
// from LKL with its shadow's newer size and times, a host file's with the
// device number the guest sees (package hostdev), a /proc node's made
// from its stat.

package dispatch

import (
	"encoding/binary"
	"runtime"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/hostdev"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

// Offsets in struct statx.
const (
	statxInoOff    = 32
	statxSizeOff   = 40
	statxBlocksOff = 48
	statxAtimeOff  = 64
	statxCtimeOff  = 96
	statxMtimeOff  = 112
	statxDevOff    = 136
)

// statxOverlay puts a shadow's size, blocks and times (st, from
// shadowfd.Manager.Stat) into a statx buffer.
func statxOverlay(buf []byte, st *lkl.Stat64) {
	le := binary.LittleEndian
	le.PutUint64(buf[statxSizeOff:], uint64(st.Size))
	le.PutUint64(buf[statxBlocksOff:], uint64(st.Blocks))
	le.PutUint64(buf[statxAtimeOff:], uint64(st.Atime))
	le.PutUint32(buf[statxAtimeOff+8:], uint32(st.AtimeNsec))
	le.PutUint64(buf[statxCtimeOff:], uint64(st.Ctime))
	le.PutUint32(buf[statxCtimeOff+8:], uint32(st.CtimeNsec))
	le.PutUint64(buf[statxMtimeOff:], uint64(st.Mtime))
	le.PutUint32(buf[statxMtimeOff+8:], uint32(st.MtimeNsec))
}

// statxShadow corrects a statx of an image path whose file has a shadow
// (see Manager.Overlay); nothing is done while no shadow exists.
func (e *Engine) statxShadow(buf []byte) {
	le := binary.LittleEndian
	st := lkl.Stat64{
		Dev: unix.Mkdev(le.Uint32(buf[statxDevOff:]), le.Uint32(buf[statxDevOff+4:])),
		Ino: le.Uint64(buf[statxInoOff:]),
	}
	if n := e.Shadows.OfInode(st.Dev, st.Ino); n != nil && e.Shadows.Stat(n, &st) == nil {
		statxOverlay(buf, &st)
	}
}

// sysStatx serves statx(2).
func sysStatx(e *Engine, r *Request) Result {
	dirfd, flags := int32(r.Args[0]), int(r.Args[2])
	p, en := readPath(r, r.Args[1])
	if en != 0 {
		return errno(en, LKL)
	}
	sc := getScratch() // LKL writes it: heap memory, not this frame
	defer putScratch(sc)
	buf := &sc.sx
	if p == "" && flags&unix.AT_EMPTY_PATH != 0 {
		if res, done := e.statxFd(r, int(dirfd), flags, buf[:], false); done {
			return res
		}
	} else {
		var t guestpath.Target
		if en := e.resolveInto(r, dirfd, p, &t); en != 0 {
			return errno(en, LKL)
		}
		switch {
		case flags&unix.AT_SYMLINK_NOFOLLOW == 0 && t.FdDir:
			t, en = e.followDev(r, t)
		case flags&unix.AT_SYMLINK_NOFOLLOW != 0 && t.Fd != 0:
			t, en = e.procFdLink(r, t)
		}
		if en != 0 {
			return errno(en, Emulated)
		}
		if t.Proc != nil {
			return e.statxProc(r, t, "", flags&unix.AT_SYMLINK_NOFOLLOW != 0)
		}
		if t.Fd > 0 && flags&unix.AT_SYMLINK_NOFOLLOW == 0 {
			// /dev/fd/N (sys_file_dev.go): the file fd N is.
			if res, done := e.statxFd(r, t.Fd-1, flags&^unix.AT_EMPTY_PATH, buf[:], true); done {
				return res
			}
		} else if t.Host {
			var sx unix.Statx_t
			err := guestpath.At(t, flags&unix.AT_SYMLINK_NOFOLLOW != 0, func(d int, name string, empty int) error {
				return unix.Statx(d, name, flags&^unix.AT_EMPTY_PATH|empty, int(r.Args[3]), &sx)
			})
			if err != nil {
				return fail(err, Host)
			}
			e.procOwner(&t, &sx.Uid, &sx.Gid)
			hostdev.Statx(&sx)
			copy(buf[:], asBytes(&sx))
		} else {
			cred, wb, gen := e.factKey(r)
			lp := t.LKLPath()
			_, le := lklPath(lkl.SysStatx, 1, lp, [6]uintptr{atFdcwd, 0, uintptr(flags &^ unix.AT_EMPTY_PATH), uintptr(r.Args[3]), uptr(buf[:])})
			runtime.KeepAlive(buf)
			if le != 0 {
				return errno(le, LKL)
			}
			e.noteStatx(cred, wb, gen, lp, flags&unix.AT_SYMLINK_NOFOLLOW != 0, buf[:])
			e.statxShadow(buf[:])
			if r.Hints != nil && (p[0] == '/' || dirfd == unix.AT_FDCWD) {
				e.armXattrHint(r, p, &t, flags&unix.AT_SYMLINK_NOFOLLOW != 0, cred, wb, gen) // hint.go
			}
			if r.Hints != nil && t.Tail == "" {
				r.sawStat(t.Path, r.Args[4], &StatxKind{true, uint32(flags), uint32(r.Args[3])}) // hint_stat.go
			}
		}
	}
	if err := r.G.Write(r.Args[4], buf[:]); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

// statxFd fills buf with statx of guest fd fd for statx(fd, "",
// AT_EMPTY_PATH), or for a path through /dev/fd/N (alias). It is done when
// it answered: with an error, or by continuing a host fd's own statx
// (never for alias, which names the file through kbox's /proc link).
func (e *Engine) statxFd(r *Request, fd int, flags int, buf []byte, alias bool) (Result, bool) {
	lfd := -1
	var node *shadowfd.Node
	mask := int(r.Args[3])
	hostStatx := func(dirfd int, name string, fl int) (Result, bool) {
		var sx unix.Statx_t
		var err error
		if name == "" {
			err = fdStatx(dirfd, fl, mask, &sx)
		} else {
			err = unix.Statx(dirfd, name, fl, mask, &sx)
		}
		if err != nil {
			if alias && (err == unix.EBADF || err == unix.ENOENT) {
				err = unix.ENOENT
			}
			return fail(err, Host), true
		}
		hostdev.Statx(&sx)
		copy(buf, asBytes(&sx))
		return Result{}, false
	}
	if !isVirtual(r, uint64(uint32(fd))) {
		// A shadow reports its LKL file (see fstatHost), a file of a
		// host filesystem its host statx with the device the guest
		// sees; a pipe or a socket, and an fd kbox cannot stat (EBADF),
		// are left to the host, or through /dev/fd/N answered as they
		// are.
		var hst unix.Stat_t
		err := error(unix.EBADF)
		if fd >= 0 {
			err = shadowfd.StatGuestFd(r.P.Tgid, fd, &hst)
		}
		if err == nil {
			node = e.Shadows.Lookup(hst.Dev, hst.Ino)
		}
		if node == nil {
			var res Result
			var done bool
			switch {
			case err != nil && alias:
				return errno(unix.ENOENT, Host), true
			case !alias && (err != nil || hostdev.Internal(hst.Dev)):
				return cont, true
			case r.P.Tgid == kboxPid && !alias:
				res, done = hostStatx(fd, "", flags|unix.AT_EMPTY_PATH)
			default:
				res, done = hostStatx(unix.AT_FDCWD, fdLink(r, fd), flags&^(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH))
			}
			if done && !alias {
				return cont, true
			}
			return res, done
		}
		lfd = node.LKLFd()
	} else {
		if _, lp := listingOf(r, uint64(uint32(fd))); lp != "" {
			return e.statxProc(r, guestpath.Target{}, lp, false), true // a directory of /proc
		}
		hfd, isHost := hostFile(r, uint64(uint32(fd)))
		if isHost {
			// A copy of a shadow's fd reports its LKL file too.
			if node = e.Shadows.OfHostFd(hfd); node == nil {
				return hostStatx(hfd, "", flags|unix.AT_EMPTY_PATH)
			}
			lfd = node.LKLFd()
		} else {
			var en unix.Errno
			if lfd, en = vfd(r, uint64(uint32(fd))); en != 0 {
				if alias && en == unix.EBADF {
					en = unix.ENOENT
				}
				return errno(en, LKL), true
			}
		}
	}
	empty := []byte{0}
	_, le := lkl.Syscall6(lkl.SysStatx, uintptr(lfd), uptr(empty), uintptr(flags|unix.AT_EMPTY_PATH), uintptr(mask), uptr(buf), 0)
	runtime.KeepAlive(empty)
	if le != 0 {
		return errno(le, LKL), true
	}
	if node != nil {
		var st lkl.Stat64
		if err := e.Shadows.Stat(node, &st); err == nil {
			statxOverlay(buf, &st)
		}
	}
	return Result{}, false
}

// statxProc answers statx of a node of /proc (or, p set, of the
// generated directory at p), from its stat.
func (e *Engine) statxProc(r *Request, t guestpath.Target, p string, nofollow bool) Result {
	var st unix.Stat_t
	var en unix.Errno
	if p != "" {
		en = e.statListing(r, p, &st)
	} else {
		en = e.procStat(r, t, nofollow, &st)
	}
	if en != 0 {
		return errno(en, Emulated)
	}
	sx := statxOf(&st)
	if err := r.G.Write(r.Args[4], asBytes(&sx)); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	return ok(0, Emulated)
}

// statxOf fills a statx with what a stat has (STATX_BASIC_STATS).
func statxOf(st *unix.Stat_t) unix.Statx_t {
	ts := func(t unix.Timespec) unix.StatxTimestamp {
		return unix.StatxTimestamp{Sec: t.Sec, Nsec: uint32(t.Nsec)}
	}
	return unix.Statx_t{
		Mask:       unix.STATX_BASIC_STATS,
		Blksize:    uint32(st.Blksize),
		Nlink:      uint32(st.Nlink),
		Uid:        st.Uid,
		Gid:        st.Gid,
		Mode:       uint16(st.Mode),
		Ino:        st.Ino,
		Size:       uint64(st.Size),
		Blocks:     uint64(st.Blocks),
		Atime:      ts(st.Atim),
		Ctime:      ts(st.Ctim),
		Mtime:      ts(st.Mtim),
		Rdev_major: unix.Major(st.Rdev),
		Rdev_minor: unix.Minor(st.Rdev),
		Dev_major:  unix.Major(st.Dev),
		Dev_minor:  unix.Minor(st.Dev),
	}
}
