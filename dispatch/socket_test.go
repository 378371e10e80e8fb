package dispatch

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// TestReadSockaddr: what each address a guest may pass names, as the
// kernel reads it: only an AF_UNIX address of a sane length names a path
// or an abstract name; everything else goes to the kernel untouched (it
// looks no name up for them).
func TestReadSockaddr(t *testing.T) {
	un := func(path string, extra int) []byte {
		b := make([]byte, 2, 2+len(path)+extra)
		binary.NativeEndian.PutUint16(b, unix.AF_UNIX)
		return append(append(b, path...), make([]byte, extra)...)
	}
	inet := make([]byte, 16)
	binary.NativeEndian.PutUint16(inet, unix.AF_INET)
	for _, c := range []struct {
		name  string
		raw   []byte
		alen  uint64 // 0: len(raw)
		kind  int
		path  string
		errno unix.Errno
	}{
		{"path with its NUL", un("/tmp/s", 1), 0, addrPath, "/tmp/s", 0},
		{"path without a NUL", un("/tmp/s", 0), 0, addrPath, "/tmp/s", 0},
		{"path ends at the first NUL", un("rel\x00junk", 0), 0, addrPath, "rel", 0},
		{"108 bytes, no NUL", un(strings.Repeat("a", 108), 0), 0, addrPath, strings.Repeat("a", 108), 0},
		{"abstract", un("\x00name", 0), 0, addrAbstract, "", 0},
		{"family only: autobind", un("", 0), 0, addrAuto, "", 0},
		{"longer than sockaddr_un", un(strings.Repeat("a", 109), 0), 0, addrOther, "", 0},
		{"another family", inet, 0, addrOther, "", 0},
		{"one byte", []byte{1}, 0, addrOther, "", 0},
		{"beyond sockaddr_storage", un("/x", 0), 129, 0, "", unix.EINVAL},
		{"negative length", un("/x", 0), 0xffffffff, 0, "", unix.EINVAL},
	} {
		g := &memGuest{}
		copy(g.mem[:], c.raw)
		alen := c.alen
		if alen == 0 {
			alen = uint64(len(c.raw))
		}
		r := &Request{G: g}
		a, en := readSockaddr(r, memBase, alen)
		if en != c.errno || (en == 0 && (a.kind != c.kind || a.path != c.path)) {
			t.Errorf("%s: kind %d path %q errno %v, want %d %q %v", c.name, a.kind, a.path, en, c.kind, c.path, c.errno)
		}
	}
	if _, en := readSockaddr(&Request{G: &memGuest{}}, badAt, 16); en != unix.EFAULT {
		t.Errorf("unreadable address: %v, want EFAULT", en)
	}
}

// TestBinderPaths: the binder binds with the guest's own string from the
// guest's working directory (for a relative one), and makes the
// directories the kernel walks through for it, ".." included; without a
// chroot it binds the clean path relative to its directory.
func TestBinderPaths(t *testing.T) {
	for _, c := range []struct {
		chroot       bool
		cwd, p       string
		cd, mk, name string
		errno        unix.Errno
	}{
		{true, "/home/u", "/tmp/app.sock", "/", "/tmp", "/tmp/app.sock", 0},
		{true, "/home/u", "app.sock", "/home/u", "", "app.sock", 0},
		{true, "/home/u", "run/x/app.sock", "/home/u", "/home/u/run/x", "run/x/app.sock", 0},
		{true, "/a/b", "../c/x.sock", "/a/b", "/a/c", "../c/x.sock", 0},
		{true, "/a", "d/../e/./f/x.sock", "/a", "/a/d\x00/a/e/f", "d/../e/./f/x.sock", 0},
		{true, "/", "/x.sock", "/", "", "/x.sock", 0},
		{false, "/home/u", "app.sock", "/", "/home/u", "home/u/app.sock", 0},
		{false, "/a/b", "../../../x.sock", "/", "/", "x.sock", 0},
		{false, "/" + strings.Repeat("d", 120), "x.sock", "", "", "", unix.ENAMETOOLONG},
	} {
		e := New(Options{})
		e.Sockets = unixsock.New(unixsock.TestBinder(c.chroot), true)
		r := &Request{P: &Proc{}}
		r.P.SetCwd(c.cwd)
		cd, mk, name, en := e.binderPaths(r, c.p)
		if en != c.errno || cd != c.cd || mk != c.mk || name != c.name {
			t.Errorf("chroot %v cwd %s %q: %q %q %q %v, want %q %q %q %v", c.chroot, c.cwd, c.p,
				cd, mk, name, en, c.cd, c.mk, c.name, c.errno)
		}
	}
	if _, _, _, en := New(Options{}).binderPaths(&Request{P: &Proc{}}, "/x"); en != unix.EPERM {
		t.Errorf("no binder: %v, want EPERM", en)
	}
}
