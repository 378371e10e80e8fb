package policy

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, src, err string
	}{
		{"empty", ``, ""},
		{"full", `
[paths]
default = "read_write"
hidden = ["/secret", "/home/*/.ssh"]
read_only = ["/etc", "/usr/**"]
read_write = ["/etc/tmp"]
[syscalls]
deny = ["ptrace", "family:net=EACCES"]
quota = { execve = 100, "family:proc" = 10 }
quota_errno = "EAGAIN"
[limits]
wall_time = "30s"
cpu_time = "10s"
address_space = "1G"
processes = 20
file_size = 1048576
[network]
allow = ["10.0.0.0/8:443"]
allow_hosts = ["api.example.com:443"]
deny_all = true
`, ""},
		{"unknown top key", "[pathz]\nhidden = []\n", "unknown key pathz"},
		{"unknown nested key", "[paths]\nhiden = [\"/x\"]\n", "unknown key paths.hiden"},
		{"unknown limit", "[limits]\nwall = \"1s\"\n", "unknown key limits.wall"},
		{"relative pattern", "[paths]\nhidden = [\"etc\"]\n", "not an absolute path"},
		{"dotdot pattern", "[paths]\nread_only = [\"/a/../b\"]\n", `".." component`},
		{"bad glob", "[paths]\nhidden = [\"/a/[\"]\n", "bad component"},
		{"half doublestar", "[paths]\nhidden = [\"/a/b**\"]\n", "whole component"},
		{"bad default", "[paths]\ndefault = \"rw\"\n", "paths.default"},
		{"bad errno", "[syscalls]\ndeny = [\"ptrace=EWHAT\"]\n", "unknown errno"},
		{"negative quota", "[syscalls]\nquota = { execve = -1 }\n", "negative"},
		{"bad duration", "[limits]\nwall_time = \"soon\"\n", "bad duration"},
		{"bad size", "[limits]\nfile_size = \"big\"\n", "bad size"},
		{"bad image writes", "[limits]\nimage_writes = \"lots\"\n", "bad size"},
		{"not toml", "[paths\n", "expected"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src))
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case c.err != "" && err == nil:
				t.Fatalf("Parse: no error, want one with %q", c.err)
			case c.err != "" && !strings.Contains(err.Error(), c.err):
				t.Fatalf("Parse: %v, want %q in it", err, c.err)
			}
		})
	}
}

func TestValues(t *testing.T) {
	p, err := Parse([]byte(`
[syscalls]
deny = ["ptrace", "family:net=EACCES"]
quota = { execve = 3 }
[limits]
wall_time = "1m30s"
address_space = "64MiB"
file_size = "4K"
image_writes = "2M"
`))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(p.Limits.WallTime) != 90*time.Second || p.Limits.AddressSpace != 64<<20 || p.Limits.FileSize != 4096 || p.Limits.ImageWrites != 2<<20 {
		t.Fatalf("limits %+v", p.Limits)
	}
	d := p.Denials()
	if len(d) != 2 || d[0] != (Deny{Name: "ptrace", Errno: unix.EPERM}) || d[1] != (Deny{Name: "net", Errno: unix.EACCES, Family: true}) {
		t.Fatalf("denials %+v", d)
	}
	if p.QuotaErrnoValue() != unix.EPERM {
		t.Fatalf("quota errno %v", p.QuotaErrnoValue())
	}
	eff := p.Effective()
	for _, want := range []string{`default = "read_write"`, `"ptrace=EPERM"`, `"family:net=EACCES"`, `execve = 3`, `wall_time = "1m30s"`, `quota_errno = "EPERM"`, `image_writes = 2097152`} {
		if !strings.Contains(eff, want) {
			t.Errorf("effective policy lacks %s:\n%s", want, eff)
		}
	}
	// The effective policy reads back as itself.
	q, err := Parse([]byte(eff))
	if err != nil {
		t.Fatalf("effective policy does not parse: %v\n%s", err, eff)
	}
	if q.Effective() != eff {
		t.Fatalf("effective policy changed on reading back:\n%s\n---\n%s", eff, q.Effective())
	}
}

