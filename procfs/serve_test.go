package procfs

import (
	"testing"

	"golang.org/x/sys/unix"
)

// PlanOpen: how an open of each kind of node is served, and the errnos
// Linux gives for the opens /proc refuses.
func TestPlanOpen(t *testing.T) {
	lkl := &Node{Kind: LKL, LKL: "sys/kernel/hostname", Write: true}
	ro := &Node{Kind: LKL, LKL: "sys/kernel/osrelease"}
	text := &Node{Kind: Text}
	store := &Node{Kind: Text, Store: func(Creds, []byte) (int, unix.Errno) { return 0, 0 }}
	dir := &Node{Kind: Dir}
	obj := &Node{Kind: Obj, Fd: &FdRef{LKLFd: -1}}
	for _, c := range []struct {
		n      *Node
		flags  int
		admin  bool
		op     OpenOp
		en     unix.Errno
		denied bool
	}{
		{lkl, unix.O_RDONLY, false, OpLKL, 0, false},
		{lkl, unix.O_WRONLY, true, OpLKL, 0, false},
		{lkl, unix.O_WRONLY, false, 0, unix.EACCES, true},
		{ro, unix.O_RDWR, true, 0, unix.EACCES, true},
		{ro, unix.O_RDONLY | unix.O_TRUNC, true, 0, unix.EACCES, true},
		{lkl, unix.O_CREAT | unix.O_EXCL, true, 0, unix.EEXIST, false},
		{dir, unix.O_RDONLY | unix.O_DIRECTORY, false, OpList, 0, false},
		{dir, unix.O_WRONLY, false, 0, unix.EISDIR, false},
		{dir, unix.O_RDONLY | unix.O_CREAT, false, 0, unix.EISDIR, false},
		{text, unix.O_RDONLY, false, OpText, 0, false},
		{text, unix.O_RDONLY | unix.O_DIRECTORY, false, 0, unix.ENOTDIR, false},
		{text, unix.O_WRONLY, false, 0, unix.EACCES, false},
		{store, unix.O_WRONLY, false, OpVar, 0, false},
		{store, unix.O_RDONLY | unix.O_TRUNC, false, OpVar, 0, false},
		{store, unix.O_RDONLY, false, OpText, 0, false},
		{obj, unix.O_RDWR, false, OpReopen, 0, false},
		{&Node{Kind: Link}, unix.O_RDONLY, false, 0, unix.ENOENT, false},
	} {
		asked := false
		op, en, denied := PlanOpen(c.n, c.flags, func() bool { asked = true; return c.admin })
		if op != c.op || en != c.en || denied != c.denied {
			t.Errorf("%v %#o: %v %v %v, want %v %v %v", c.n.Kind, c.flags, op, en, denied, c.op, c.en, c.denied)
		}
		if asked && (c.n.Kind != LKL || !c.n.Write) {
			t.Errorf("%v %#o: CAP_SYS_ADMIN asked", c.n.Kind, c.flags)
		}
	}
}

// Access of the nodes kbox makes: directories and texts are readable,
// never executable; a writable file is writable by whom its owner's
// mode 0644 lets.
func TestAccessNodes(t *testing.T) {
	owner := &fakeProc{ids: Creds{EUID: 1000, EGID: 1000}}
	store := &Node{Kind: Text, Owner: owner, Store: func(Creds, []byte) (int, unix.Errno) { return 0, 0 }}
	mayAs := func(uid uint32) MayWrite {
		return func(u, g, mode uint32) bool { return u == uid && mode&0o200 != 0 }
	}
	for _, c := range []struct {
		n    *Node
		mode int
		uid  uint32
		want unix.Errno
	}{
		{&Node{Kind: Dir}, unix.R_OK | unix.X_OK, 0, 0},
		{&Node{Kind: Dir}, unix.W_OK, 0, unix.EACCES},
		{&Node{Kind: Text}, unix.R_OK, 0, 0},
		{&Node{Kind: Text}, unix.W_OK, 0, unix.EACCES},
		{&Node{Kind: Text}, unix.X_OK, 0, unix.EACCES},
		{store, unix.W_OK, 1000, 0},
		{store, unix.W_OK, 1001, unix.EACCES},
		{store, unix.R_OK, 1001, 0},
		{store, unix.X_OK, 1000, unix.EACCES},
	} {
		if got := Access(Config{}, c.n, c.mode, mayAs(c.uid), func() bool { return false }); got != c.want {
			t.Errorf("%v mode %o uid %d: %v, want %v", c.n.Kind, c.mode, c.uid, got, c.want)
		}
	}
}
