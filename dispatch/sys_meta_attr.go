// The meta family's changes of a file's attributes: mode, owner, times
// (FamMeta in table.go).

package dispatch

import (
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// sysUtime is utime(path, struct utimbuf *): whole seconds, or now.
func sysUtime(e *Engine, r *Request) Result {
	if r.Args[1] == 0 {
		return e.utimens(r, unix.AT_FDCWD, r.Args[0], nil, 0)
	}
	var buf [2]int64 // actime, modtime
	if err := r.G.Read(r.Args[1], asBytes(&buf)); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	ts := [2]unix.Timespec{{Sec: buf[0]}, {Sec: buf[1]}}
	return e.utimens(r, unix.AT_FDCWD, r.Args[0], &ts, 0)
}

// sysUtimes is utimes(path, struct timeval[2]).
func sysUtimes(e *Engine, r *Request) Result {
	ts, en := timevals(r, r.Args[1])
	if en != 0 {
		return errno(en, LKL)
	}
	return e.utimens(r, unix.AT_FDCWD, r.Args[0], ts, 0)
}

// sysChmod serves chmod(2).
func sysChmod(e *Engine, r *Request) Result {
	return e.pathOp(r, lkl.SysFchmodat, unix.AT_FDCWD, r.Args[0], uintptr(r.Args[1]))
}

// sysFchmod serves fchmod(2).
func sysFchmod(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) {
		return e.onShadowFd(r, lkl.SysFchmod)
	}
	return onLKLFd(r, lkl.SysFchmod)
}

// sysChown serves chown(2).
func sysChown(e *Engine, r *Request) Result {
	return e.pathOp(r, lkl.SysFchownat, unix.AT_FDCWD, r.Args[0], uintptr(r.Args[1]), uintptr(r.Args[2]), 0)
}

// sysFchown serves fchown(2).
func sysFchown(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) {
		return e.onShadowFd(r, lkl.SysFchown)
	}
	return onLKLFd(r, lkl.SysFchown)
}

// sysLchown serves lchown(2).
func sysLchown(e *Engine, r *Request) Result {
	return e.pathOp(r, lkl.SysFchownat, unix.AT_FDCWD, r.Args[0], uintptr(r.Args[1]), uintptr(r.Args[2]), unix.AT_SYMLINK_NOFOLLOW)
}

// sysFchownat serves fchownat(2).
func sysFchownat(e *Engine, r *Request) Result {
	if r.Args[4]&unix.AT_EMPTY_PATH != 0 {
		if p, en := readPath(r, r.Args[1]); en == 0 && p == "" {
			return e.emptyPathOp(r, lkl.SysFchownat, int32(r.Args[0]), 0, uintptr(r.Args[2]), uintptr(r.Args[3]), uintptr(r.Args[4]))
		}
	}
	return e.pathOp(r, lkl.SysFchownat, int32(r.Args[0]), r.Args[1], uintptr(r.Args[2]), uintptr(r.Args[3]), uintptr(r.Args[4]))
}

// sysFutimesat serves futimesat(2).
func sysFutimesat(e *Engine, r *Request) Result {
	ts, en := timevals(r, r.Args[2])
	if en != 0 {
		return errno(en, LKL)
	}
	return e.utimens(r, int32(r.Args[0]), r.Args[1], ts, 0)
}

// sysFchmodat serves fchmodat(2).
func sysFchmodat(e *Engine, r *Request) Result {
	return e.pathOp(r, lkl.SysFchmodat, int32(r.Args[0]), r.Args[1], uintptr(r.Args[2]))
}

// sysUtimensat serves utimensat(2).
func sysUtimensat(e *Engine, r *Request) Result {
	var ts [2]unix.Timespec
	if r.Args[2] == 0 {
		return e.utimens(r, int32(r.Args[0]), r.Args[1], nil, uintptr(r.Args[3]))
	}
	if err := r.G.Read(r.Args[2], asBytes(&ts)); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	return e.utimens(r, int32(r.Args[0]), r.Args[1], &ts, uintptr(r.Args[3]))
}

// sysFchmodat2 serves fchmodat2(2), fchmodat with flags.
func sysFchmodat2(e *Engine, r *Request) Result {
	// AT_SYMLINK_NOFOLLOW (a symlink's mode cannot be changed on Linux:
	// EOPNOTSUPP) and AT_EMPTY_PATH (the fd's file). This LKL predates
	// fchmodat2.
	flags := r.Args[3]
	if flags&^uint64(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH) != 0 {
		return errno(unix.EINVAL, Emulated)
	}
	if flags&unix.AT_EMPTY_PATH != 0 {
		if p, en := readPath(r, r.Args[1]); en == 0 && p == "" {
			return e.emptyPathOp(r, lkl.SysFchmodat, int32(r.Args[0]), 0, uintptr(r.Args[2]))
		}
	}
	if flags&unix.AT_SYMLINK_NOFOLLOW != 0 {
		t, en := e.target(r, int32(r.Args[0]), r.Args[1])
		if en != 0 {
			return errno(en, LKL)
		}
		var st lkl.Stat64
		if !t.Host && lklStatUncached(t.LKLPath(), true, &st) == 0 && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return errno(unix.EOPNOTSUPP, Emulated)
		}
	}
	return e.pathOp(r, lkl.SysFchmodat, int32(r.Args[0]), r.Args[1], uintptr(r.Args[2]))
}
