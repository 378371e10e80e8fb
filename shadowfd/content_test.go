package shadowfd

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Content files in a store directory have names: a node reopens its
// content by name, each time a new description (its own offset and status
// flags), and the name goes with the node. A memfd has no name and
// reopens through /proc/self/fd.
func TestContentNames(t *testing.T) {
	dir, err := unix.Open(t.TempDir(), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fs := range []*fsState{{names: dir}, {names: -1}} {
		n := &Node{fs: fs}
		if n.content, err = fs.create("/etc/x", &n.cname); err != nil {
			t.Fatal(err)
		}
		if named := n.cname[0] != 0; named != (fs.names >= 0) {
			t.Fatalf("dir %d: named %v", fs.names, named)
		}
		if _, err := unix.Pwrite(n.content, []byte("hello"), 0); err != nil {
			t.Fatal(err)
		}
		a, err := n.reopen(unix.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		b, err := n.reopen(unix.O_RDONLY | unix.O_NONBLOCK)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		if k, _ := unix.Read(a, buf[:2]); string(buf[:k]) != "he" {
			t.Errorf("dir %d: first read %q", fs.names, buf[:k])
		}
		if k, _ := unix.Read(b, buf); string(buf[:k]) != "hello" {
			t.Errorf("dir %d: the second description read %q: not its own offset", fs.names, buf[:k])
		}
		fa, _ := unix.FcntlInt(uintptr(a), unix.F_GETFL, 0)
		fb, _ := unix.FcntlInt(uintptr(b), unix.F_GETFL, 0)
		if fa&unix.O_NONBLOCK != 0 || fb&unix.O_NONBLOCK == 0 {
			t.Errorf("dir %d: status flags %#x, %#x", fs.names, fa, fb)
		}
		if fd, _ := unix.FcntlInt(uintptr(a), unix.F_GETFD, 0); fd&unix.FD_CLOEXEC == 0 {
			t.Errorf("dir %d: kbox's copy is not close-on-exec", fs.names)
		}
		unix.Close(a)
		unix.Close(b)
		var name string
		if fs.names >= 0 {
			name = unix.ByteSliceToString(n.cname[:])
		}
		fs.unlink(&n.cname)
		if fs.names >= 0 {
			var st unix.Stat_t
			if err := unix.Fstatat(fs.names, name, &st, 0); err != unix.ENOENT {
				t.Errorf("content file %s after unlink: %v", name, err)
			}
		}
		unix.Close(n.content)
	}
	unix.Close(dir)
}
