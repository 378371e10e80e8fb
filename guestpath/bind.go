package guestpath

import (
	"encoding/binary"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// A Bind shows a host directory inside the guest (-b HOST:GUEST[:ro]). It is
// a host route with its own root: every guest path at or below Guest is
// served from the host directory, resolved with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_MAGICLINKS) from Root, an O_PATH fd of the directory opened
// once at start, so that nothing above it on the host is reached. A
// symlink whose target leaves the directory (absolute, or ".." above it)
// fails that resolution with EXDEV: the engine then walks the path in the
// guest's tree, where such a target names a guest path, as in a bind
// mount (dispatch/resolve.go, redoWalked).
type Bind struct {
	Host     string // canonical absolute host path of the directory
	Guest    string // clean absolute guest path
	ReadOnly bool
	// Root is an O_PATH fd of Host.
	Root int
	// Ino is Host's inode number, for the mount point's directory entry.
	Ino uint64
	// Listed: the image has no Guest directory, so getdents of its
	// parent adds an entry for it (the image is never modified).
	Listed bool
	// Shown are names at the root that the directory lacks, each kbox's
	// O_PATH fd of the host file the name stands for (Devpts: the host
	// terminal kbox runs on, by its pty number).
	Shown map[string]int
}

// OpenBind opens the host directory of a bind and checks the guest path.
// Errors about the host directory are setup errors; UsageErr reports a bad
// guest path.
func OpenBind(host, guest string, ro bool) (*Bind, error) {
	abs, err := filepath.Abs(host)
	if err != nil {
		return nil, fmt.Errorf("bind source %s: %w", host, err)
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("bind source %s: %w", host, unwrapPath(err))
	}
	fd, err := unix.Open(canon, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOTDIR {
			return nil, fmt.Errorf("bind source %s: not a directory", host)
		}
		return nil, fmt.Errorf("bind source %s: %w", host, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind source %s: %w", host, err)
	}
	return &Bind{Host: canon, Guest: Clean("/", guest), ReadOnly: ro, Root: fd, Ino: st.Ino}, nil
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// CheckBindGuests reports a bind guest path that is unusable: not
// absolute, "/", on or under a system host route (/proc, /sys, /dev), or
// overlapping another bind.
func CheckBindGuests(guests []string, routes []string) error {
	for i, g := range guests {
		if !strings.HasPrefix(g, "/") {
			return fmt.Errorf("bind destination %s must be an absolute guest path", g)
		}
		g = Clean("/", g)
		if g == "/" {
			return fmt.Errorf("bind destination may not be /")
		}
		for _, r := range routes {
			if Under(g, r) {
				return fmt.Errorf("bind destination %s is on the %s host route", g, r)
			}
		}
		for _, o := range guests[:i] {
			if o = Clean("/", o); Under(g, o) || Under(o, g) {
				return fmt.Errorf("bind destination %s overlaps bind %s", g, o)
			}
		}
	}
	return nil
}

// CheckBindsInImage checks, against the mounted image, that each bind's
// mount point can be shown: its parent is a directory of the image, and
// the mount point itself is a directory or missing (then it is listed in
// its parent without being created).
func CheckBindsInImage(binds []*Bind) error {
	for _, b := range binds {
		parent := path.Dir(b.Guest)
		st, err := lkl.Stat(parent, false)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("bind destination %s: its parent %s is not a directory of the image", b.Guest, parent)
		}
		st, err = lkl.Stat(b.Guest, false)
		switch {
		case err == unix.ENOENT:
			b.Listed = true
		case err != nil:
			return fmt.Errorf("bind destination %s: %w", b.Guest, err)
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return fmt.Errorf("bind destination %s: not a directory in the image", b.Guest)
		}
	}
	return nil
}

// BindOf returns the bind among binds holding clean guest path p, or nil.
func BindOf(binds []*Bind, p string) *Bind {
	for _, b := range binds {
		if Under(p, b.Guest) {
			return b
		}
	}
	return nil
}

// Stat stats guest path p of the bind, following symlinks inside it.
func (b *Bind) Stat(p string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := b.OpenIn(b.Target(p).Rel, unix.O_PATH, 0)
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	err = unix.Fstat(fd, &st)
	return st, err
}

// Target is the Target of guest path p in bind b.
func (b *Bind) Target(p string) Target {
	rel := strings.TrimPrefix(strings.TrimPrefix(p, b.Guest), "/")
	if rel == "" {
		rel = "."
	}
	return Target{Host: true, Path: p, Route: b.Guest, Rel: rel, Bind: b}
}

// GuestPath maps a host path (of a guest fd) inside one of binds back to
// its guest path.
func GuestPath(binds []*Bind, host string) (string, bool) {
	for _, b := range binds {
		if host == b.Host {
			return b.Guest, true
		}
		if b.Host == "/" && strings.HasPrefix(host, "/") {
			return b.Guest + host, true
		}
		if Under(host, b.Host) {
			return b.Guest + host[len(b.Host):], true
		}
	}
	return "", false
}

// bindResolve confines a bind's resolution beneath its directory: a link
// whose target leaves it (absolute, or ".." above the directory) is not
// followed there but fails with EXDEV, which the engine answers by
// walking the path in the guest's tree (dispatch/resolve.go, redoWalked).
const bindResolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// OpenIn opens rel beneath the bind's root, confined.
func (b *Bind) OpenIn(rel string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: bindResolve}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 {
		how.Mode = 0
	}
	if hfd, ok := b.Shown[rel]; ok {
		var st unix.Stat_t
		if unix.Fstatat(b.Root, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == unix.ENOENT {
			return openShown(hfd, flags)
		}
	}
	for {
		fd, err := unix.Openat2(b.Root, rel, &how)
		if err != unix.EAGAIN && err != unix.EINTR {
			return fd, err
		}
		// EAGAIN: a rename raced the resolution; retry.
	}
}

// openShown opens, for an open with flags, the host file of hfd that a
// name of Shown stands for: a copy of hfd for O_PATH, else a new
// description (never kbox's controlling terminal).
func openShown(hfd, flags int) (int, error) {
	switch {
	case flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL:
		return -1, unix.EEXIST
	case flags&unix.O_DIRECTORY != 0:
		return -1, unix.ENOTDIR
	case flags&unix.O_PATH != 0:
		return unix.FcntlInt(uintptr(hfd), unix.F_DUPFD_CLOEXEC, 0)
	}
	return unix.Open(ProcFd(hfd), flags&^(unix.O_NOFOLLOW|unix.O_CREAT|unix.O_EXCL|unix.O_TRUNC)|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
}

// Open opens a bind target for the guest; a read-only bind refuses any
// open that could write.
func (b *Bind) Open(rel string, flags int, mode uint32) (int, error) {
	if b.ReadOnly {
		if flags&unix.O_ACCMODE != unix.O_RDONLY || flags&unix.O_TRUNC != 0 {
			return -1, unix.EROFS
		}
		if flags&unix.O_CREAT != 0 {
			fd, err := b.OpenIn(rel, flags&^(unix.O_CREAT|unix.O_EXCL), 0)
			switch {
			case err == unix.ENOENT:
				return -1, unix.EROFS // it would be created
			case err == nil && flags&unix.O_EXCL != 0:
				unix.Close(fd)
				return -1, unix.EEXIST
			}
			return fd, err
		}
	}
	return b.OpenIn(rel, flags, mode)
}

// Parent opens the directory holding rel's last component, confined, and
// returns it with that component. The bind's root itself has no parent in
// the bind: it is a mount point (EBUSY).
func (b *Bind) Parent(rel string) (int, string, error) {
	if rel == "." {
		return -1, "", unix.EBUSY
	}
	// A trailing slash stays on the last component: the host kernel
	// judges it ("b/" for mkdir, ENOTDIR for a file's unlink).
	trimmed := strings.TrimRight(rel, "/")
	dir, base := path.Split(trimmed)
	base += rel[len(trimmed):]
	if dir == "" {
		dir = "."
	}
	fd, err := b.OpenIn(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	return fd, base, err
}

// bindAt runs fn on a confined O_PATH fd of t (the link itself when
// nofollow), with an empty name and AT_EMPTY_PATH, for stat, statx, access
// and readlink.
func bindAt(t Target, nofollow bool, fn func(fd int, name string, empty int) error) error {
	flags := unix.O_PATH
	if nofollow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := t.Bind.OpenIn(t.Rel, flags, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn(fd, "", unix.AT_EMPTY_PATH)
}

// Op runs a one-path modification (an LKL syscall number of dispatch's
// pathOp, with its extra arguments) on rel in the bind. denied says the
// error is a refusal of kbox's (a device node, a call the bind does not
// serve), not the host's answer.
func (b *Bind) Op(rel string, nr uintptr, rest []uintptr) (denied bool, err error) {
	if b.ReadOnly {
		return false, unix.EROFS
	}
	arg := func(i int) uintptr {
		if i < len(rest) {
			return rest[i]
		}
		return 0
	}
	switch nr {
	case lkl.SysMkdirat, lkl.SysMknodat, lkl.SysUnlinkat:
		pfd, base, perr := b.Parent(rel)
		if perr != nil {
			if perr == unix.EBUSY && nr != lkl.SysUnlinkat {
				perr = unix.EEXIST
			}
			return false, perr
		}
		defer unix.Close(pfd)
		switch nr {
		case lkl.SysMkdirat:
			err = unix.Mkdirat(pfd, base, uint32(arg(0)))
		case lkl.SysMknodat:
			// No device nodes: a guest of a kbox running as root
			// could otherwise make one for a host disk and open it.
			if ft := uint32(arg(0)) & unix.S_IFMT; ft == unix.S_IFCHR || ft == unix.S_IFBLK {
				return true, unix.EPERM
			}
			err = unix.Mknodat(pfd, base, uint32(arg(0)), int(arg(1)))
		default:
			err = unix.Unlinkat(pfd, base, int(arg(0)))
		}
	case lkl.SysFchmodat:
		err = withFd(b, rel, false, func(fd int) error { return unix.Chmod(ProcFd(fd), uint32(arg(0))) })
	case lkl.SysFchownat:
		nofollow := int(arg(2))&unix.AT_SYMLINK_NOFOLLOW != 0
		err = withFd(b, rel, nofollow, func(fd int) error {
			return unix.Fchownat(fd, "", int(int32(arg(0))), int(int32(arg(1))), unix.AT_EMPTY_PATH)
		})
	case lkl.SysUtimensat:
		tsp, flags := arg(0), int(arg(1))
		if flags&unix.AT_SYMLINK_NOFOLLOW != 0 {
			// The last component is not followed: act on it from its
			// confined parent.
			pfd, base, perr := b.Parent(rel)
			if perr == unix.EBUSY {
				err = withFd(b, rel, false, func(fd int) error { return utimens(fd, "", tsp, unix.AT_EMPTY_PATH) })
				break
			}
			if perr != nil {
				return false, perr
			}
			err = utimens(pfd, base, tsp, flags)
			unix.Close(pfd)
			break
		}
		err = withFd(b, rel, false, func(fd int) error { return utimens(unix.AT_FDCWD, ProcFd(fd), tsp, 0) })
	case lkl.SysTruncate:
		var fd int
		if fd, err = b.OpenIn(rel, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			err = unix.Ftruncate(fd, int64(arg(0)))
			unix.Close(fd)
		}
	default:
		return true, unix.EACCES
	}
	return false, err
}

// withFd runs fn on a confined O_PATH fd of rel.
func withFd(b *Bind, rel string, nofollow bool, fn func(fd int) error) error {
	flags := unix.O_PATH
	if nofollow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := b.OpenIn(rel, flags, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn(fd)
}

// Two runs rename or link (an LKL syscall number) from rel1 to rel2, both
// in the bind.
func (b *Bind) Two(rel1, rel2 string, nr uintptr, flags uintptr) error {
	if b.ReadOnly {
		return unix.EROFS
	}
	p2, base2, err := b.Parent(rel2)
	if err != nil {
		return err
	}
	defer unix.Close(p2)
	if nr == lkl.SysLinkat && flags&unix.AT_SYMLINK_FOLLOW != 0 {
		err = withFd(b, rel1, false, func(fd int) error {
			return unix.Linkat(unix.AT_FDCWD, ProcFd(fd), p2, base2, unix.AT_SYMLINK_FOLLOW)
		})
	} else {
		p1, base1, perr := b.Parent(rel1)
		if perr != nil {
			return perr
		}
		defer unix.Close(p1)
		if nr == lkl.SysLinkat {
			err = unix.Linkat(p1, base1, p2, base2, int(flags))
		} else {
			err = unix.Renameat2(p1, base1, p2, base2, uint(flags))
		}
	}
	return err
}

// Symlink makes a symlink at rel holding tgt verbatim: a guest path,
// which the engine resolves in the guest's tree.
func (b *Bind) Symlink(rel, tgt string) error {
	if b.ReadOnly {
		return unix.EROFS
	}
	pfd, base, err := b.Parent(rel)
	if err == unix.EBUSY {
		err = unix.EEXIST
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return unix.Symlinkat(tgt, pfd, base)
}

// MountDirents writes into buf the directory entries of the mount points
// of binds that the image lacks and whose parent is dir, skipping the
// first done of them (listed by an earlier call); it returns the bytes
// written and how many entries they hold.
func MountDirents(binds []*Bind, dir string, buf []byte, done int) (int, int, unix.Errno) {
	n, k, count := 0, 0, 0
	for _, b := range binds {
		if !b.Listed || path.Dir(b.Guest) != dir {
			continue
		}
		if k++; k <= done {
			continue
		}
		name := path.Base(b.Guest)
		reclen := (19 + len(name) + 1 + 7) &^ 7
		if n+reclen > len(buf) {
			if n == 0 {
				return 0, 0, unix.EINVAL
			}
			break // the rest goes in the next call
		}
		d := buf[n : n+reclen]
		clear(d)
		binary.NativeEndian.PutUint64(d[0:], b.Ino)
		binary.NativeEndian.PutUint64(d[8:], 1<<63-1)
		binary.NativeEndian.PutUint16(d[16:], uint16(reclen))
		d[18] = unix.DT_DIR
		copy(d[19:], name)
		n += reclen
		count++
	}
	return n, count, 0
}
