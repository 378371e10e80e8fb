package dispatch

import (
	"strings"

	"github.com/kbox-project/kbox/guestpath"
	"golang.org/x/sys/unix"
)

// Paths whose last component is "." or "..": kbox hands LKL and the host
// resolved paths, where "d/." is "d", so the calls that refuse such a
// last component (rmdir, rename) answer for it here, as Linux does once
// the rest of the path resolves.

// rmdirDots gives what Linux gives for a directory removal whose last
// component is "." (EINVAL) or ".." (ENOTEMPTY), once the rest of the path
// resolves: kbox hands LKL a resolved path, where "dir/." would be "dir".
func (e *Engine) rmdirDots(r *Request, dirfd int32, addr uint64) (Result, bool) {
	p, en := readPath(r, addr)
	if en != 0 {
		return errno(en, LKL), true
	}
	dots := lastDots(p)
	if dots == 0 {
		return Result{}, false
	}
	t, res, okk := e.modTarget(r, dirfd, addr)
	if !okk {
		return res, true
	}
	if en := e.dotsDir(r, t); en != 0 {
		return errno(en, Emulated), true
	}
	if dots == 1 {
		return errno(unix.EINVAL, Emulated), true
	}
	return errno(unix.ENOTEMPTY, Emulated), true
}

// lastDots is 1 when the last component of path p is ".", 2 when it is
// "..", else 0 (trailing slashes do not count).
func lastDots(p string) int {
	for len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	switch p {
	case ".":
		return 1
	case "..":
		return 2
	}
	return 0
}

// renameDots gives what Linux gives for a rename whose old or new path
// ends in "." or "..": once the directories they name resolve (dotsDir),
// EBUSY (EEXIST for a new one with RENAME_NOREPLACE). LKL gets resolved
// paths, where "d/." is "d".
func (e *Engine) renameDots(r *Request, t1, t2 guestpath.Target, a1, a2 uint64, flags uintptr) unix.Errno {
	p, en := readPath(r, a1)
	if en != 0 {
		return en
	}
	q, en := readPath(r, a2)
	if en != 0 {
		return en
	}
	d1, d2 := lastDots(p) != 0, lastDots(q) != 0
	if d1 {
		if en := e.dotsDir(r, t1); en != 0 {
			return en
		}
	}
	if d2 {
		if en := e.dotsDir(r, t2); en != 0 {
			return en
		}
	}
	switch {
	case d1:
		return unix.EBUSY
	case d2 && flags&unix.RENAME_NOREPLACE != 0:
		return unix.EEXIST
	case d2:
		return unix.EBUSY
	}
	return 0
}

// dotsDir is what the lookup of a path whose last component is "." or
// ".." gives before that component counts: the directory t the path names
// must be there (ENOENT) and be one (ENOTDIR).
func (e *Engine) dotsDir(r *Request, t guestpath.Target) unix.Errno {
	var st unix.Stat_t
	if en := e.statTarget(r, t, false, &st); en != 0 {
		return en
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.ENOTDIR
	}
	return 0
}
