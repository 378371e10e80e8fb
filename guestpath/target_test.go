package guestpath

import (
	"path"
	"strings"
	"testing"

	"github.com/kbox-project/kbox/procfs"
)

func TestClean(t *testing.T) {
	cases := []struct{ cwd, p, want string }{
		{"/", "etc/hostname", "/etc/hostname"},
		{"/tmp", "../etc/./hostname", "/etc/hostname"},
		{"/", "../../../../etc/passwd", "/etc/passwd"},
		{"/a/b", "../../../..", "/"},
		{"/x", "/abs//path/", "/abs/path"},
		{"/x", ".", "/x"},
		{"/", "a", "/a"},
		{"/w/repo", "f1.txt", "/w/repo/f1.txt"},
		{"/w/repo", "d/f", "/w/repo/d/f"},
		{"/w", "a/", "/w/a"},
		{"/w", "./a", "/w/a"},
		{"/w", "a//b", "/w/a/b"},
		{"/w", "..a/b..", "/w/..a/b.."},
		{"/w", "", "/w"},
	}
	for _, c := range cases {
		if got := Clean(c.cwd, c.p); got != c.want {
			t.Errorf("Clean(%q, %q) = %q, want %q", c.cwd, c.p, got, c.want)
		}
	}
	// A clean path allocates nothing, a clean name in the cwd its result.
	for _, c := range []struct {
		cwd, p string
		allocs float64
	}{{"/w/repo", "/etc/hostname", 0}, {"/w/repo", "some/file-name.txt", 1}} {
		if n := testing.AllocsPerRun(100, func() { Clean(c.cwd, c.p) }); n > c.allocs {
			t.Errorf("Clean(%q, %q): %v allocations, want %v", c.cwd, c.p, n, c.allocs)
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

// FuzzCleanMatchesPath: Clean of a path against a clean cwd is
// path.Clean's, whichever way it gets there.
func FuzzCleanMatchesPath(f *testing.F) {
	f.Add("/w/repo", "f1.txt")
	f.Add("/", "a/../b")
	f.Add("/x", "/abs//path/")
	f.Fuzz(func(t *testing.T, cwd, p string) {
		cwd = Clean("/", cwd)
		want := path.Clean("/" + p)
		if !strings.HasPrefix(p, "/") {
			want = path.Clean("/" + cwd + "/" + p)
		}
		if got := Clean(cwd, p); got != want {
			t.Fatalf("Clean(%q, %q) = %q, want %q", cwd, p, got, want)
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
		"a/./": "/.", "a/.//": "/.", "a//.": "/.", "./": "/", "a/../": "/",
	} {
		if got := DirTail(p); got != want {
			t.Errorf("DirTail(%q) = %q, want %q", p, got, want)
		}
	}
}

// TestKeepTail: where a trailing "/" or "/." of the guest's path is kept.
func TestKeepTail(t *testing.T) {
	for _, c := range []struct {
		name              string
		t                 Target
		tail              string
		wantTail, wantRel string
	}{
		{"image path", Target{Path: "/etc"}, "/", "/", ""},
		{"image root", Target{Path: "/"}, "/.", "", ""},
		{"no tail", Target{Path: "/etc"}, "", "", ""},
		{"host file", Target{Host: true, Rel: "a/b"}, "/", "", "a/b/"},
		{"host root", Target{Host: true, Rel: "."}, "/", "", "."},
		{"proc", Target{Host: true, Proc: &procfs.Node{}, Rel: "x"}, "/.", "/.", "x"},
	} {
		got := c.t
		got.KeepTail(c.tail)
		if got.Tail != c.wantTail || got.Rel != c.wantRel {
			t.Errorf("%s: Tail %q Rel %q, want %q %q", c.name, got.Tail, got.Rel, c.wantTail, c.wantRel)
		}
	}
}

func TestLastDotDot(t *testing.T) {
	for _, c := range []struct {
		p    string
		want int
	}{
		{"", -1}, {"/", -1}, {"/a/b", -1}, {"a..b/..c/c..", -1}, {"/...", -1}, {".", -1},
		{"..", 2}, {"../", 2}, {"/a/..", 5}, {"/a/../b", 5}, {"a/../../b/./c", 7},
		{"/l/../c/../../b/./c", 13}, {"x//..//", 5},
	} {
		if got := LastDotDot(c.p); got != c.want {
			t.Errorf("LastDotDot(%q) = %d, want %d", c.p, got, c.want)
		}
		if n := testing.AllocsPerRun(10, func() { LastDotDot(c.p) }); n != 0 {
			t.Errorf("LastDotDot(%q) allocates", c.p)
		}
	}
}