func TestClassify(t *testing.T) {
	p, err := Parse([]byte(`
[paths]
hidden = ["/secret", "/home/*/.ssh", "/**/id_rsa"]
read_only = ["/", "/etc"]
read_write = ["/tmp", "/home", "/etc/tmp"]
`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		want Class
		rule string
	}{
		{"/", ReadOnly, "read_only:/"},
		{"/usr/bin/ls", ReadOnly, "read_only:/"},
		{"/etc/passwd", ReadOnly, "read_only:/etc"},
		{"/etc/tmp/x", ReadWrite, "read_write:/etc/tmp"},
		{"/tmp", ReadWrite, "read_write:/tmp"},
		{"/tmp/a/b", ReadWrite, "read_write:/tmp"},
		{"/tmpx", ReadOnly, "read_only:/"},
		{"/secret", Hidden, "hidden:/secret"},
		{"/secret/a", Hidden, "hidden:/secret"},
		{"/secretx", ReadOnly, "read_only:/"},
		{"/home/ann/.ssh/key", Hidden, "hidden:/home/*/.ssh"},
		{"/home/ann/notes", ReadWrite, "read_write:/home"},
		{"/tmp/deep/id_rsa", Hidden, "hidden:/**/id_rsa"},
		{"/id_rsa", Hidden, "hidden:/**/id_rsa"},
	}
	for _, c := range cases {
		got, rule := p.Classify(c.path)
		if got != c.want || rule != c.rule {
			t.Errorf("Classify(%s) = %v %q, want %v %q", c.path, got, rule, c.want, c.rule)
		}
	}
	guards := []struct {
		dir  string
		want bool
	}{
		{"/home", true},     // holds /home/*/.ssh
		{"/home/ann", true}, // holds /home/ann/.ssh
		{"/tmp/deep", true}, // **/id_rsa
		{"/secret", true},   // "/**/id_rsa" could be beneath it
		{"/etc/tmp", true},  // "/**/id_rsa" again
	}
	for _, g := range guards {
		if got := p.Guards(g.dir) != ""; got != g.want {
			t.Errorf("Guards(%s) = %v, want %v", g.dir, got, g.want)
		}
	}
	q, _ := Parse([]byte("[paths]\nhidden = [\"/secret\"]\nread_only = [\"/etc/*/x\"]\n"))
	for dir, want := range map[string]bool{"/secret": false, "/": true, "/etc": true, "/etc/a": true, "/usr": false, "/etc/a/x": false} {
		if got := q.Guards(dir) != ""; got != want {
			t.Errorf("Guards(%s) = %v, want %v", dir, got, want)
		}
	}
	var none *Policy
	if none.HasPaths() {
		t.Error("nil policy has paths")
	}
}

func TestPattern(t *testing.T) {
	cases := []struct {
		pat, path string
		match     bool
		beneath   bool
	}{
		{"/", "/", true, false},
		{"/", "/a/b", true, false},
		{"/a", "/", false, true},
		{"/a", "/a", true, false},
		{"/a", "/a/b", true, false},
		{"/a", "/ab", false, false},
		{"/a/*/c", "/a/x/c/d", true, false},
		{"/a/*/c", "/a/x", false, true},
		{"/a/*/c", "/a/x/d", false, false},
		{"/**", "/anything", true, false},
		{"/a/**/z", "/a/z", true, false},
		{"/a/**/z", "/a/b/c/z/w", true, false},
		{"/a/**/z", "/a/b/c", false, true},
		{"/a/**/z", "/b", false, false},
		{"/[ab]?", "/bc", true, false},
		{"/a/**/**/*/z", "/a/q/z", true, false},
	}
	for _, c := range cases {
		p, err := Compile(c.pat)
		if err != nil {
			t.Fatalf("Compile(%s): %v", c.pat, err)
		}
		if got := p.Match(c.path); got != c.match {
			t.Errorf("%s Match(%s) = %v", c.pat, c.path, got)
		}
		if got := p.Beneath(c.path); got != c.beneath {
			t.Errorf("%s Beneath(%s) = %v", c.pat, c.path, got)
		}
	}
}

// FuzzPattern: compiling and matching never panic, a match of a path is a
// match of everything beneath it, and Beneath never holds with Match.
func FuzzPattern(f *testing.F) {
	f.Add("/a/*/c", "/a/b/c")
	f.Add("/**/x/**", "/p/x/q")
	f.Add("/[", "/a")
	f.Add("/", "/")
	f.Fuzz(func(t *testing.T, pat, p string) {
		c, err := Compile(pat)
		if err != nil {
			return
		}
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.Contains(p, "/./") || strings.Contains(p, "/../") {
			return
		}
		m := c.Match(p)
		if m && c.Beneath(p) {
			t.Fatalf("%q matches %q and has something beneath it", pat, p)
		}
		if m && !c.Match(strings.TrimSuffix(p, "/")+"/child") {
			t.Fatalf("%q matches %q but not %q/child", pat, p, p)
		}
	})
}

// BenchmarkClassify: the path rules' cost for one path (the engine checks
// the lexical path and, when it differs, the path LKL resolved).
func BenchmarkClassify(b *testing.B) {
	p, err := Parse([]byte(`
[paths]
hidden = ["/root/.ssh", "/home/*/.ssh", "/secret"]
read_only = ["/etc", "/usr"]
read_write = ["/tmp", "/dev"]
`))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		p.Classify("/etc/hostname")
	}
}

func TestHidesIn(t *testing.T) {
	p, _ := Parse([]byte("[paths]\nhidden = [\"/data/secret\", \"/home/*/.ssh\"]\n"))
	for dir, want := range map[string]bool{"/data": true, "/": true, "/home": true, "/home/ann": true, "/data/ro": false, "/etc": false} {
		if got := p.HidesIn(dir); got != want {
			t.Errorf("HidesIn(%s) = %v, want %v", dir, got, want)
		}
	}
}
