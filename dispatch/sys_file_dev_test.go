package dispatch

import (
	"testing"
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
