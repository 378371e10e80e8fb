package dispatch

import (
	"strings"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/procfs"
	"golang.org/x/sys/unix"
)

// O_PATH fds of kbox's /proc links. Linux opens a symbolic link itself
// for open(O_PATH|O_NOFOLLOW): the fd stats as the link, readlinkat(fd,
// "") reads it, and its own /proc/PID/fd link leads to the link, which
// open refuses (ELOOP) and mount too (ENOENT). kbox's links (fd/N, cwd,
// exe, root, ns/*, self, ...) are nodes (procfs.Link) with no file of
// their own, so the guest's fd is a virtual host file (procLinkFile) that
// holds an O_PATH fd of the host's link the node stands for (the one
// whose lstat procStat reports) and the guest path of the link, which
// readlinkat reads through the node again.

// procLinkFile marks a virtual fd that is an O_PATH fd of a /proc link
// (fdtable.File.Node); the File's Path is the link's guest path.
type procLinkFile struct{}

// openProcLink serves open(O_PATH|O_NOFOLLOW) of t, a link node.
func (e *Engine) openProcLink(r *Request, t guestpath.Target, flags int) Result {
	root, err := guestpath.RouteRoot("/proc")
	if err != nil {
		return fail(err, Emulated)
	}
	like := t.Proc.Like
	hfd, err := unix.Openat(root, like, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil && strings.Contains(like, "/") {
		// A link of a virtual fd has no host counterpart: the
		// process's exe link stands for it, as in procStat.
		hfd, err = unix.Openat(root, strings.TrimSuffix(procBase(like), "/")+"/exe", unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return errno(unix.ENOENT, Emulated)
	}
	gfd, err := r.P.FDs.OpenNode(hfd, procLinkFile{}, t.Path, flags&^unix.O_CLOEXEC, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, Emulated)
	}
	return ok(int64(gfd), Emulated)
}

// procLinkPath returns the guest path of the /proc link that virtual fd
// fd is an O_PATH fd of, if it is one.
func procLinkPath(r *Request, fd int) (string, bool) {
	ent, found := r.P.FDs.Get(fd)
	if !found {
		return "", false
	}
	if _, is := ent.File.Node.(procLinkFile); !is {
		return "", false
	}
	return ent.File.Path, true
}

// procLinkRef is the fd link of an O_PATH fd of a /proc link: it reads as
// the link's path and leads to the link (kbox's host O_PATH fd of its
// stand-in, hfd).
func procLinkRef(p string, hfd int) *procfs.FdRef {
	return &procfs.FdRef{Text: p, LKLFd: -1, Host: guestpath.ProcFd(hfd), Acc: unix.O_RDONLY, Symlink: true}
}

// readProcLink reads the /proc link at guest path p now, for
// readlinkat(fd, "") of an O_PATH fd of it.
func (e *Engine) readProcLink(r *Request, p string) (string, unix.Errno) {
	t, en := e.classify(r, p)
	if en != 0 {
		return "", en
	}
	if t.Proc == nil {
		return "", unix.ENOENT
	}
	return e.procReadlink(r, t)
}

// readlinkOut answers readlinkat(fd, "") of an O_PATH fd of the /proc
// link at p: its text now, truncated to size bytes, at buf.
func (e *Engine) readlinkOut(r *Request, p string, buf, size uint64) Result {
	l, en := e.readProcLink(r, p)
	if en != 0 {
		return errno(en, Emulated)
	}
	out := []byte(l)[:min(uint64(len(l)), size, PathMax)]
	if err := r.G.Write(buf, out); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	return ok(int64(len(out)), Emulated)
}
