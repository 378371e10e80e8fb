package dispatch

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestViewOf(t *testing.T) {
	for _, c := range []struct {
		root, img, view string
		in              bool
	}{
		{"", "/a/b", "/a/b", true},
		{"/", "/a/b", "/a/b", true},
		{"/j", "/j", "/", true},
		{"/j", "/j/a", "/a", true},
		{"/j", "/jail/a", "/jail/a", false},
		{"/j", "/tmp", "/tmp", false},
	} {
		v, in := viewOf(c.root, c.img)
		if v != c.view || in != c.in {
			t.Errorf("viewOf(%q, %q) = %q, %v; want %q, %v", c.root, c.img, v, in, c.view, c.in)
		}
	}
}

// nrOf returns the running architecture's number of syscall name.
func nrOf(t *testing.T, name string) int {
	nr := -1
	Syscalls(func(n int, s *Syscall) {
		if s.Name == name {
			nr = n
		}
	})
	if nr < 0 {
		t.Skipf("no %s here", name)
	}
	return nr
}

func TestFollowsLink(t *testing.T) {
	for _, c := range []struct {
		name string
		args [6]uint64
		want bool
	}{
		{"openat", [6]uint64{0, 0, unix.O_RDONLY}, true},
		{"openat", [6]uint64{0, 0, unix.O_RDONLY | unix.O_NOFOLLOW}, false},
		{"openat", [6]uint64{0, 0, unix.O_WRONLY | unix.O_CREAT}, true},
		{"openat", [6]uint64{0, 0, unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL}, false},
		{"newfstatat", [6]uint64{0, 0, 0, 0}, true},
		{"newfstatat", [6]uint64{0, 0, 0, unix.AT_SYMLINK_NOFOLLOW}, false},
		{"statx", [6]uint64{0, 0, unix.AT_SYMLINK_NOFOLLOW}, false},
		{"readlinkat", [6]uint64{}, false},
		{"unlinkat", [6]uint64{}, false},
		{"mkdirat", [6]uint64{}, false},
		{"linkat", [6]uint64{0, 0, 0, 0, 0}, false},
		{"linkat", [6]uint64{0, 0, 0, 0, unix.AT_SYMLINK_FOLLOW}, true},
		{"chdir", [6]uint64{}, true},
		{"chroot", [6]uint64{}, true},
		{"execve", [6]uint64{}, true},
	} {
		r := &Request{Nr: nrOf(t, c.name), Args: c.args}
		if got := followsLink(r); got != c.want {
			t.Errorf("%s %x: followsLink = %v, want %v", c.name, c.args, got, c.want)
		}
	}
}
