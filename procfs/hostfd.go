package procfs

import (
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/hostdev"
	"golang.org/x/sys/unix"
)

// The host-side work of serving /proc: the memfds that hold kbox's texts,
// and the host's /proc entries a node stands for.

// selfFd is the host's /proc link of kbox's fd.
func selfFd(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// TextFd makes a read-only host fd holding b, for an open with flags
// (O_NONBLOCK and O_PATH are kept) of guest path p: a sealed memfd
// (named after p, so that its fd link reads back as p, FdRefOfHost)
// opened again read-only, so that the guest's reads are native.
func TextFd(p string, b []byte, flags int) (int, error) {
	name := "kbox:" + p
	if len(name) > 240 {
		name = name[:240]
	}
	mfd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, err
	}
	defer unix.Close(mfd)
	for off := 0; off < len(b); {
		n, err := unix.Pwrite(mfd, b[off:], int64(off))
		if err != nil {
			return -1, err
		}
		off += n
	}
	unix.FcntlInt(uintptr(mfd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	rflags := unix.O_RDONLY | unix.O_CLOEXEC | flags&(unix.O_NONBLOCK|unix.O_PATH)
	return unix.Open(selfFd(mfd), rflags, 0)
}

// HostStat is fstatat of rel beneath the host's /proc (System.HostProc).
func HostStat(s System, rel string, nofollow bool, st *unix.Stat_t) error {
	root, err := s.HostProc()
	if err != nil {
		return err
	}
	flags := 0
	if nofollow {
		flags = unix.AT_SYMLINK_NOFOLLOW
	}
	return unix.Fstatat(root, rel, st, flags)
}

// Base returns the process part ("PID/" or "PID/task/TID/") of a path
// beneath the host's /proc.
func Base(rel string) string {
	pid, rest, _ := strings.Cut(rel, "/")
	if t, rest2, ok := strings.Cut(rest, "/"); ok && t == "task" {
		tid, _, _ := strings.Cut(rest2, "/")
		return pid + "/task/" + tid + "/"
	}
	return pid + "/"
}

// StatNode stats node n at guest path p, which is neither an LKL node
// nor an Obj (the engine stats those): what n.Stat says, else the host's
// entry n stands for (n.Like; a link is not followed) with the node's
// type, mode and, for /proc itself, a link count of the guest's.
func StatNode(s System, p string, n *Node, st *unix.Stat_t) unix.Errno {
	if n.Stat != nil {
		return n.Stat(st)
	}
	if err := HostStat(s, n.Like, n.Kind == Link, st); err != nil {
		// A link of a virtual fd has no host counterpart: the
		// process's exe link stands for it.
		if n.Kind != Link || HostStat(s, strings.TrimSuffix(Base(n.Like), "/")+"/exe", true, st) != nil {
			return unix.ENOENT
		}
	}
	hostdev.Stat(st)
	if uid, gid, ok := TaskOwner(s, n.Like); ok {
		st.Uid, st.Gid = uid, gid
	}
	switch n.Kind {
	case Text:
		st.Mode = unix.S_IFREG | 0o444
		if n.Store != nil {
			st.Mode |= 0o200
		}
		st.Size, st.Blocks = 0, 0
	case Dir:
		if p == "/proc" {
			st.Nlink = 2 // and a link per process directory, not the host's count
			for range GuestTgids(s) {
				st.Nlink++
			}
		}
	case Link:
		if n.Mode != 0 {
			st.Mode = unix.S_IFLNK | n.Mode
		}
	}
	return 0
}

// TaskOwner is the owner of rel beneath the host's /proc when it lies in
// a task's directory ("PID/..."; ok false else): the process's effective
// ids, as Linux gives a process's entries (a process the engine does not
// know yet has the first process's). The host's would be kbox's ids,
// whatever the guest's.
func TaskOwner(s System, rel string) (uid, gid uint32, ok bool) {
	pidName, _, _ := strings.Cut(rel, "/")
	if !IsPidName(pidName) {
		return 0, 0, false
	}
	pid, _ := strconv.Atoi(pidName)
	ids := taskCreds(s, &Caller{}, pid)
	return ids.EUID, ids.EGID, true
}

// taskCreds are the credentials of guest task pid, as c sees it: its
// process's, or the first process's for one the engine does not know yet.
func taskCreds(s System, c *Caller, pid int) Creds {
	if p := s.Process(s.TgidOf(c, pid), false); p != nil {
		return p.IDs()
	}
	return s.InitCreds()
}

// LinkStandIn opens an O_PATH fd of the host's link that Link node n
// stands for (the one whose lstat StatNode reports), for an O_PATH fd of
// the link itself.
func LinkStandIn(s System, n *Node) (int, error) {
	root, err := s.HostProc()
	if err != nil {
		return -1, err
	}
	hfd, err := unix.Openat(root, n.Like, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil && strings.Contains(n.Like, "/") {
		// A link of a virtual fd has no host counterpart: the
		// process's exe link stands for it, as in StatNode.
		hfd, err = unix.Openat(root, strings.TrimSuffix(Base(n.Like), "/")+"/exe", unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	return hfd, err
}

// MayWrite is the caller's permission check for writing a file of owner
// uid, group gid and permission bits mode (the engine's, which knows the
// caller's groups and capabilities).
type MayWrite func(uid, gid, mode uint32) bool

// WriteCheck is the permission check of an open for writing of a host
// file of a guest process (rel beneath the host's /proc, "PID/..."): the
// file is the target process's (its effective ids) with the host file's
// mode, as Linux makes a /proc/PID file, checked with the caller's
// credentials (the host would check kbox's).
func WriteCheck(s System, c *Caller, rel string, may MayWrite) unix.Errno {
	pidName, _, _ := strings.Cut(rel, "/")
	pid, err := strconv.Atoi(pidName)
	if err != nil || !IsPidName(pidName) {
		return 0
	}
	var st unix.Stat_t
	if HostStat(s, rel, false, &st) != nil {
		return 0 // the open reports it
	}
	t := taskCreds(s, c, pid)
	if !may(t.EUID, t.EGID, st.Mode&0o777) {
		return unix.EACCES
	}
	return 0
}

// MayStore is the permission check of an open for writing of a
// writable file (Node.Store): its owner's file, mode 0644, with the
// process's effective ids.
func MayStore(n *Node, may MayWrite) bool {
	if n.Owner == nil {
		return true
	}
	o := n.Owner.IDs()
	return may(o.EUID, o.EGID, 0o644)
}

// OpenOp is how the engine serves an open of a node (links followed).
type OpenOp uint8

const (
	OpLKL    OpenOp = iota + 1 // open n.LKL beneath LKL's proc
	OpList                     // a listing of n.List
	OpText                     // a sealed memfd of n.Text() (TextFd)
	OpVar                      // a writable file (NewVar), MayStore checked
	OpReopen                   // what n.Fd is, again
)

// PlanOpen decides an open with flags of node n (not a Link): how to
// serve it, or the errno (denied says the guest was refused what is not
// its to change). admin reports the caller's CAP_SYS_ADMIN, asked only
// for a write of a writable LKL node.
func PlanOpen(n *Node, flags int, admin func() bool) (op OpenOp, en unix.Errno, denied bool) {
	writes := flags&unix.O_ACCMODE != unix.O_RDONLY || flags&unix.O_TRUNC != 0
	if flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL {
		return 0, unix.EEXIST, false
	}
	switch n.Kind {
	case LKL:
		if writes && (!n.Write || !admin()) {
			return 0, unix.EACCES, true // LKL's sysctls are not the guest's to change
		}
		return OpLKL, 0, false
	case Dir:
		if writes || flags&unix.O_CREAT != 0 {
			return 0, unix.EISDIR, false
		}
		return OpList, 0, false
	case Text:
		switch {
		case flags&unix.O_DIRECTORY != 0:
			return 0, unix.ENOTDIR, false
		case writes && n.Store != nil:
			return OpVar, 0, false
		case writes:
			return 0, unix.EACCES, false
		}
		return OpText, 0, false
	case Obj:
		return OpReopen, 0, false
	}
	return 0, unix.ENOENT, false
}
