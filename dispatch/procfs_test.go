package dispatch

import (
	"os"
	"strconv"
	"testing"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/procfs"
	"golang.org/x/sys/unix"
)

// pidGuest is a guest whose thread is this test process's main thread,
// so that /proc/self and /proc/thread-self name real host entries.
type pidGuest struct{ memGuest }

func (g *pidGuest) Pid() int { return os.Getpid() }

// TestProcClassify: what each /proc path of the guest becomes. The
// calling guest process is this test process (its /proc entries are
// real); pid 1 is no guest process; pid 999999 is a guest process (known
// to the engine) with root's credentials, seen by a caller of uid 1000.
func TestProcClassify(t *testing.T) {
	self := os.Getpid()
	me := strconv.Itoa(self)
	for _, kproc := range []bool{false, true} {
		e := New(Options{HostRoutes: []string{"/proc", "/dev"}, ChangeID: true, UID: 1000, GID: 1000,
			KernelProc: 7, HasKernelProc: kproc})
		p := e.Start(self, "/tmp")
		other := &Proc{Tgid: 999999, FDs: e.newTable()}
		other.cred.Store(newProcCred(RootCred()))
		e.setProcs(func(m map[int]*Proc) { m[999999] = other })
		r := &Request{P: p, G: &pidGuest{}}
		type want struct {
			kind  procfs.Kind // 0: not a node
			host  bool        // a host path (Rel)
			rel   string      // Rel, or an LKL node's path beneath LKL's proc
			link  string      // a link's text
			image string      // an image path (Path)
			errno unix.Errno
		}
		lklOr := func(w want) want {
			if !kproc {
				return want{errno: unix.ENOENT}
			}
			return w
		}
		cases := []struct {
			path string
			want want
		}{
			{"/proc", want{kind: procfs.Dir}},
			{"/proc/self", want{kind: procfs.Link, link: me}},
			{"/proc/thread-self", want{kind: procfs.Link, link: me + "/task/" + me}},
			// Its parent (the test runner) is no guest process: a
			// text that shows it as 0.
			{"/proc/self/status", want{kind: procfs.Text}},
			{"/proc/self/stat", want{kind: procfs.Text}},
			{"/proc/self/oom_score_adj", want{kind: procfs.Text}},
			{"/proc/self/oom_adj", want{kind: procfs.Text}},
			{"/proc/self/oom_adj/x", want{errno: unix.ENOTDIR}},
			{"/proc/self/comm", want{host: true, rel: me + "/comm"}},
			{"/proc/" + me + "/cmdline", want{host: true, rel: me + "/cmdline"}},
			{"/proc/thread-self/comm", want{host: true, rel: me + "/task/" + me + "/comm"}},
			{"/proc/self/task", want{host: true, rel: me + "/task"}},
			{"/proc/self/root", want{kind: procfs.Link, link: "/"}},
			{"/proc/self/cwd", want{kind: procfs.Link, link: "/tmp"}},
			{"/proc/self/task/" + me + "/cwd", want{kind: procfs.Link, link: "/tmp"}},
			{"/proc/self/exe", want{errno: unix.ENOENT}}, // no program exec'd yet
			{"/proc/self/root/etc/passwd", want{image: "/etc/passwd"}},
			{"/proc/self/cwd/x/y", want{image: "/tmp/x/y"}},
			{"/proc/self/root/proc/self/root/etc", want{image: "/etc"}},
			{"/proc/self/fd", want{kind: procfs.Dir}},
			{"/proc/self/fdinfo", want{kind: procfs.Dir}},
			{"/proc/self/fdinfo/0", want{host: true, rel: me + "/fdinfo/0"}},
			{"/proc/self/fd/1023", want{errno: unix.ENOENT}},
			{"/proc/self/fd/2000", want{errno: unix.ENOENT}},
			{"/proc/self/fd/x", want{errno: unix.ENOENT}},
			{"/proc/self/fd/01", want{errno: unix.ENOENT}},
			{"/proc/self/mounts", want{kind: procfs.Text}},
			{"/proc/self/mountinfo", want{kind: procfs.Text}},
			{"/proc/self/mountstats", want{kind: procfs.Text}},
			{"/proc/self/mounts/x", want{errno: unix.ENOTDIR}},
			{"/proc/self/cgroup", want{kind: procfs.Text}},
			{"/proc/self/cpuset", want{kind: procfs.Text}},
			{"/proc/self/map_files", want{kind: procfs.Dir}},
			{"/proc/self/map_files/400000-401000", want{errno: unix.EACCES}},
			{"/proc/self/net/dev", lklOr(want{kind: procfs.LKL, rel: "self/net/dev"})},
			{"/proc/mounts", want{kind: procfs.Link, link: "self/mounts"}},
			{"/proc/net", want{kind: procfs.Link, link: "self/net"}},
			{"/proc/net/tcp", lklOr(want{kind: procfs.LKL, rel: "self/net/tcp"})},
			{"/proc/sys/kernel/hostname", lklOr(want{kind: procfs.LKL, rel: "sys/kernel/hostname"})},
			{"/proc/sys", lklOr(want{kind: procfs.LKL, rel: "sys"})},
			{"/proc/version", lklOr(want{kind: procfs.LKL, rel: "version"})},
			{"/proc/version/x", lklOr(want{errno: unix.ENOTDIR})},
			{"/proc/cpuinfo", want{host: true, rel: "cpuinfo"}},
			{"/proc/meminfo", want{host: true, rel: "meminfo"}},
			{"/proc/loadavg", want{kind: procfs.Text}},
			{"/proc/uptime", want{kind: procfs.Text}},
			{"/proc/stat", want{kind: procfs.Text}},
			{"/proc/kmsg", want{errno: unix.ENOENT}},
			{"/proc/kallsyms", want{errno: unix.ENOENT}},
			{"/proc/sysrq-trigger", want{errno: unix.ENOENT}},
			{"/proc/kcore", want{errno: unix.ENOENT}},
			{"/proc/sysvipc/shm", want{errno: unix.ENOENT}},
			{"/proc/1", want{errno: unix.ENOENT}},
			{"/proc/1/cmdline", want{errno: unix.ENOENT}},
			{"/proc/1/root/etc/passwd", want{errno: unix.ENOENT}},
			{"/proc/1/task/1/cwd", want{errno: unix.ENOENT}},
			{"/proc/01", want{errno: unix.ENOENT}},
			{"/proc/+1", want{errno: unix.ENOENT}},
			{"/proc/999999", want{host: true, rel: "999999"}},
			{"/proc/999999/status", want{kind: procfs.Text}},   // the guest's capability lines
			{"/proc/999999/environ", want{errno: unix.EACCES}}, // root's, and the caller is uid 1000
			{"/proc/999999/cwd", want{errno: unix.EACCES}},
			{"/proc/999999/fd", want{errno: unix.EACCES}},
		}
		for _, c := range cases {
			got, en := e.classify(r, c.path)
			w := c.want
			var bad bool
			switch {
			case en != w.errno:
				bad = true
			case en != 0:
			case w.kind != 0:
				bad = got.Proc == nil || got.Proc.Kind != w.kind || w.link != "" && got.Proc.Link != w.link ||
					w.kind == procfs.LKL && got.Proc.LKL != w.rel
			case w.host:
				bad = got.Proc != nil || !got.Host || got.Route != "/proc" || got.Rel != w.rel
			default:
				bad = got.Proc != nil || got.Host || got.Path != w.image
			}
			if bad {
				t.Errorf("kernel proc %v: %s: %+v (node %+v) %v, want %+v", kproc, c.path, got, got.Proc, en, w)
			}
		}
	}
}

