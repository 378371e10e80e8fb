package procfs

import (
	"github.com/kbox-project/kbox/shadowfd"
	"os"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeProc is a guest process of fakeSys.
type fakeProc struct {
	cwd, exe string
	ids      Creds
	id       Ident
}

func (p *fakeProc) Cwd() string   { return p.cwd }
func (p *fakeProc) CwdGone() bool { return false }
func (p *fakeProc) Root() string  { return "/" }
func (p *fakeProc) Exe() string   { return p.exe }
func (p *fakeProc) IDs() Creds    { return p.ids }
func (p *fakeProc) Ident() Ident  { return p.id }
func (p *fakeProc) UpdateIdent(f func(*Ident) unix.Errno) unix.Errno {
	return f(&p.id)
}

var hostProc = sync.OnceValues(func() (int, error) {
	return unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
})

// fakeSys is an engine without a keeper whose guest processes are
// procs; this test process is one of them (its host /proc entries are
// real), whose parent is hidden.
type fakeSys struct {
	procs map[int]*fakeProc
	ipc   bool
}

func (s *fakeSys) Config() Config                    { return Config{VirtualFDs: 1024} }
func (s *fakeSys) GuestTask(c *Caller, pid int) bool { return s.procs[pid] != nil }
func (s *fakeSys) TgidOf(c *Caller, pid int) int     { return pid }
func (s *fakeSys) Process(tgid int, register bool) Process {
	if p := s.procs[tgid]; p != nil {
		return p
	}
	return nil
}
func (s *fakeSys) InitCreds() Creds                 { return Creds{} }
func (s *fakeSys) ShownParent(tgid int) (int, bool) { return 0, tgid == os.Getpid() }
func (s *fakeSys) Keepers() (int, int)              { return 0, 0 }
func (s *fakeSys) Known() []int {
	var out []int
	for pid := range s.procs {
		out = append(out, pid)
	}
	return out
}
func (s *fakeSys) FdRef(tgid, fd int) (*FdRef, unix.Errno) {
	if fd == 1500 {
		return &FdRef{Text: "/etc", Path: "/etc", Dir: true, LKLFd: 3, Acc: unix.O_RDONLY}, 0
	}
	return nil, unix.ENOENT
}
func (s *fakeSys) VirtualFds(tgid int) []int { return []int{1500} }

func (s *fakeSys) HostFdHidden(tgid, fd int) bool { return false }
func (s *fakeSys) Fdinfo(tgid, fd int) (func() []byte, bool) {
	return func() []byte { return []byte("pos:\t0\n") }, fd == 1500
}
func (s *fakeSys) HostProc() (int, error)                  { return hostProc() }
func (s *fakeSys) BindPath(path string) (string, bool)     { return "", false }
func (s *fakeSys) PtsPath(uint64, string) (string, bool)   { return "", false }
func (s *fakeSys) OnRoute(path string) bool                { return false }
func (s *fakeSys) FIFOPath(dev, ino uint64) (string, bool) { return "", false }
func (s *fakeSys) Inotify(ino uint64) bool                 { return false }
func (s *fakeSys) Mounts() []KboxMount                     { return nil }
func (s *fakeSys) IPCSysctl(name string) *Node             { return nil }
func (s *fakeSys) Shadow(dev, ino uint64) *shadowfd.Node   { return nil }
func (s *fakeSys) Canonical(p string) string               { return p }
func (s *fakeSys) Sysvipc(abs, sub string) (*Node, unix.Errno) {
	if !s.ipc {
		return nil, unix.ENOENT
	}
	return &Node{Kind: Dir, Like: "sysvipc", List: dots}, 0
}

// Classify through System alone: the package needs nothing else of the
// engine. The caller (this process, uid 1000) may inspect a process of
// the same ids, not root's, unless it has CAP_SYS_PTRACE.
func TestClassifyThroughSystem(t *testing.T) {
	self := os.Getpid()
	me := strconv.Itoa(self)
	user := Creds{UID: 1000, EUID: 1000, SUID: 1000, FSUID: 1000, GID: 1000, EGID: 1000, SGID: 1000, FSGID: 1000}
	s := &fakeSys{procs: map[int]*fakeProc{
		self:   {cwd: "/home/u", ids: user},
		999998: {cwd: "/", ids: user},
		999999: {cwd: "/", ids: Creds{}},
	}}
	cases := []struct {
		path   string
		caps   uint64
		kind   Kind
		rel    string // a host path's Rel
		redir  string // a redirect's Path and Sub, joined by "|"
		link   string
		errno  unix.Errno
		listed []string // names a Dir lists (a subset)
	}{
		{path: "/proc", kind: Dir, listed: []string{"self", "loadavg", me}}, // 999998 and 999999 are no host processes
		{path: "/proc/self", kind: Link, link: me},
		{path: "/proc/self/cwd", kind: Link, link: "/home/u"},
		{path: "/proc/self/cwd/a/b", redir: "/home/u|a/b"},
		{path: "/proc/self/root/etc", redir: "/|etc"},
		{path: "/proc/self/fd", kind: Dir, listed: []string{"1500"}},
		{path: "/proc/self/fd/1500", kind: Link, link: "/etc"},
		{path: "/proc/self/fd/1500/passwd", redir: "/etc|passwd"},
		{path: "/proc/self/fd/1501", errno: unix.ENOENT},
		{path: "/proc/self/fdinfo/1500", kind: Text},
		{path: "/proc/self/fdinfo/3", rel: me + "/fdinfo/3"},
		{path: "/proc/self/mounts", kind: Text},
		{path: "/proc/self/oom_score_adj", kind: Text},
		{path: "/proc/999998/environ", rel: "999998/environ"},
		{path: "/proc/999999/environ", errno: unix.EACCES},
		{path: "/proc/999999/environ", caps: 1 << capSysPtrace, rel: "999999/environ"},
		{path: "/proc/999999/cwd", errno: unix.EACCES},
		{path: "/proc/999999/status", kind: Text}, // the guest's capability lines
		{path: "/proc/self/status", kind: Text},   // its parent hidden
		{path: "/proc/1/status", errno: unix.ENOENT},
		{path: "/proc/sys/kernel/hostname", errno: unix.ENOENT}, // no LKL proc here
		{path: "/proc/sysvipc", errno: unix.ENOENT},             // no IPC namespace
		{path: "/proc/kcore", errno: unix.ENOENT},
		{path: "/proc/cpuinfo", rel: "cpuinfo"},
	}
	for _, c := range cases {
		ids := user
		ids.Eff = c.caps
		s.procs[self].ids = ids
		caller := &Caller{Tgid: self, Tid: self, Self: s.procs[self]}
		f, en := Classify(s, caller, c.path, 0)
		var bad bool
		switch {
		case en != c.errno:
			bad = true
		case en != 0:
		case c.redir != "":
			bad = !f.Redirect || f.Path+"|"+f.Sub != c.redir || f.Depth != 1
		case c.kind != 0:
			bad = f.Node == nil || f.Node.Kind != c.kind || c.link != "" && f.Node.Link != c.link
			if !bad && c.listed != nil {
				names := map[string]bool{}
				for _, d := range f.Node.List() {
					names[d.Name] = true
				}
				for _, n := range c.listed {
					bad = bad || !names[n]
				}
				bad = bad || names["sys"] || names["sysvipc"] // LKL's, and no namespace
			}
		default:
			bad = f.Node != nil || f.Redirect || f.Rel != c.rel
		}
		if bad {
			t.Errorf("%s (caps %#x): %+v (node %+v) %v", c.path, c.caps, f, f.Node, en)
		}
	}
	// Links followed past MaxDepth.
	if _, en := Classify(s, &Caller{Tgid: self, Tid: self, Self: s.procs[self]}, "/proc/mounts", MaxDepth+1); en != unix.ELOOP {
		t.Errorf("beyond MaxDepth: %v, want ELOOP", en)
	}
}

// A write to oom_score_adj goes through the process's UpdateIdent with
// the writer's credentials: below the floor only with CAP_SYS_RESOURCE.
func TestOOMStore(t *testing.T) {
	self := os.Getpid()
	p := &fakeProc{cwd: "/"}
	s := &fakeSys{procs: map[int]*fakeProc{self: p}}
	f, en := Classify(s, &Caller{Tgid: self, Tid: self, Self: p}, "/proc/self/oom_score_adj", 0)
	if en != 0 || f.Node == nil || f.Node.Store == nil || f.Node.Owner == nil {
		t.Fatalf("oom_score_adj: %+v %v", f, en)
	}
	if n, en := f.Node.Store(Creds{}, []byte("-5\n")); en != unix.EACCES || n != 0 {
		t.Errorf("unprivileged -5: %d %v, want EACCES", n, en)
	}
	if n, en := f.Node.Store(Creds{Eff: 1 << capSysResource}, []byte("-5\n")); en != 0 || n != 3 {
		t.Errorf("privileged -5: %d %v", n, en)
	}
	if got := string(f.Node.Text()); got != "-5\n" || p.id.OOMMin != -5 {
		t.Errorf("after the write: %q, floor %d", got, p.id.OOMMin)
	}
}

// TestGuestSysctl: the sysctls a guest may write are the sandbox kernel's
// own; LKL's others and look-alike names stay read-only.
func TestGuestSysctl(t *testing.T) {
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/proc/sys/kernel/hostname", true},
		{"/proc/sys/kernel/domainname", true},
		{"/proc/sys/fs/inotify/max_user_watches", true},
		{"/proc/sys/fs/lease-break-time", false}, // LKL has none (it needs an MMU)
		{"/proc/sys/net/ipv4/conf/lo/tag", true},
		{"/proc/sys/net", false},
		{"/proc/sys/fs/inotify", false},
		{"/proc/sys/kernel/ostype", false},
		{"/proc/sys/kernel/printk", false},
		{"/proc/sys/kernel/hostnamex", false},
		{"/proc/sys/fs/file-max", false},
		{"/proc/sys/vm/overcommit_memory", false},
		{"/proc/sys/fs/lease-break-time/x", false},
	} {
		if got := GuestSysctl(c.path); got != c.want {
			t.Errorf("GuestSysctl(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}

// TestNumaLine: a numa_maps line of a mapping of kbox's file names the
// guest's file, escaped as numa_maps escapes; other lines stay as they are.
func TestNumaLine(t *testing.T) {
	names := map[string]string{"00400000": "/usr/bin/a b=c"}
	for _, c := range []struct{ in, want string }{
		{"00400000 default file=/memfd:kbox-exec:/usr/bin/a\\040b\\075c\\040(deleted) dirty=1 N0=1 kernelpagesize_kB=4\n",
			"00400000 default file=/usr/bin/a\\040b\\075c dirty=1 N0=1 kernelpagesize_kB=4\n"},
		{"00401000 default file=/usr/lib/x dirty=1\n", "00401000 default file=/usr/lib/x dirty=1\n"},
		{"7fff1ead9000 default stack anon=2\n", "7fff1ead9000 default stack anon=2\n"},
		{"", ""},
	} {
		if got := numaLine(c.in, names); got != c.want {
			t.Errorf("numaLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
