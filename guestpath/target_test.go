package guestpath

import (
	"path"
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	cases := []struct{ cwd, p, want string }{
		{"/", "etc/hostname", "/etc/hostname"},
		{"/tmp", "../etc/./hostname", "/etc/hostname"},
		{"/", "../../../../etc/passwd", "/etc/passwd"},
		{"/a/b", "../../../..", "/"},
		{"/x", "/abs//path/", "/abs/path"},
		{"/x", ".", "/x"},
	}
	for _, c := range cases {
		if got := Clean(c.cwd, c.p); got != c.want {
			t.Errorf("Clean(%q, %q) = %q, want %q", c.cwd, c.p, got, c.want)
		}
	}
}

func FuzzClean(f *testing.F) {
	f.Add("/tmp", "../../etc")
	f.Add("/", "a/../../b/./c//")
	f.Fuzz(func(t *testing.T, cwd, p string) {
		got := Clean(Clean("/", cwd), p)
		if !strings.HasPrefix(got, "/") {
			t.Fatalf("not absolute: %q", got)
		}
		for _, part := range strings.Split(got, "/") {
			if part == ".." || part == "." {
				t.Fatalf("%q keeps %q", got, part)
			}
		}
	})
}

func TestIsClean(t *testing.T) {
	for _, p := range []string{"/", "/a", "/etc/hostname", "/a/b/c", "/.a/..b/...", "a", "", "//", "/a/", "/a//b", "/./a", "/a/.", "/a/..", "/../a", "/a/./b"} {
		if got, want := IsClean(p), path.Clean("/"+p) == p; got != want {
			t.Errorf("IsClean(%q) = %v, want %v", p, got, want)
		}
	}
}

func FuzzIsClean(f *testing.F) {
	f.Add("/a/./b")
	f.Add("/etc/hostname")
	f.Fuzz(func(t *testing.T, p string) {
		if IsClean(p) != (path.Clean("/"+p) == p) {
			t.Fatalf("IsClean(%q) = %v", p, IsClean(p))
		}
	})
}

// dirTail keeps what a trailing slash asks of the last component.
func TestDirTail(t *testing.T) {
	for p, want := range map[string]string{
		"a": "", "a/": "/", "a/b//": "/", "a/.": "/.", ".": "", "/": "/", "a/..": "", "a.": "",
	} {
		if got := DirTail(p); got != want {
			t.Errorf("DirTail(%q) = %q, want %q", p, got, want)
		}
	}
}
