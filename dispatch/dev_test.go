package dispatch

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestDevFd: the paths that name the caller's fds through kbox's /dev
// links, with the path beneath them; only with kbox's /dev.
func TestDevFd(t *testing.T) {
	e := New(Options{Dev: true})
	cases := []struct {
		path string
		fd   int
		rest string
		ok   bool
	}{
		{"/dev/stdin", 0, "", true},
		{"/dev/stdout", 1, "", true},
		{"/dev/stderr", 2, "", true},
		{"/dev/fd/0", 0, "", true},
		{"/dev/fd/63", 63, "", true},
		{"/dev/fd/1024", 1024, "", true},
		{"/dev/fd/3/a/b", 3, "a/b", true},
		{"/dev/stdin/x", 0, "x", true},
		{"/dev/fd", -1, "", true}, // the link itself
		{"/dev/fd/03", 0, "", false},
		{"/dev/fd/-1", 0, "", false},
		{"/dev/fd/x", 0, "", false},
		{"/dev/fd/99999999999999999999", 0, "", false},
		{"/dev/null", 0, "", false},
		{"/dev/stdinx", 0, "", false},
		{"/dev/fdx/1", 0, "", false},
		{"/devfd/1", 0, "", false},
		{"/tmp/dev/fd/1", 0, "", false},
	}
	for _, c := range cases {
		fd, rest, ok := e.devFd(c.path)
		if ok != c.ok || ok && (fd != c.fd || rest != c.rest) {
			t.Errorf("devFd(%q) = %d %q %v, want %d %q %v", c.path, fd, rest, ok, c.fd, c.rest, c.ok)
		}
	}
	if _, _, ok := New(Options{}).devFd("/dev/stdin"); ok {
		t.Error("devFd names an fd without kbox's /dev (the image's own /dev)")
	}
}

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
		if got := roRoute(c.t, c.flags); got != c.want {
			t.Errorf("roRoute(%s, %#o) = %v, want %v", c.t.Rel, c.flags, got, c.want)
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
		if got := ttyNr(c.line); got != c.want {
			t.Errorf("ttyNr(%q) = %d:%d, want %d:%d", c.line, unix.Major(got), unix.Minor(got), unix.Major(c.want), unix.Minor(c.want))
		}
	}
	if got := cttyOf(-1); got != 0 {
		t.Errorf("cttyOf(-1) = %d, want 0", got)
	}
}
