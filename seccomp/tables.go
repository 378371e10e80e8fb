//go:build linux

package seccomp

import (
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Arch describes one syscall ABI the filter can be built for. Its numbers
// are kbox's own tables (nr_x86_64.go, nr_aarch64.go), generated from the
// kernel's UAPI headers by TestSyscallNumbers, and compiled on every host,
// so that a filter for either architecture can be built and simulated
// anywhere. They are static data: nothing is built at start-up.
type Arch struct {
	Name      string
	AuditArch uint32
	// X32Bit is non-zero on x86_64: syscall numbers with this bit set belong
	// to the x32 ABI, which the filter refuses with ENOSYS.
	X32Bit uint32
	// names holds the kernel's name of each number ("" where there is
	// none).
	names  []string
	byName func() map[string]uint32
}

func newArch(name string, audit, x32 uint32, names []string) *Arch {
	a := &Arch{Name: name, AuditArch: audit, X32Bit: x32, names: names}
	a.byName = sync.OnceValue(func() map[string]uint32 {
		m := make(map[string]uint32, len(names))
		for nr, n := range names {
			if n != "" {
				m[n] = uint32(nr)
			}
		}
		return m
	})
	return a
}

// The architectures kbox supports.
var (
	ArchX86_64  = newArch("x86_64", unix.AUDIT_ARCH_X86_64, 0x40000000, x86_64Names[:])
	ArchAArch64 = newArch("aarch64", unix.AUDIT_ARCH_AARCH64, 0, aarch64Names[:])
)

// NativeArch returns the Arch of the running binary, or nil if kbox does not
// support it.
func NativeArch() *Arch {
	switch runtime.GOARCH {
	case "amd64":
		return ArchX86_64
	case "arm64":
		return ArchAArch64
	}
	return nil
}

// Nr returns the number of syscall name on a, and whether it exists there.
func (a *Arch) Nr(name string) (uint32, bool) {
	nr, ok := a.byName()[name]
	return nr, ok
}

// Len is one more than a's highest syscall number.
func (a *Arch) Len() int { return len(a.names) }

// SyscallName returns the kernel's name of syscall number nr on a, or ""
// where a has none.
func (a *Arch) SyscallName(nr int) string {
	if nr < 0 || nr >= len(a.names) {
		return ""
	}
	return a.names[nr]
}

// Names returns the kernel's name of each syscall number of a.
func (a *Arch) Names() map[int]string {
	m := make(map[int]string, len(a.names))
	for nr, n := range a.names {
		if n != "" {
			m[nr] = n
		}
	}
	return m
}

// knownName reports whether name is a syscall on any supported arch.
func knownName(name string) bool {
	_, a := ArchX86_64.Nr(name)
	_, b := ArchAArch64.Nr(name)
	return a || b
}

// Terminal ioctls refused by the ioctl guard.
const (
	ioctlTIOCSTI   = 0x5412
	ioctlTIOCLINUX = 0x541C
)

// fcntl commands that make a new fd at or above their argument (the same
// numbers on every architecture): with a minimum at or above the virtual
// fd base, the new fd is virtual, so the fcntl guard notifies them.
const (
	fcntlDupfd        = unix.F_DUPFD
	fcntlDupfdCloexec = unix.F_DUPFD_CLOEXEC
)

// The seal commands, F_ADD_SEALS and F_GET_SEALS (adjacent numbers):
// notified on every fd, since a shadow of an image file is a memfd whose
// seals an ext4 file does not have.
const (
	fcntlAddSeals = unix.F_ADD_SEALS
	fcntlGetSeals = unix.F_GET_SEALS
)

func checkNames(list string, names []string) error {
	for _, n := range names {
		if !knownName(n) {
			return fmt.Errorf("seccomp: %s: unknown syscall %q", list, n)
		}
	}
	return nil
}
