package guestpath

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestRoRoute: the host's CPU topology is read-only; other routes and
// binds are not judged here.
func TestRoRoute(t *testing.T) {
	cpu := Target{Host: true, Route: CPURoute, Rel: "cpu1/online"}
	cases := []struct {
		t     Target
		flags int
		want  unix.Errno
	}{
		{cpu, unix.O_RDONLY, 0},
		{cpu, unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, 0},
		{cpu, unix.O_RDONLY | unix.O_NONBLOCK, 0},
		{cpu, unix.O_WRONLY, unix.EACCES},
		{cpu, unix.O_RDWR, unix.EACCES},
		{cpu, unix.O_RDONLY | unix.O_TRUNC, unix.EACCES},
		{cpu, unix.O_RDONLY | unix.O_CREAT, unix.EACCES},
		{cpu, unix.O_WRONLY | unix.O_TMPFILE, unix.EACCES},
		{Target{Host: true, Route: "/proc", Rel: "1/status"}, unix.O_WRONLY, 0},
		{Target{Host: true, Route: CPURoute, Bind: &Bind{}}, unix.O_WRONLY, 0},
	}
	for _, c := range cases {
		if got := RoRoute(c.t, c.flags); got != c.want {
			t.Errorf("RoRoute(%s, %#o) = %v, want %v", c.t.Rel, c.flags, got, c.want)
		}
	}
}

// TestTTYNr reads tty_nr from /proc/PID/stat lines, whose command name
// may hold spaces and parentheses.
func TestTTYNr(t *testing.T) {
	cases := []struct {
		line string
		want uint64
	}{
		{"42 (sh) S 1 42 42 34816 42 4194560 0 0", unix.Mkdev(136, 0)},
		{"42 (a) b) (c) S 1 42 42 34817 42 4194560", unix.Mkdev(136, 1)},
		{"42 (bash) S 1 42 42 1025 42", unix.Mkdev(4, 1)},
		{"42 (sleep) S 1 42 42 0 -1 4194560", 0},
		{"42 (x) S 1 42 42 -5 -1", 0},
		{"42 (x) S 1 42", 0},
		{"garbage", 0},
		{"", 0},
	}
	for _, c := range cases {
		if got := TtyNr(c.line); got != c.want {
			t.Errorf("TtyNr(%q) = %d:%d, want %d:%d", c.line, unix.Major(got), unix.Minor(got), unix.Major(c.want), unix.Minor(c.want))
		}
	}
	if got := CttyOf(-1); got != 0 {
		t.Errorf("CttyOf(-1) = %d, want 0", got)
	}
}

// TestDevOpenOf: what a device node opens, by its file type and number.
func TestDevOpenOf(t *testing.T) {
	for _, c := range []struct {
		mode uint32
		rdev uint64
		want DevOpen
		host string
	}{
		{unix.S_IFCHR, unix.Mkdev(1, 3), DevOpensHost, "/dev/null"},
		{unix.S_IFCHR, unix.Mkdev(1, 9), DevOpensHost, "/dev/urandom"},
		{unix.S_IFCHR, unix.Mkdev(5, 0), DevOpensCtty, ""},
		{unix.S_IFCHR, unix.Mkdev(5, 2), DevOpensPtmx, ""},
		{unix.S_IFCHR, unix.Mkdev(1, 1), DevOpensNone, ""},  // mem
		{unix.S_IFCHR, unix.Mkdev(1, 11), DevOpensNone, ""}, // kmsg
		{unix.S_IFBLK, unix.Mkdev(1, 3), DevOpensNone, ""},  // a block device of null's number
		{unix.S_IFBLK, unix.Mkdev(254, 0), DevOpensNone, ""},
	} {
		if got, host := DevOpenOf(c.mode, c.rdev); got != c.want || host != c.host {
			t.Errorf("DevOpenOf(%#o, %d:%d) = %v %q, want %v %q", c.mode, unix.Major(c.rdev), unix.Minor(c.rdev), got, host, c.want, c.host)
		}
	}
	for p, want := range map[string]bool{"/dev/null": true, "/dev/pts/0": true, "/dev/shm/x": false, "/dev": false, "/devx/null": false, "/tmp/null": false} {
		if InDev(p) != want {
			t.Errorf("InDev(%q) = %v", p, !want)
		}
	}
	if f := DevOpenFlags(unix.O_RDWR | unix.O_CREAT | unix.O_EXCL | unix.O_TRUNC | unix.O_CLOEXEC | unix.O_NONBLOCK); f != unix.O_RDWR|unix.O_NONBLOCK|unix.O_NOCTTY {
		t.Errorf("DevOpenFlags = %#x", f)
	}
}
