package supervisor

import (
	"fmt"
	"sort"
	"testing"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/seccomp"
	"golang.org/x/sys/unix"
)

// TestPolicyRoutes checks the seccomp tier's filter for the native
// architecture (make test-arm64 runs it for aarch64 too): it assembles,
// and the reference model routes each class of syscall where the tier
// expects it.
func TestPolicyRoutes(t *testing.T) {
	p := Policy(1024)
	prog, err := p.Assemble()
	if err != nil || len(prog) == 0 {
		t.Fatalf("assemble for %s: %v", p.Arch.Name, err)
	}
	notify, allow := uint32(seccomp.RetUserNotif), uint32(seccomp.RetAllow)
	for _, c := range []struct {
		name     string
		fd       uint64
		want     uint32
		cmd, arg uint64 // args[1] and args[2]
	}{
		{"openat", 0, notify, 0, 0},
		{"newfstatat", 0, notify, 0, 0},
		{"execve", 0, notify, 0, 0},
		{"exit_group", 0, notify, 0, 0}, // shadows are written back at exit
		{"getpid", 0, allow, 0, 0},
		{"mmap", 0, allow, 0, 0},
		{"clone", 0, notify, 0, 0},             // a pinned parent is unpinned first (colocate.go)
		{"sched_getaffinity", 0, notify, 0, 0}, // a pinned task sees its own mask
		{"read", 3, allow, 0, 0},               // host fd (pipe, terminal, shadow memfd): native
		{"read", 1024, notify, 0, 0},           // virtual fd: served by kbox
		{"getdents64", 3, allow, 0, 0},         // a directory from a host route
		{"getdents64", 1030, notify, 0, 0},
		{"fchmod", 1030, notify, 0, 0},
		{"fsync", 3, notify, 0, 0}, // a writable shadow is written back
		{"fdatasync", 3, notify, 0, 0},
		{"fcntl", 3, allow, unix.F_SETFL, unix.O_APPEND | unix.O_NONBLOCK},
		{"fcntl", 0, allow, unix.F_DUPFD_CLOEXEC, 10},
		{"fcntl", 0, notify, unix.F_DUPFD_CLOEXEC, 1025}, // busybox sh saving fd 0 above a virtual fd
		{"fcntl", 1030, notify, unix.F_GETFL, 0},
		{"sethostname", 0, notify, 0, 0},     // LKL's name (dispatch/sys.go)
		{"setdomainname", 0, notify, 0, 0},   // LKL's name
		{"umask", 0, notify, 0, 0},           // kept for creates in LKL (dispatch/umask.go)
		{"personality", 0, allow, 0, 0},      // takes effect at the host's exec
		{"set_tid_address", 0, notify, 0, 0}, // a new program's first syscall (dispatch/exec.go)
		{"reboot", 0, seccomp.RetErrno | 1, 0, 0},
		{"bpf", 0, seccomp.RetErrno | 1, 0, 0},
	} {
		nr, ok := p.Arch.Nr(c.name)
		if !ok {
			t.Errorf("%s: no syscall %s", p.Arch.Name, c.name)
			continue
		}
		if got := p.Decide(nr, p.Arch.AuditArch, [6]uint64{c.fd, c.cmd, c.arg}); got != c.want {
			t.Errorf("%s %s(fd %d, %d, %d) = %#x, want %#x", p.Arch.Name, c.name, c.fd, c.cmd, c.arg, got, c.want)
		}
	}
}

// TestEverySyscallHasADisposition: every syscall number of the native
// architecture (make test-arm64 runs this for aarch64) runs natively
// (allowed, or host-fd-only), is refused in the filter, or has a handler
// (which may answer it as absent, dispatch/absent.go): ENOSYS is always a
// decision, never an omission. And no syscall is both allowed or refused
// in the filter and handled: such a handler could never run.
func TestEverySyscallHasADisposition(t *testing.T) {
	a := seccomp.NativeArch()
	if a == nil {
		t.Skip("unsupported arch")
	}
	p := Policy(1024)
	set := func(l []string) map[string]bool {
		m := map[string]bool{}
		for _, n := range l {
			m[n] = true
		}
		return m
	}
	allow, hostFD, deny := set(p.Allow), set(p.HostFD), set(p.Deny)
	var missing, dead []string
	for nr, name := range a.Names() {
		handled := dispatch.Handled(nr)
		switch {
		case (allow[name] || deny[name]) && handled:
			dead = append(dead, name)
		case !allow[name] && !hostFD[name] && !deny[name] && !handled:
			missing = append(missing, fmt.Sprintf("%s (%d)", name, nr))
		}
	}
	sort.Strings(missing)
	sort.Strings(dead)
	if len(missing) > 0 {
		t.Errorf("%s: %d syscalls have no disposition: %v", a.Name, len(missing), missing)
	}
	if len(dead) > 0 {
		t.Errorf("%s: handlers that can never run (allowed or refused in the filter): %v", a.Name, dead)
	}
}
