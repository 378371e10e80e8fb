package dispatch

import (
	"path"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/policy"
	"golang.org/x/sys/unix"
)

// The policy's view of image paths through LKL, for the engine
// (policyPath) and for callers without one (kbox file, kbox mcp's session
// file tools): paths as LKL resolves them, and the inodes of hidden files
// that have other names.

// resolveImagePath returns the image path p as LKL resolves it: without
// following a last symlink, and following it when p is one ("" when it
// is not); for a path that does not exist, its directory's resolved path
// with its last name. kproc is an LKL fd of the kernel's own proc
// (rootfs.Root.KernelProc); nothing is returned when the path cannot be
// resolved (the call then fails anyway).
func resolveImagePath(kproc int, p string) (out [2]string) {
	fd, err := lkl.Openat(unix.AT_FDCWD, p, lklFlags(unix.O_PATH|unix.O_NOFOLLOW), 0)
	if err != nil {
		dir, base := path.Split(p)
		if base == "" {
			return
		}
		fd, err = lkl.Openat(unix.AT_FDCWD, dir, lklFlags(unix.O_PATH|unix.O_DIRECTORY), 0)
		if err != nil {
			return
		}
		if d := lklFdPathAt(kproc, fd); d != "" {
			out[0] = guestpath.Clean(d, base)
		}
		lkl.Close(fd)
		return
	}
	out[0] = lklFdPathAt(kproc, fd)
	if st, err := lkl.Fstat(fd); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		if fd2, err := lkl.Openat(unix.AT_FDCWD, p, lklFlags(unix.O_PATH), 0); err == nil {
			out[1] = lklFdPathAt(kproc, fd2)
			lkl.Close(fd2)
		}
	}
	lkl.Close(fd)
	return
}

// lklFdPathAt is the path of LKL fd lklfd as the kernel's proc (LKL fd
// kproc) gives it, "" if none.
func lklFdPathAt(kproc, lklfd int) string {
	if kproc < 0 || lklfd < 0 {
		return ""
	}
	buf := make([]byte, PathMax)
	n, le := lklPath(lkl.SysReadlinkat, 1, "self/fd/"+strconv.Itoa(lklfd), [6]uintptr{uintptr(kproc), 0, uptr(buf), uintptr(len(buf))})
	if le != 0 || n == 0 {
		return ""
	}
	return string(buf[:n])
}

type devIno struct{ dev, ino uint64 }

// hiddenScanMax bounds the entries ScanHidden walks beneath hidden
// directories.
const hiddenScanMax = 200000

// ScanHidden finds the regular files under the policy's literal hidden
// patterns that have more than one name (hard links that exist in the
// image) and keeps their inodes: policyPath then hides every name of
// them. Hidden patterns with wildcards are not walked. It returns how
// many inodes it keeps, and whether the walk stopped at hiddenScanMax.
func (e *Engine) ScanHidden() (n int, cut bool) {
	if e.Opt.Policy == nil {
		return 0, false
	}
	return e.Opt.Policy.ScanHidden()
}

// ScanHidden is Engine.ScanHidden for a policy used without an engine
// (ImagePathClass). LKL must be up with the image as its root.
func (c *Policy) ScanHidden() (n int, cut bool) {
	set := map[devIno]string{}
	seen := 0
	var walk func(p, pattern string)
	walk = func(p, pattern string) {
		if seen >= hiddenScanMax {
			cut = true
			return
		}
		seen++
		st, err := lkl.Stat(p, true)
		if err != nil {
			return
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if st.Nlink > 1 {
				set[devIno{st.Dev, st.Ino}] = pattern
			}
		case unix.S_IFDIR:
			names, err := lkl.ReadDir(p)
			if err != nil {
				return
			}
			for _, name := range names {
				if name != "." && name != ".." {
					walk(guestpath.Clean(p, name), pattern)
				}
			}
		}
	}
	lkl.AsRoot(func() {
		for _, h := range c.P.Paths.Hidden {
			if strings.ContainsAny(h, "*?[") {
				continue
			}
			walk(path.Clean(h), h)
		}
	})
	if len(set) > 0 {
		c.hiddenInodes = set
	}
	return len(set), cut
}

// ImagePathClass is the class the policy gives the absolute image path p
// for a caller without an engine or guest (kbox file): the strictest of
// its lexical path, its path as LKL resolves it (with and without
// following a last symlink, through the kernel's proc at LKL fd kproc)
// and, for a name of a hidden file's inode (ScanHidden), hidden. It
// returns the class and the rule that decided it.
func (c *Policy) ImagePathClass(kproc int, p string) (policy.Class, string) {
	p = path.Clean(p)
	class, rule := c.P.Classify(p)
	if class == policy.Hidden {
		return class, rule
	}
	for _, q := range resolveImagePath(kproc, p) {
		if q == "" || q == p {
			continue
		}
		if k, kr := c.P.Classify(q); k > class {
			class, rule = k, kr
		}
	}
	if class != policy.Hidden && len(c.hiddenInodes) > 0 {
		var st lkl.Stat64
		var err error
		lkl.AsRoot(func() { st, err = lkl.Stat(p, false) })
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			if h, ok := c.hiddenInodes[devIno{st.Dev, st.Ino}]; ok {
				class, rule = policy.Hidden, "hidden-inode:"+h
			}
		}
	}
	return class, rule
}
