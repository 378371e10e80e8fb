package supervisor

import (
	"testing"

	"github.com/kbox-project/kbox/seccomp"
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
		name string
		fd   uint64
		want uint32
	}{
		{"openat", 0, notify},
		{"newfstatat", 0, notify},
		{"execve", 0, notify},
		{"exit_group", 0, notify}, // shadows are written back at exit
		{"getpid", 0, allow},
		{"mmap", 0, allow},
		{"clone", 0, allow},
		{"read", 3, allow},       // host fd (pipe, terminal, shadow memfd): native
		{"read", 1024, notify},   // virtual fd: served by kbox
		{"getdents64", 3, allow}, // a directory from a host route
		{"getdents64", 1030, notify},
		{"fchmod", 1030, notify},
		{"fsync", 3, notify}, // a writable shadow is written back
		{"fdatasync", 3, notify},
		{"reboot", 0, seccomp.RetErrno | 1},
		{"bpf", 0, seccomp.RetErrno | 1},
	} {
		nr, ok := p.Arch.Nr(c.name)
		if !ok {
			t.Errorf("%s: no syscall %s", p.Arch.Name, c.name)
			continue
		}
		if got := p.Decide(nr, p.Arch.AuditArch, [6]uint64{c.fd}); got != c.want {
			t.Errorf("%s %s(fd %d) = %#x, want %#x", p.Arch.Name, c.name, c.fd, got, c.want)
		}
	}
}
