package dispatch

import (
	"testing"

	"github.com/kbox-project/kbox/guestpath"
	"golang.org/x/sys/unix"
)

// Syscalls without a handler are answered as the table says, and those
// answered ENOSYS (absent, or no syscall at all) are counted.
func TestENOSYSCounted(t *testing.T) {
	e := New(Options{})
	const absent = unix.SYS_LANDLOCK_CREATE_RULESET // absent: ENOSYS on every kernel
	const refused = unix.SYS_ADD_KEY                // refused in BPF: EPERM if a tier lets it through
	const none = 500                                // no syscall of either architecture
	for i := 0; i < 3; i++ {
		if res := e.Dispatch(&Request{Nr: absent}); res.Errno != unix.ENOSYS || res.Disp != ENOSYS || res.Action != Return {
			t.Fatalf("absent syscall answered %+v", res)
		}
	}
	if res := e.Dispatch(&Request{Nr: refused}); res.Errno != unix.EPERM || res.Disp != Denied {
		t.Errorf("refused syscall answered %+v", res)
	}
	if res := e.Dispatch(&Request{Nr: none}); res.Errno != unix.ENOSYS {
		t.Errorf("unknown number answered %+v", res)
	}
	if res := e.Dispatch(&Request{Nr: MaxNr + 5}); res.Errno != unix.ENOSYS {
		t.Errorf("out-of-table number answered %+v", res)
	}
	if got := e.ENOSYSCounts(); got[absent] != 3 || got[none] != 1 || len(got) != 2 {
		t.Errorf("ENOSYS counts %v, want {%d: 3, %d: 1}", got, absent, none)
	}
}

// Host routes other than /proc are served from the host beneath the
// route; /proc is kbox's own (procfs_test.go), /dev LKL's (sys_file_dev.go).
func TestHostRoutes(t *testing.T) {
	e := New(Options{HostRoutes: []string{"/proc", guestpath.CPURoute}, Dev: true})
	r := &Request{P: &Proc{Tgid: 4242}, G: &memGuest{}}
	cases := []struct {
		path  string
		host  bool
		rel   string
		errno unix.Errno
	}{
		{"/etc/hostname", false, "", 0},
		{"/procfs/x", false, "", 0}, // a prefix, not the route
		{"/dev/null", false, "", 0}, // LKL's /dev (sys_file_dev.go)
		{"/sys/class/net", false, "", 0},
		{"/sys/devices/system/cpu", true, ".", 0},
		{"/sys/devices/system/cpu/cpu0/topology/core_id", true, "cpu0/topology/core_id", 0},
		{"/sys/devices/system/cpufreq", false, "", 0},
		{"/proc/self/statm", true, "4242/statm", 0},
		{"/proc/self/fdinfo/0", true, "4242/fdinfo/0", 0},
	}
	for _, c := range cases {
		got, en := e.classify(r, c.path)
		if en != c.errno || en == 0 && (got.Host != c.host || got.Rel != c.rel || got.Proc != nil) {
			t.Errorf("%s: %+v %v, want host=%v rel=%q errno=%v", c.path, got, en, c.host, c.rel, c.errno)
		}
	}
}
