package dispatch

import (
	"bytes"
	"encoding/binary"
	"sync"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Directory listings: getdents64 of LKL directories and of the ones kbox
// generates.

// direntMax bounds one getdents64 through LKL; direntBufs holds its
// buffers, reused: a directory walk (find, ls -R, git status) lists
// every directory, and a fresh 64 KiB each time was cleared and
// collected. Only the bytes LKL wrote in this call (or kbox made) reach
// the guest.
const direntMax = 64 << 10

var direntBufs = sync.Pool{New: func() any { b := make([]byte, direntMax); return &b }}

// sysGetdents64 serves getdents64(2). A listing may move the
// directory's access time: the stat cache's generation moves (OwnChange),
// but for a directory on a read-only mount, and on a writable one, whose
// new time goes to the shadows' access-time log (cache.go).
func sysGetdents64(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) {
		return cont
	}
	ent, held := r.P.FDs.Get(int(int32(r.Args[0])))
	quiet := held && e.isQuiet(ent.File)
	gen := e.stats.Gen()
	switch {
	case quiet:
		defer e.notifySweep()
	case held && e.lazyListing(ent.File):
		defer e.listed(ent.File, gen)
	default:
		e.stats.Changed()
		defer e.changeDone()
	}
	if l, _ := listingOf(r, r.Args[0]); l != nil {
		return readListing(r, l)
	}
	lfd, en := vfd(r, r.Args[0])
	if en != 0 {
		return errno(en, LKL)
	}
	n := min(r.Args[2], direntMax)
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := (*bp)[:max(n, 1)] // a real pointer: LKL judges a zero count
	// The position before the call: a guest buffer that cannot be written
	// gets EFAULT and, as on Linux, its entries stay to be read.
	pos, _ := lkl.Syscall6(lkl.SysLseek, uintptr(lfd), 0, unix.SEEK_CUR, 0, 0, 0)
	res, le := lkl.Syscall6(lkl.SysGetdents64, uintptr(lfd), uptr(buf), uintptr(n), 0, 0, 0)
	if le != 0 {
		return errno(le, LKL)
	}
	if pol := e.Opt.Policy; pol != nil && pol.paths && res > 0 {
		// Hidden entries are left out (policy.go); a batch of only
		// hidden ones is not the end: read on.
		if held && pol.P.HidesIn(ent.File.Path) {
			for res > 0 {
				if m := e.hideDirents(ent.File.Path, buf[:res]); m > 0 {
					res = uintptr(m)
					break
				}
				if res, le = lkl.Syscall6(lkl.SysGetdents64, uintptr(lfd), uptr(buf), uintptr(n), 0, 0, 0); le != 0 {
					return errno(le, LKL)
				}
			}
		}
	}
	if res == 0 && len(e.Opt.Binds) > 0 {
		// The end of the image's listing: add bind mount points that
		// the image lacks.
		if held {
			m, k, en := guestpath.MountDirents(e.Opt.Binds, ent.File.Path, buf, int(ent.File.Listed.Load()))
			if en != 0 {
				return errno(en, Emulated)
			}
			if err := r.G.Write(r.Args[1], buf[:m]); err != nil {
				return errno(unix.EFAULT, Emulated)
			}
			ent.File.Listed.Add(int32(k))
			return ok(int64(m), Emulated)
		}
	}
	if err := r.G.Write(r.Args[1], buf[:res]); err != nil {
		lkl.Syscall6(lkl.SysLseek, uintptr(lfd), pos, unix.SEEK_SET, 0, 0, 0)
		return errno(unix.EFAULT, LKL)
	}
	if r.Hints != nil && quiet && res > 0 {
		e.statAhead(r, ent.File, lfd, buf[:res]) // hint_stat.go
	}
	return ok(int64(res), LKL)
}

// readListing serves getdents64 of a directory whose entries kbox
// generates (package procfs).
func readListing(r *Request, l *fdtable.Listing) Result {
	buf := make([]byte, min(r.Args[2], 64<<10))
	pos := l.Pos()
	n, err := l.Read(buf)
	if err != nil {
		return fail(err, Emulated)
	}
	if err := r.G.Write(r.Args[1], buf[:n]); err != nil {
		l.Unread(pos) // as on Linux, the entries stay to be read
		return errno(unix.EFAULT, Emulated)
	}
	return ok(int64(n), Emulated)
}

// sysGetdentsOld serves getdents(2): old layout, ENOSYS.
func sysGetdentsOld(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) {
		return cont
	}
	return errno(unix.ENOSYS, Emulated)
}

// direntAt returns the name (without its NUL) and length of the
// getdents64 record at off in b; ok false where b holds no whole record
// there.
func direntAt(b []byte, off int) (name []byte, reclen int, ok bool) {
	if off+19 > len(b) {
		return nil, 0, false
	}
	reclen = int(binary.NativeEndian.Uint16(b[off+16:]))
	if reclen < 19 || off+reclen > len(b) {
		return nil, 0, false
	}
	name = b[off+19 : off+reclen]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return name, reclen, true
}