// A node's Target reaches nothing on the host: a handler that does not
// know nodes fails instead of opening the route's root.
func TestProcNodeFailsClosed(t *testing.T) {
	n := procTarget("/proc/self/cwd", &procfs.Node{Kind: procfs.Link, Link: "/"})
	if _, err := guestpath.OpenHost(n, unix.O_RDONLY, 0); err != unix.ENOENT {
		t.Errorf("OpenHost of a node: %v, want ENOENT", err)
	}
	err := guestpath.At(n, false, func(int, string, int) error { return nil })
	if err != unix.ENOENT {
		t.Errorf("At of a node: %v, want ENOENT", err)
	}
}

// The fd listing and links of this process, through the engine: its host
// fds as the host lists them, a pipe as the kernel names it.
func TestProcFdList(t *testing.T) {
	e := New(Options{HostRoutes: []string{"/proc"}})
	self := os.Getpid()
	e.Start(self, "/")
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	fdDir, en := e.classify(&Request{P: e.procOf(self), G: &pidGuest{}}, "/proc/self/fd")
	if en != 0 || fdDir.Proc == nil || fdDir.Proc.List == nil {
		t.Fatalf("/proc/self/fd: %+v %v", fdDir, en)
	}
	found := false
	for _, d := range fdDir.Proc.List() {
		found = found || d.Name == strconv.Itoa(p[0])
	}
	if !found {
		t.Errorf("fd %d not listed", p[0])
	}
	ref, en := e.fdRefOf(self, p[1])
	if en != 0 || ref.Path != "" || ref.Outside || ref.Acc != unix.O_WRONLY || len(ref.Text) < 6 || ref.Text[:6] != "pipe:[" {
		t.Errorf("pipe's write end: %+v %v", ref, en)
	}
	if _, en := e.fdRefOf(self, 1023); en != unix.ENOENT {
		t.Errorf("a closed fd: %v", en)
	}
}
