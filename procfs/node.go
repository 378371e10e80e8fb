package procfs

import (
	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

// Kind is what a Node is.
type Kind uint8

const (
	LKL  Kind = iota + 1 // a file or directory of LKL's proc
	Text                 // a file whose text kbox makes
	Dir                  // a directory whose entries kbox makes
	Link                 // a symbolic link kbox answers
	Obj                  // what an fd link names, followed
)

// Node is a /proc path that kbox answers itself.
type Node struct {
	Kind Kind
	// LKL is an LKL node's path beneath LKL's proc; Write says the guest
	// may open it for writing (the UTS names, with CAP_SYS_ADMIN).
	LKL   string
	Write bool
	// Text makes a Text file's content, List a Dir's entries.
	Text func() []byte
	List func() []fdtable.Dirent
	// Like is the path beneath the host's /proc whose (l)stat a Text,
	// Dir or Link node reports, with Mode's permission bits when Mode is
	// set.
	Like string
	Mode uint32
	// Link is a Link's text; following it leads to the guest path To,
	// or, for an fd link, to what Fd names.
	Link string
	To   string
	Fd   *FdRef
	// Stat, when set, stats the node instead of Like (a file kbox makes
	// outside /proc, like /etc/resolv.conf, is a Text node too).
	Stat func(st *unix.Stat_t) unix.Errno
	// Store, when set, makes a Text file writable: it serves a write's
	// bytes with the writer's credentials. Owner is the process the file
	// belongs to, whose effective ids the permission check takes.
	Store func(w Creds, b []byte) (int, unix.Errno)
	Owner Process
}

// IsDir reports whether n is a directory kbox lists.
func (n *Node) IsDir() bool { return n.Kind == Dir }

// FdRef is a guest fd as its /proc/PID/fd link shows it and as following
// the link reaches it. The engine makes it (System.FdRef).
type FdRef struct {
	// Text is the link's text.
	Text string
	// Path is the guest path that following leads to; "" when what the
	// fd is is reopened instead.
	Path string
	Dir  bool // the fd is a directory (a path through the link goes on there)
	// LKLFd, when >= 0, is an LKL file of the fd's inode (a virtual
	// fd's, or Node's: a shadow's), reopened through LKL's /proc/self/fd.
	LKLFd int
	Node  *shadowfd.Node
	// Host is the host's /proc link of the fd (the guest's own, or of
	// kbox's copy of it), "" for a virtual fd.
	Host    string
	Outside bool // a host file outside binds and routes
	Made    bool // a text kbox made for /proc
	// Symlink says the fd is an O_PATH fd of a /proc link itself (opened
	// O_PATH|O_NOFOLLOW): following its link reaches that link, which
	// is no file to open (ELOOP) or mount on (ENOENT).
	Symlink bool
	Acc     int // the fd's access mode
}

// Found is what Classify makes of a path: a Node, a path beneath the
// host's /proc (Rel), or, when a link is followed on the way, a guest path
// to resolve again (Redirect).
type Found struct {
	// Path is the guest path classified; for a Redirect, the path a
	// link leads to, Sub the rest of the path beneath it.
	Path string
	Sub  string
	Node *Node
	Rel  string
	// Redirect says Path/Sub is a guest path outside this package's say
	// (the image, a bind, /proc again), to resolve with Depth links
	// followed.
	Redirect bool
	Depth    int
}

func node(abs string, n *Node) (Found, unix.Errno) { return Found{Path: abs, Node: n}, 0 }

func host(abs, rel string) (Found, unix.Errno) { return Found{Path: abs, Rel: rel}, 0 }

func redirect(p, sub string, depth int) (Found, unix.Errno) {
	return Found{Path: p, Sub: sub, Redirect: true, Depth: depth}, 0
}

// IsPidName reports a decimal pid as /proc names it: digits, no leading 0.
func IsPidName(s string) bool {
	if s == "" || len(s) > 10 || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isFdName reports an fd number as /proc names it.
func isFdName(s string) bool { return s == "0" || IsPidName(s) }

// dots are the first entries of every listing.
func dots() []fdtable.Dirent {
	return []fdtable.Dirent{{Ino: 1, Type: unix.DT_DIR, Name: "."}, {Ino: 1, Type: unix.DT_DIR, Name: ".."}}
}
