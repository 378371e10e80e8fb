package policy

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// operatorPolicy is the base of TestMerge's cases.
const operatorPolicy = `
[paths]
hidden = ["/secret", "/home/*/.ssh"]
read_only = ["/etc"]
read_write = ["/etc/tmp"]
[syscalls]
deny = ["ptrace", "family:net=EACCES"]
quota = { execve = 10 }
[limits]
wall_time = "30s"
processes = 5
file_size = "1M"
[network]
allow = ["127.0.0.1:8000"]
`

func mustParse(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return p
}

// TestMerge: an added policy adds restrictions and takes none away.
func TestMerge(t *testing.T) {
	base := mustParse(t, operatorPolicy)
	type classCase struct {
		path string
		want Class
	}
	cases := []struct {
		name, add string
		// the merged policy's classes, denials, quotas, limits
		classes []classCase
		deny    map[string]unix.Errno // a name of Denials -> its errno
		quota   map[string]int64
		check   func(t *testing.T, m *Policy)
	}{
		{name: "empty: the operator's policy", add: ``,
			classes: []classCase{{"/secret/x", Hidden}, {"/etc/passwd", ReadOnly}, {"/etc/tmp/a", ReadWrite}, {"/usr", ReadWrite}},
			deny:    map[string]unix.Errno{"ptrace": unix.EPERM, "net": unix.EACCES}, quota: map[string]int64{"execve": 10}},
		{name: "un-hide", add: "[paths]\nread_write = [\"/secret\", \"/home\"]\n",
			classes: []classCase{{"/secret", Hidden}, {"/secret/x", Hidden}, {"/home/ann/.ssh/id", Hidden}, {"/home/ann/notes", ReadWrite}}},
		{name: "allow a path the operator hid, more specific", add: "[paths]\nread_write = [\"/secret/file\"]\nread_only = [\"/secret/other\"]\n",
			classes: []classCase{{"/secret/file", Hidden}, {"/secret/other", Hidden}}},
		{name: "loosen a read-only path", add: "[paths]\nread_write = [\"/etc/passwd\"]\ndefault = \"read_write\"\n",
			classes: []classCase{{"/etc/passwd", ReadOnly}, {"/etc", ReadOnly}}},
		{name: "un-deny by another errno", add: "[syscalls]\ndeny = [\"ptrace=EACCES\", \"family:net=EPERM\"]\n",
			deny: map[string]unix.Errno{"ptrace": unix.EPERM, "net": unix.EACCES}},
		{name: "raise limits and quotas", add: "[limits]\nwall_time = \"1h\"\nprocesses = 1000\nfile_size = \"1G\"\n[syscalls]\nquota = { execve = 100000 }\nquota_errno = \"EAGAIN\"\n",
			quota: map[string]int64{"execve": 10},
			check: func(t *testing.T, m *Policy) {
				l := m.Limits
				if time.Duration(l.WallTime) != 30*time.Second || l.Processes != 5 || l.FileSize != 1<<20 {
					t.Errorf("limits %+v", l)
				}
				if m.QuotaErrnoValue() != unix.EPERM {
					t.Errorf("quota errno %v: the operator's quotas fail with EPERM", m.QuotaErrnoValue())
				}
			}},
		{name: "zero limits lift nothing", add: "[limits]\nprocesses = 0\n",
			check: func(t *testing.T, m *Policy) {
				if m.Limits.Processes != 5 {
					t.Errorf("processes %d", m.Limits.Processes)
				}
			}},
		{name: "restrict: hide, protect, default", add: "[paths]\nhidden = [\"/etc/passwd\"]\nread_only = [\"/etc/tmp\", \"/usr\"]\n",
			classes: []classCase{{"/etc/passwd", Hidden}, {"/etc/tmp/a", ReadOnly}, {"/usr/bin/ls", ReadOnly}, {"/var", ReadWrite}, {"/secret", Hidden}}},
		{name: "restrict: a stricter default", add: "[paths]\ndefault = \"read_only\"\n",
			classes: []classCase{{"/var/x", ReadOnly}, {"/etc/tmp/a", ReadOnly}, {"/secret", Hidden}},
			check: func(t *testing.T, m *Policy) {
				if m.Default() != ReadOnly || m.Guards("/var") == "" {
					t.Errorf("default %v guards(/var) %q", m.Default(), m.Guards("/var"))
				}
			}},
		{name: "restrict: deny and quota more", add: "[syscalls]\ndeny = [\"mkdir=EACCES\"]\nquota = { execve = 3, uname = 7 }\n",
			deny:  map[string]unix.Errno{"ptrace": unix.EPERM, "net": unix.EACCES, "mkdir": unix.EACCES},
			quota: map[string]int64{"execve": 3, "uname": 7}},
		{name: "restrict: lower limits", add: "[limits]\nwall_time = \"2s\"\nprocesses = 2\naddress_space = \"64M\"\nimage_writes = \"1M\"\n",
			check: func(t *testing.T, m *Policy) {
				l := m.Limits
				if time.Duration(l.WallTime) != 2*time.Second || l.Processes != 2 || l.AddressSpace != 64<<20 || l.ImageWrites != 1<<20 || l.FileSize != 1<<20 {
					t.Errorf("limits %+v", l)
				}
			}},
		{name: "restrict: deny_all", add: "[network]\ndeny_all = true\n",
			check: func(t *testing.T, m *Policy) {
				if !m.Network.DenyAll || len(m.Network.Allow) != 1 || m.Network.Allow[0] != "127.0.0.1:8000" {
					t.Errorf("network %+v", m.Network)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Merge(base, mustParse(t, c.add))
			if err != nil {
				t.Fatal(err)
			}
			for _, cc := range c.classes {
				if got, rule := m.Classify(cc.path); got != cc.want {
					t.Errorf("Classify(%s) = %v (%s), want %v", cc.path, got, rule, cc.want)
				}
			}
			// Never looser than the operator's, on any path asked.
			for _, p := range []string{"/", "/secret", "/secret/file", "/etc", "/etc/passwd", "/etc/tmp/a", "/home/ann/.ssh", "/usr/bin", "/var/x"} {
				if got, _ := m.Classify(p); got < func() Class { c, _ := base.Classify(p); return c }() {
					t.Errorf("Classify(%s) = %v: looser than the operator's", p, got)
				}
			}
			if c.deny != nil {
				got := map[string]unix.Errno{}
				for _, d := range m.Denials() {
					got[d.Name] = d.Errno // a later entry wins, as the engine compiles them
				}
				if len(got) != len(c.deny) {
					t.Errorf("denials %v, want %v", got, c.deny)
				}
				for k, v := range c.deny {
					if got[k] != v {
						t.Errorf("deny %s: %v, want %v", k, got[k], v)
					}
				}
			}
			if c.quota != nil {
				if len(m.Syscalls.Quota) != len(c.quota) {
					t.Errorf("quotas %v, want %v", m.Syscalls.Quota, c.quota)
				}
				for k, v := range c.quota {
					if m.Syscalls.Quota[k] != v {
						t.Errorf("quota %s: %d, want %d", k, m.Syscalls.Quota[k], v)
					}
				}
			}
			if c.check != nil {
				c.check(t, m)
			}
			if len(m.Sources) != 2 || m.Sources[0] != base.SHA256 || m.SHA256 == base.SHA256 {
				t.Errorf("sources %v sha %s", m.Sources, m.SHA256)
			}
		})
	}
}

// TestMergeRefused: what an added policy cannot give is an error naming
// the key.
func TestMergeRefused(t *testing.T) {
	base := mustParse(t, operatorPolicy)
	for _, c := range []struct{ add, want string }{
		{"[network]\nallow = [\"127.0.0.1\"]\n", "network.allow"},
		{"[network]\nallow_hosts = [\"example.com:443\"]\n", "network.allow_hosts"},
	} {
		if _, err := Merge(base, mustParse(t, c.add)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Merge(%q): %v, want an error naming %s", c.add, err, c.want)
		}
	}
}

// TestMergeLayers: the merged policy's other path queries see both files.
func TestMergeLayers(t *testing.T) {
	m, err := Merge(mustParse(t, "[paths]\nhidden = [\"/a/secret\"]\n"), mustParse(t, "[paths]\nhidden = [\"/b/secret\"]\nread_only = [\"/c/*/x\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !m.HasPaths() || !m.HidesIn("/a") || !m.HidesIn("/b") || m.HidesIn("/c") {
		t.Errorf("HasPaths %v HidesIn a %v b %v c %v", m.HasPaths(), m.HidesIn("/a"), m.HidesIn("/b"), m.HidesIn("/c"))
	}
	if m.Guards("/a") == "" || m.Guards("/b") == "" || m.Guards("/c/d") == "" || m.Guards("/e") != "" {
		t.Errorf("Guards a %q b %q c/d %q e %q", m.Guards("/a"), m.Guards("/b"), m.Guards("/c/d"), m.Guards("/e"))
	}
	if c, rule := m.Classify("/b/secret/k"); c != Hidden || rule != "hidden:/b/secret" {
		t.Errorf("Classify /b/secret/k: %v %s", c, rule)
	}
	// The operator's rule is named when both give the same class.
	m2, _ := Merge(mustParse(t, "[paths]\nhidden = [\"/s\"]\n"), mustParse(t, "[paths]\nhidden = [\"/s/t\"]\n"))
	if c, rule := m2.Classify("/s/t"); c != Hidden || rule != "hidden:/s" {
		t.Errorf("Classify /s/t: %v %s", c, rule)
	}
	// A three-file merge lists each file.
	m3, err := Merge(m, mustParse(t, ""))
	if err != nil || len(m3.Sources) != 3 {
		t.Errorf("three files: %v %v", err, m3.Sources)
	}
	if len(m.Paths.Hidden) != 2 {
		t.Errorf("hidden patterns %v", m.Paths.Hidden)
	}
}
