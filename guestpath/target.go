package guestpath

import (
	"path"
	"strings"

	"github.com/kbox-project/kbox/procfs"
)

// Target is a resolved path: in the image (LKL) or on a host route.
type Target struct {
	Host bool
	// Path is the normalized absolute guest path.
	Path string
	// Route and Rel locate a host target: the route prefix and the path
	// beneath it.
	Route, Rel string
	// Bind is the bind holding a host target, nil on a system route.
	Bind *Bind
	// Proc is a /proc path that kbox answers itself (package procfs,
	// dispatch/procserve.go). Host is
	// set and Route empty, so that a handler that does not serve nodes
	// reaches nothing.
	Proc *procfs.Node
	// Tail is "/" or "/." when the guest's path ended so: Path is clean,
	// LKLPath puts it back, so that LKL judges it as Linux does ("file/"
	// is ENOTDIR, open("new/", O_CREAT) EISDIR, mkdir("a/b/") works). A
	// host target has it at the end of Rel instead.
	Tail string
	// Fd, when above 0, says that Path is /dev/fd/N (N = Fd-1), or
	// /dev/stdin, stdout or stderr (N = 0, 1, 2), with kbox's /dev: the
	// caller's own fd N when the link is followed (dispatch/sys_file_dev.go).
	// FdDir says Path is /dev/fd, the link to /proc/self/fd.
	Fd    int
	FdDir bool
}

// LKLPath is the path to give LKL: Path with the guest's trailing slash.
func (t *Target) LKLPath() string {
	if t.Tail == "" {
		return t.Path
	}
	return t.Path + t.Tail
}

// DirTail returns the trailing "/" or "/." of a guest path, if any: "/."
// when its last component is "." ("d/." and "d/./" both name "." in d,
// which must be there), else "/" when it ends in slashes.
func DirTail(p string) string {
	q := strings.TrimRight(p, "/")
	switch {
	case strings.HasSuffix(q, "/."):
		return "/."
	case len(q) < len(p):
		return "/"
	}
	return ""
}

// KeepTail keeps on t the trailing "/" or "/." (DirTail) of the guest
// path that led to it, where the call that resolved it must still judge
// it: kbox's /proc files, image paths but the root, and host files
// beneath a route's or bind's root (there the host kernel judges it).
func (t *Target) KeepTail(tail string) {
	switch {
	case tail == "":
	case t.Proc != nil:
		t.Tail = tail
	case !t.Host && t.Path != "/":
		t.Tail = tail
	case t.Host && t.Rel != ".":
		t.Rel += tail
	}
}

// Plain reports a target in the image and nothing else: no bind, host
// route, kbox file or /dev/fd link.
func (t *Target) Plain() bool {
	return !t.Host && t.Route == "" && t.Bind == nil && t.Proc == nil && t.Fd == 0 && !t.FdDir
}

// Clean normalizes a guest path lexically: absolute, no . or .., no double
// slashes; .. at the root stays at the root, so no lexical path leaves the
// image. (Symlinks inside the image are resolved by LKL under its chroot.)
func Clean(cwd, p string) string {
	if IsClean(p) {
		return p // the common case, without allocating
	}
	if p != "" && p[0] != '/' && cleanParts(p, 0) && IsClean(cwd) {
		// A clean relative path (a name in the cwd, git's lstats): one
		// concatenation, where path.Clean would build it twice more.
		if cwd == "/" {
			return "/" + p
		}
		return cwd + "/" + p
	}
	if !strings.HasPrefix(p, "/") {
		p = cwd + "/" + p
	}
	return path.Clean("/" + p)
}

// IsClean reports whether p is already what Clean would return: absolute,
// with no empty, "." or ".." component and no trailing slash.
func IsClean(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	if len(p) == 1 {
		return true
	}
	return cleanParts(p, 1)
}

// cleanParts reports whether p[start:] is names separated by single
// slashes, none of them "." or "..", with no slash at the end.
func cleanParts(p string, start int) bool {
	for i := start; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		switch p[start:i] {
		case "", ".", "..":
			return false
		}
		start = i + 1
	}
	return true
}

// LastDotDot returns the end of the last ".." component of guest path p
// (the index just past it), or -1 when p has none: the part of p that
// must be walked, links followed, before ".." can be taken (Linux goes up
// from the directory a path has reached, not from the name written).
func LastDotDot(p string) int {
	end := -1
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		if i-start == 2 && p[start] == '.' && p[start+1] == '.' {
			end = i
		}
		start = i + 1
	}
	return end
}
