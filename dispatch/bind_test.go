package dispatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbox-project/kbox/guestpath"
	"golang.org/x/sys/unix"
)

func TestBindPaths(t *testing.T) {
	e := New(Options{Binds: []*guestpath.Bind{{Host: "/srv/h", Guest: "/mnt/data"}, {Host: "/", Guest: "/host", ReadOnly: true}}})
	if !e.anyRO {
		t.Error("anyRO not set")
	}
	for _, c := range []struct{ p, rel string }{{"/mnt/data", "."}, {"/mnt/data/a/b", "a/b"}, {"/host/etc", "etc"}} {
		b := e.bindOf(c.p)
		if b == nil {
			t.Fatalf("%s: no bind", c.p)
		}
		if tg := b.Target(c.p); !tg.Host || tg.Rel != c.rel || tg.Bind != b {
			t.Errorf("%s: %+v", c.p, tg)
		}
	}
	for _, p := range []string{"/mnt/database", "/mnt", "/hostile"} {
		if e.bindOf(p) != nil {
			t.Errorf("%s is not in a bind", p)
		}
	}
	for _, c := range []struct{ host, guest string }{{"/srv/h", "/mnt/data"}, {"/srv/h/x", "/mnt/data/x"}, {"/etc/x", "/host/etc/x"}} {
		if g, ok := e.bindGuestPath(c.host); !ok || g != c.guest {
			t.Errorf("bindGuestPath(%s) = %s, %v; want %s", c.host, g, ok, c.guest)
		}
	}
}

// TestLoadBindFile: a bind's program is read through its confined fd; a
// file without an execute bit, a directory and a FIFO are refused (without
// opening the FIFO, which would block); an absolute link names a guest
// path (a link to a host path outside the bind names one in the image,
// which needs LKL: tests/bind_test.go's TestBindExec).
func TestLoadBindFile(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "h")
	for _, d := range []string{"h/sub"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for n, mode := range map[string]os.FileMode{"h/prog": 0o755, "h/plain": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("content of "+n), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(h, "fifo"), 0o755); err != nil {
		t.Fatal(err)
	}
	for n, target := range map[string]string{"h/in": "sub/../prog", "h/abs": "/t/prog", "h/proc": "/proc/self/exe"} {
		if err := os.Symlink(target, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := guestpath.OpenBind(h, "/t", true)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(b.Root)
	if fd, err := b.OpenIn(".", unix.O_PATH, 0); err == unix.ENOSYS {
		t.Skip("SKIP: no openat2 (qemu-user)")
	} else if err == nil {
		unix.Close(fd)
	}
	e := New(Options{Binds: []*guestpath.Bind{b}, HostRoutes: []string{"/proc"}})
	for _, c := range []struct {
		path string
		want unix.Errno
	}{
		{"/t/prog", 0}, {"/t/in", 0}, {"/t/abs", 0},
		{"/t/plain", unix.EACCES}, {"/t/sub", unix.EACCES}, {"/t/fifo", unix.EACCES},
		{"/t/none", unix.ENOENT}, {"/proc/self/exe", unix.EACCES}, {"/t/proc", unix.EACCES},
	} {
		cont, k, en := e.loadFile(c.path, false)
		data := cont.b
		if en != c.want {
			t.Errorf("%s: errno %v, want %v", c.path, en, c.want)
			continue
		}
		if en == 0 && (!k.host || k.ino == 0 || !strings.HasPrefix(string(data), "content of h/")) {
			t.Errorf("%s: read %q, key %+v", c.path, data, k)
		}
	}
}
