//go:build linux

package seccomp

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// vmInput serializes seccomp_data for x/net/bpf's VM. The kernel loads
// 32-bit words of seccomp_data in native (little-endian) order while the VM
// loads them big-endian, so each aligned word is stored big-endian at the
// offset where the little-endian kernel would find it.
func vmInput(d *SeccompData) []byte {
	b := make([]byte, SizeofSeccompData)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(d.Nr))
	be.PutUint32(b[4:], d.Arch)
	be.PutUint32(b[8:], uint32(d.InstructionPointer))
	be.PutUint32(b[12:], uint32(d.InstructionPointer>>32))
	for i, a := range d.Args {
		be.PutUint32(b[16+8*i:], uint32(a))
		be.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

func newVM(t testing.TB, p *Policy) *bpf.VM {
	t.Helper()
	prog, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func run(t testing.TB, vm *bpf.VM, d *SeccompData) uint32 {
	t.Helper()
	v, err := vm.Run(vmInput(d))
	if err != nil {
		t.Fatal(err)
	}
	return uint32(v)
}

func policyFor(a *Arch) *Policy {
	p := samplePolicy()
	p.Arch = a
	return p
}

func retName(v uint32) string {
	switch v & RetActionFull {
	case RetKillProcess:
		return "KILL_PROCESS"
	case RetAllow:
		return "ALLOW"
	case RetUserNotif:
		return "USER_NOTIF"
	case RetErrno:
		return fmt.Sprintf("ERRNO(%d)", v&RetData)
	}
	return fmt.Sprintf("%#x", v)
}

func TestFilterTable(t *testing.T) {
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		t.Run(a.Name, func(t *testing.T) {
			p := policyFor(a)
			vm := newVM(t, p)
			prog, _ := p.Build()
			t.Logf("%s: %d instructions", a.Name, len(prog))
			nr := func(name string) int32 {
				n, ok := a.Nr(name)
				if !ok {
					t.Fatalf("no %s on %s", name, a.Name)
				}
				return int32(n)
			}
			eperm := RetErrno | uint32(unix.EPERM)
			base := uint64(p.VirtualFDBase)
			type tc struct {
				name string
				d    SeccompData
				want uint32
			}
			cases := []tc{
				{"wrong arch", SeccompData{Nr: nr("getpid"), Arch: unix.AUDIT_ARCH_I386}, RetKillProcess},
				{"wrong arch allowed nr", SeccompData{Nr: nr("futex"), Arch: 0}, RetKillProcess},
				{"openat", SeccompData{Nr: nr("openat"), Arch: a.AuditArch}, RetUserNotif},
				{"getpid notified", SeccompData{Nr: nr("getpid"), Arch: a.AuditArch}, RetUserNotif},
				{"read fd 1", SeccompData{Nr: nr("read"), Arch: a.AuditArch, Args: [6]uint64{1}}, RetAllow},
				{"write fd base-1", SeccompData{Nr: nr("write"), Arch: a.AuditArch, Args: [6]uint64{base - 1}}, RetAllow},
				{"read fd base", SeccompData{Nr: nr("read"), Arch: a.AuditArch, Args: [6]uint64{base}}, RetUserNotif},
				{"read virtual fd", SeccompData{Nr: nr("read"), Arch: a.AuditArch, Args: [6]uint64{base + 3}}, RetUserNotif},
				{"read fd -1 (32-bit)", SeccompData{Nr: nr("read"), Arch: a.AuditArch, Args: [6]uint64{0xFFFFFFFF}}, RetUserNotif},
				{"read fd -1 (64-bit)", SeccompData{Nr: nr("read"), Arch: a.AuditArch, Args: [6]uint64{^uint64(0)}}, RetUserNotif},
				// High bits are ignored by the kernel for int fds; only the low word counts.
				{"read fd 1 with junk high bits", SeccompData{Nr: nr("read"), Arch: a.AuditArch, Args: [6]uint64{1 | 0xdead<<32}}, RetAllow},
				{"ioctl host fd", SeccompData{Nr: nr("ioctl"), Arch: a.AuditArch, Args: [6]uint64{0, unix.TCGETS}}, RetAllow},
				{"ioctl TIOCSTI", SeccompData{Nr: nr("ioctl"), Arch: a.AuditArch, Args: [6]uint64{0, unix.TIOCSTI}}, eperm},
				{"ioctl TIOCLINUX virtual", SeccompData{Nr: nr("ioctl"), Arch: a.AuditArch, Args: [6]uint64{base + 1, 0x541C}}, eperm},
				{"ioctl virtual fd", SeccompData{Nr: nr("ioctl"), Arch: a.AuditArch, Args: [6]uint64{base + 1, unix.TCGETS}}, RetUserNotif},
				{"nr 0xFFFFFFFF", SeccompData{Nr: -1, Arch: a.AuditArch}, p.Decide(0xFFFFFFFF, a.AuditArch, [6]uint64{})},
			}
			if a == ArchX86_64 {
				cases = append(cases,
					tc{"x32 read", SeccompData{Nr: 0x40000000, Arch: a.AuditArch}, RetErrno | uint32(unix.ENOSYS)},
					tc{"x32 top", SeccompData{Nr: 0x7FFFFFFF, Arch: a.AuditArch}, RetErrno | uint32(unix.ENOSYS)},
					tc{"nr -1", SeccompData{Nr: -1, Arch: a.AuditArch}, RetErrno | uint32(unix.ENOSYS)},
				)
			} else {
				cases = append(cases, tc{"large nr", SeccompData{Nr: 0x40000000, Arch: a.AuditArch}, RetUserNotif})
			}
			for _, name := range sampleAllow {
				if n, ok := a.Nr(name); ok {
					cases = append(cases, tc{"allow " + name, SeccompData{Nr: int32(n), Arch: a.AuditArch}, RetAllow})
				}
			}
			type denied struct {
				Name string
				Nr   uint32
			}
			var deny []denied
			for _, n := range sampleDeny {
				if nr, ok := a.Nr(n); ok {
					deny = append(deny, denied{n, nr})
				}
			}
			if len(deny) < 50 {
				t.Errorf("deny list has %d entries, want >= 50", len(deny))
			}
			for _, s := range deny {
				cases = append(cases, tc{"deny " + s.Name, SeccompData{Nr: int32(s.Nr), Arch: a.AuditArch, Args: [6]uint64{1}}, eperm})
			}
			for _, c := range cases {
				got := run(t, vm, &c.d)
				if got != c.want {
					t.Errorf("%s: got %s want %s", c.name, retName(got), retName(c.want))
				}
				if o := p.Decide(uint32(c.d.Nr), c.d.Arch, c.d.Args); o != got {
					t.Errorf("%s: oracle %s, program %s", c.name, retName(o), retName(got))
				}
			}
		})
	}
}

// TestFilterExhaustive compares program and oracle on every syscall number
// up to 1024 plus boundaries, for host and virtual fds, on both arches.
func TestFilterExhaustive(t *testing.T) {
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		p := policyFor(a)
		vm := newVM(t, p)
		for nr := uint32(0); nr < 1100; nr++ {
			for _, fd := range []uint64{0, 2, uint64(p.VirtualFDBase) - 1, uint64(p.VirtualFDBase), 0xFFFFFFFF} {
				d := SeccompData{Nr: int32(nr), Arch: a.AuditArch, Args: [6]uint64{fd, unix.TIOCSTI}}
				if got, want := run(t, vm, &d), p.Decide(nr, a.AuditArch, d.Args); got != want {
					t.Fatalf("%s nr=%d fd=%d: program %s, oracle %s", a.Name, nr, fd, retName(got), retName(want))
				}
			}
		}
	}
}

// TestFilterFcntlDupfd: fcntl(F_DUPFD or F_DUPFD_CLOEXEC) of a host fd with
// a minimum at or above the virtual base is notified (the new fd is
// virtual); every other fcntl of a host fd stays native, whatever its
// argument, and any fcntl of a virtual fd is notified. Only the low 32
// bits of fd, cmd and minimum count, as in the kernel.
func TestFilterFcntlDupfd(t *testing.T) {
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		p := policyFor(a)
		vm := newVM(t, p)
		nr, _ := a.Nr("fcntl")
		base := uint64(p.VirtualFDBase)
		hi := uint64(0xdead) << 32
		for _, c := range []struct {
			name          string
			fd, cmd, arg3 uint64
			want          uint32
		}{
			{"F_DUPFD_CLOEXEC min base+1 (busybox sh)", 0, unix.F_DUPFD_CLOEXEC, base + 1, RetUserNotif},
			{"F_DUPFD min base", 3, unix.F_DUPFD, base, RetUserNotif},
			{"F_DUPFD min -1", 3, unix.F_DUPFD, 0xFFFFFFFF, RetUserNotif},
			{"F_DUPFD min base, junk high cmd bits", 3, unix.F_DUPFD | hi, base, RetUserNotif},
			{"F_DUPFD min 10", 1, unix.F_DUPFD, 10, RetAllow},
			{"F_DUPFD_CLOEXEC min base-1", 1, unix.F_DUPFD_CLOEXEC, base - 1, RetAllow},
			{"F_DUPFD min 5, junk high bits", 1, unix.F_DUPFD, 5 | hi, RetAllow},
			{"F_GETFL", 1, unix.F_GETFL, 0, RetAllow},
			{"F_SETFL O_APPEND|O_NONBLOCK (above base as a number)", 1, unix.F_SETFL, unix.O_APPEND | unix.O_NONBLOCK, RetAllow},
			{"F_SETFD FD_CLOEXEC", 1, unix.F_SETFD, unix.FD_CLOEXEC, RetAllow},
			{"F_SETLK", 1, unix.F_SETLK, base + 7, RetAllow},
			{"F_GET_SEALS (a shadow is a memfd)", 1, unix.F_GET_SEALS, 0, RetUserNotif},
			{"F_ADD_SEALS", 4, unix.F_ADD_SEALS, unix.F_SEAL_WRITE, RetUserNotif},
			{"F_GET_RW_HINT, after the seal commands", 1, unix.F_GET_RW_HINT, 0, RetAllow},
			{"F_GETFL virtual fd", base, unix.F_GETFL, 0, RetUserNotif},
			{"F_DUPFD virtual fd min 0", base + 2, unix.F_DUPFD, 0, RetUserNotif},
			{"F_DUPFD fd -1", 0xFFFFFFFF, unix.F_DUPFD, 0, RetUserNotif},
		} {
			d := SeccompData{Nr: int32(nr), Arch: a.AuditArch, Args: [6]uint64{c.fd, c.cmd, c.arg3}}
			got := run(t, vm, &d)
			if got != c.want {
				t.Errorf("%s %s: got %s want %s", a.Name, c.name, retName(got), retName(c.want))
			}
			if o := p.Decide(nr, a.AuditArch, d.Args); o != got {
				t.Errorf("%s %s: oracle %s, program %s", a.Name, c.name, retName(o), retName(got))
			}
		}
		// Every command and boundary, program against oracle.
		for cmd := uint64(0); cmd < 1100; cmd++ {
			for _, fd := range []uint64{0, base - 1, base} {
				for _, arg := range []uint64{0, base - 1, base, 0xFFFFFFFF} {
					d := SeccompData{Nr: int32(nr), Arch: a.AuditArch, Args: [6]uint64{fd, cmd, arg}}
					if got, want := run(t, vm, &d), p.Decide(nr, a.AuditArch, d.Args); got != want {
						t.Fatalf("%s fcntl(%d, %d, %d): program %s, oracle %s", a.Name, fd, cmd, arg, retName(got), retName(want))
					}
				}
			}
		}
	}
}

func TestArchTables(t *testing.T) {
	// Spot-check the borrowed number tables against x/sys/unix for the
	// native arch.
	a := NativeArch()
	for name, want := range map[string]uint32{
		"reboot": unix.SYS_REBOOT, "getppid": unix.SYS_GETPPID, "unshare": unix.SYS_UNSHARE,
		"read": unix.SYS_READ, "ioctl": unix.SYS_IOCTL, "openat": unix.SYS_OPENAT,
		"io_uring_setup": unix.SYS_IO_URING_SETUP, "memfd_secret": unix.SYS_MEMFD_SECRET,
	} {
		if got, _ := a.Nr(name); got != want {
			t.Errorf("%s: table says %d, x/sys/unix says %d", name, got, want)
		}
	}
}

func TestPolicyValidation(t *testing.T) {
	p := samplePolicy()
	p.Allow = append(p.Allow, "reboot")
	if _, err := p.Build(); err == nil {
		t.Error("reboot in Deny and Allow accepted")
	}
	p = samplePolicy()
	p.HostFD = append(p.HostFD, "no_such_syscall")
	if _, err := p.Build(); err == nil {
		t.Error("unknown syscall accepted")
	}
	p = samplePolicy()
	p.HostFD = nil
	p.Allow = append(p.Allow, "ioctl")
	if _, err := p.Build(); err == nil {
		t.Error("ioctl in Allow accepted")
	}
	p = samplePolicy()
	p.HostFD = []string{"ioctl"}
	p.Allow = append(p.Allow, "fcntl")
	if _, err := p.Build(); err == nil {
		t.Error("fcntl in Allow accepted")
	}
	// Long jumps: a policy with many scattered entries forces trampolines.
	p = samplePolicy()
	p.Deny = nil
	p.Allow = nil
	hostfd := map[string]bool{}
	for _, n := range p.HostFD {
		hostfd[n] = true
	}
	for nr, name := range p.Arch.Names() {
		if nr%2 == 0 && !hostfd[name] {
			p.Allow = append(p.Allow, name)
		}
	}
	vm := newVM(t, p)
	prog, _ := p.Build()
	t.Logf("scattered policy: %d instructions", len(prog))
	for nr := uint32(0); nr < 600; nr++ {
		d := SeccompData{Nr: int32(nr), Arch: p.Arch.AuditArch}
		if got, want := run(t, vm, &d), p.Decide(nr, p.Arch.AuditArch, d.Args); got != want {
			t.Fatalf("nr=%d: program %s, oracle %s", nr, retName(got), retName(want))
		}
	}
}

// FDArg: epoll_ctl runs natively only while both its fds, arguments 0
// and 2, are below the virtual base; the program agrees with the oracle
// for every syscall with a virtual fd in each position.
func TestFilterSecondFD(t *testing.T) {
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		p := policyFor(a)
		var allow []string
		for _, n := range p.Allow {
			if n != "epoll_ctl" {
				allow = append(allow, n)
			}
		}
		p.Allow, p.HostFD = allow, append(p.HostFD, "epoll_ctl")
		p.FDArg = map[string]int{"epoll_ctl": 2}
		vm := newVM(t, p)
		nr, _ := a.Nr("epoll_ctl")
		base := uint64(p.VirtualFDBase)
		for _, c := range []struct {
			name     string
			epfd, fd uint64
			want     uint32
		}{
			{"both host fds", 3, 4, RetAllow},
			{"virtual target", 3, base, RetUserNotif},
			{"virtual epoll fd", base + 1, 4, RetUserNotif},
			{"both virtual", base, base + 2, RetUserNotif},
			{"target's high half ignored", 3, 4 | 1<<40, RetAllow},
		} {
			d := SeccompData{Nr: int32(nr), Arch: a.AuditArch, Args: [6]uint64{c.epfd, 1, c.fd, 0x1000}}
			got := run(t, vm, &d)
			if got != c.want {
				t.Errorf("%s %s: got %s want %s", a.Name, c.name, retName(got), retName(c.want))
			}
			if o := p.Decide(nr, a.AuditArch, d.Args); o != got {
				t.Errorf("%s %s: oracle %s, program %s", a.Name, c.name, retName(o), retName(got))
			}
		}
		for n := uint32(0); n < 500; n++ {
			for i := 0; i < 6; i++ {
				args := [6]uint64{3, 4, 5, 6, 7, 8}
				args[i] = base + 3
				d := SeccompData{Nr: int32(n), Arch: a.AuditArch, Args: args}
				if got, want := run(t, vm, &d), p.Decide(n, a.AuditArch, d.Args); got != want {
					t.Fatalf("%s nr %d arg %d: program %s, oracle %s", a.Name, n, i, retName(got), retName(want))
				}
			}
		}
		for _, bad := range []map[string]int{{"read": 0}, {"epoll_create1": 2}, {"sendto": 2}} {
			q := policyFor(a)
			q.FDArg = bad
			if _, err := q.Build(); err == nil {
				t.Errorf("%s: FDArg %v accepted", a.Name, bad)
			}
		}
	}
}

func FuzzFilter(f *testing.F) {
	native := NativeArch()
	f.Add(uint32(0), native.AuditArch, uint64(1), uint64(0), uint64(0))
	f.Add(uint32(16), native.AuditArch, uint64(0), uint64(unix.TIOCSTI), uint64(0))
	f.Add(uint32(0x40000001), native.AuditArch, uint64(1<<20), uint64(0), uint64(7))
	f.Add(uint32(169), uint32(unix.AUDIT_ARCH_I386), uint64(0xFFFFFFFF), uint64(1), uint64(0))
	f.Add(uint32(0xFFFFFFFF), native.AuditArch, uint64(DefaultVirtualFDBase), uint64(0), uint64(0))

	type target struct {
		p  *Policy
		vm *bpf.VM
	}
	var targets []target
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		p := policyFor(a)
		targets = append(targets, target{p, newVM(f, p)})
		// And with --net's ioctl commands and the device ranges.
		p = policyFor(a)
		p.IoctlNotify = []uint32{0x541b, 0x5411}
		p.IoctlNotifyRanges = [][2]uint32{{0x890b, 0x89ff}, {0x8b00, 0x8bff}}
		targets = append(targets, target{p, newVM(f, p)})
	}
	f.Add(uint32(16), native.AuditArch, uint64(3), uint64(0x8927), uint64(0))
	valid := func(v uint32) bool {
		switch v {
		case RetKillProcess, RetAllow, RetUserNotif,
			RetErrno | uint32(unix.EPERM), RetErrno | uint32(unix.ENOSYS):
			return true
		}
		return false
	}
	f.Fuzz(func(t *testing.T, nr, arch uint32, a0, a1, ip uint64) {
		for _, tg := range targets {
			// Once with the fuzzed arch, once with the target's own so the
			// syscall-number space is explored past the arch check.
			for _, ar := range []uint32{arch, tg.p.Arch.AuditArch} {
				d := SeccompData{Nr: int32(nr), Arch: ar, InstructionPointer: ip, Args: [6]uint64{a0, a1, ip}}
				got := run(t, tg.vm, &d)
				if !valid(got) {
					t.Fatalf("%s: unexpected verdict %#x", tg.p.Arch.Name, got)
				}
				if want := tg.p.Decide(nr, ar, d.Args); got != want {
					t.Fatalf("%s nr=%#x arch=%#x args=%#x,%#x: program %s, oracle %s",
						tg.p.Arch.Name, nr, ar, a0, a1, retName(got), retName(want))
				}
			}
		}
	})
}

// TestFilterSendtoAddress: sendto on a host fd runs natively without a
// destination address (send(2) is sendto with NULL) and is notified with
// one, whatever half of the pointer is set; on a virtual fd it is always
// notified.
func TestFilterSendtoAddress(t *testing.T) {
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		p := policyFor(a)
		vm := newVM(t, p)
		nr, _ := a.Nr("sendto")
		base := uint64(p.VirtualFDBase)
		for _, c := range []struct {
			name     string
			fd, addr uint64
			want     uint32
		}{
			{"send on a host fd", 3, 0, RetAllow},
			{"sendto with an address", 3, 0x7ffd12345678, RetUserNotif},
			{"address in the low half only", 3, 0x1000, RetUserNotif},
			{"address in the high half only", 3, 1 << 40, RetUserNotif},
			{"virtual fd, no address", base, 0, RetUserNotif},
			{"virtual fd, address", base + 1, 0x1000, RetUserNotif},
		} {
			d := SeccompData{Nr: int32(nr), Arch: a.AuditArch, Args: [6]uint64{c.fd, 0x1000, 10, 0, c.addr, 110}}
			got := run(t, vm, &d)
			if got != c.want {
				t.Errorf("%s %s: got %s want %s", a.Name, c.name, retName(got), retName(c.want))
			}
			if o := p.Decide(nr, a.AuditArch, d.Args); o != got {
				t.Errorf("%s %s: oracle %s, program %s", a.Name, c.name, retName(o), retName(got))
			}
		}
		// Program against oracle for every syscall with an argument set
		// in each position.
		for n := uint32(0); n < 500; n++ {
			for i := 0; i < 6; i++ {
				args := [6]uint64{3}
				args[i] |= 0x10 << 32
				d := SeccompData{Nr: int32(n), Arch: a.AuditArch, Args: args}
				if got, want := run(t, vm, &d), p.Decide(n, a.AuditArch, d.Args); got != want {
					t.Fatalf("%s nr %d arg %d: program %s, oracle %s", a.Name, n, i, retName(got), retName(want))
				}
			}
		}
	}
}

// TestFilterNullFlags: with NullFlags, a NullArg syscall on a host fd
// without an address is notified when its flags argument has one of the
// bits (recvfrom with MSG_ERRQUEUE), and runs natively with other flags.
func TestFilterNullFlags(t *testing.T) {
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		p := policyFor(a)
		p.NullFlags, p.NullFlagsArg = unix.MSG_ERRQUEUE, 3
		vm := newVM(t, p)
		nr, _ := a.Nr("sendto")
		for _, c := range []struct {
			name        string
			flags, addr uint64
			want        uint32
		}{
			{"no flags", 0, 0, RetAllow},
			{"other flags", unix.MSG_PEEK | unix.MSG_DONTWAIT, 0, RetAllow},
			{"the flag", unix.MSG_ERRQUEUE, 0, RetUserNotif},
			{"the flag among others", unix.MSG_ERRQUEUE | unix.MSG_PEEK, 0, RetUserNotif},
			{"the flag in the high half only", unix.MSG_ERRQUEUE << 32, 0, RetAllow},
			{"an address", 0, 0x1000, RetUserNotif},
		} {
			d := SeccompData{Nr: int32(nr), Arch: a.AuditArch, Args: [6]uint64{3, 0x1000, 10, c.flags, c.addr, 110}}
			got := run(t, vm, &d)
			if got != c.want {
				t.Errorf("%s %s: got %s want %s", a.Name, c.name, retName(got), retName(c.want))
			}
			if o := p.Decide(nr, a.AuditArch, d.Args); o != got {
				t.Errorf("%s %s: oracle %s, program %s", a.Name, c.name, retName(o), retName(got))
			}
		}
	}
}

// TestFilterTrusted: the in-process tier's form of the policy (package
// trap): Notify is SECCOMP_RET_TRAP, a Notify or Deny verdict for a
// syscall made from a trusted range is ALLOW, a syscall made elsewhere gets
// the verdict (the deny list included), and every F_DUPFD is trapped.
// Program against oracle on every number, at addresses in, at the edges of
// and outside the ranges.
func TestFilterTrusted(t *testing.T) {
	ranges := SplitRanges([]IPRange{{0x5555_0000_1000, 0x5555_0002_0000}, {0x7fff_ffff_f000, 0x8000_0000_2000}})
	if len(ranges) != 3 {
		t.Fatalf("SplitRanges: %x", ranges)
	}
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		p := policyFor(a)
		p.Notify = unix.SECCOMP_RET_TRAP
		p.Trusted = ranges
		p.DupfdAlways = true
		vm := newVM(t, p)
		ips := []uint64{0, 0x400000, 0x5555_0000_0fff, 0x5555_0000_1000, 0x5555_0001_ffff, 0x5555_0002_0000,
			0x4555_0000_1000, 0x7fff_ffff_efff, 0x7fff_ffff_f000, 0x8000_0000_0000, 0x8000_0000_1fff, 0x8000_0000_2000}
		for nr := uint32(0); nr < 1100; nr += 1 {
			for _, ip := range ips {
				for _, fd := range []uint64{0, uint64(p.VirtualFDBase)} {
					d := SeccompData{Nr: int32(nr), Arch: a.AuditArch, InstructionPointer: ip, Args: [6]uint64{fd, unix.F_DUPFD, 3}}
					if got, want := run(t, vm, &d), p.DecideAt(nr, a.AuditArch, ip, d.Args); got != want {
						t.Fatalf("%s nr=%d ip=%#x fd=%d: program %s, oracle %s", a.Name, nr, ip, fd, retName(got), retName(want))
					}
				}
			}
		}
		reboot, _ := a.Nr("reboot")
		fcntl, _ := a.Nr("fcntl")
		openat, _ := a.Nr("openat")
		for _, c := range []struct {
			name string
			nr   uint32
			ip   uint64
			args [6]uint64
			want uint32
		}{
			{"denied, guest code", reboot, 0x400000, [6]uint64{}, RetErrno | uint32(unix.EPERM)},
			{"denied, kbox code", reboot, 0x5555_0000_2000, [6]uint64{}, RetAllow},
			{"openat, guest code", openat, 0x400000, [6]uint64{}, unix.SECCOMP_RET_TRAP},
			{"openat, kbox code", openat, 0x8000_0000_0000, [6]uint64{}, RetAllow},
			{"F_DUPFD min 3, guest code", fcntl, 0x400000, [6]uint64{1, unix.F_DUPFD, 3}, unix.SECCOMP_RET_TRAP},
			{"F_GETFL, guest code", fcntl, 0x400000, [6]uint64{1, unix.F_GETFL}, RetAllow},
		} {
			d := SeccompData{Nr: int32(c.nr), Arch: a.AuditArch, InstructionPointer: c.ip, Args: c.args}
			if got := run(t, vm, &d); got != c.want {
				t.Errorf("%s %s: got %s want %s", a.Name, c.name, retName(got), retName(c.want))
			}
		}
	}
}

// TestFilterIoctlNotify: with --net, FIONREAD and SIOCOUTQ on a host fd
// are notified (an internet socket's queues are partly LKL's), and so are
// the network-device commands of a range (SIOCGIF*, wireless); other
// ioctls of host fds stay native, terminal injection stays refused, with
// and without trusted ranges.
func TestFilterIoctlNotify(t *testing.T) {
	const fionread, siocoutq, tcgets = 0x541b, 0x5411, 0x5401
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		for _, trusted := range []bool{false, true} {
			p := policyFor(a)
			p.IoctlNotify = []uint32{fionread, siocoutq}
			p.IoctlNotifyRanges = [][2]uint32{{0x890b, 0x89ff}, {0x8b00, 0x8bff}}
			if trusted {
				p.Trusted = []IPRange{{0x400000, 0x500000}}
			}
			vm := newVM(t, p)
			nr, _ := a.Nr("ioctl")
			base := uint64(p.VirtualFDBase)
			for _, c := range []struct {
				name    string
				fd, cmd uint64
				want    uint32
			}{
				{"FIONREAD on a host fd", 3, fionread, RetUserNotif},
				{"SIOCOUTQ on a host fd", 3, siocoutq, RetUserNotif},
				{"FIONREAD, high half set", 3, 1<<32 | fionread, RetUserNotif},
				{"TCGETS on a host fd", 3, tcgets, RetAllow},
				{"TIOCSTI on a host fd", 3, ioctlTIOCSTI, RetErrno | uint32(unix.EPERM)},
				{"FIONREAD on a virtual fd", base, fionread, RetUserNotif},
				{"TCGETS on a virtual fd", base, tcgets, RetUserNotif},
				{"SIOCGIFCONF on a host fd", 3, 0x8912, RetUserNotif},
				{"SIOCGIFHWADDR on a host fd", 3, 0x8927, RetUserNotif},
				{"first of the range", 3, 0x890b, RetUserNotif},
				{"last of the range", 3, 0x89ff, RetUserNotif},
				{"SIOCGSTAMP (socket's own, before the range)", 3, 0x8906, RetAllow},
				{"after the range", 3, 0x8a00, RetAllow},
				{"SIOCGIWNAME (wireless)", 3, 0x8b01, RetUserNotif},
				{"after the wireless range", 3, 0x8c00, RetAllow},
				{"range, high half set", 3, 0xffff<<32 | 0x8927, RetUserNotif},
			} {
				d := SeccompData{Nr: int32(nr), Arch: a.AuditArch, InstructionPointer: 0x1000, Args: [6]uint64{c.fd, c.cmd}}
				got := run(t, vm, &d)
				if got != c.want {
					t.Errorf("%s %s: got %s want %s", a.Name, c.name, retName(got), retName(c.want))
				}
				if o := p.DecideAt(nr, a.AuditArch, d.InstructionPointer, d.Args); o != got {
					t.Errorf("%s %s: oracle %s, program %s", a.Name, c.name, retName(o), retName(got))
				}
				if trusted {
					d.InstructionPointer = 0x400010
					if got := run(t, vm, &d); got != RetAllow {
						t.Errorf("%s %s from trusted code: got %s", a.Name, c.name, retName(got))
					}
				}
			}
			// Without the list, FIONREAD on a host fd is native.
			p.IoctlNotify, p.IoctlNotifyRanges = nil, nil
			d := SeccompData{Nr: int32(nr), Arch: a.AuditArch, Args: [6]uint64{3, fionread}}
			if got := run(t, newVM(t, p), &d); got != RetAllow {
				t.Errorf("%s FIONREAD without IoctlNotify: got %s", a.Name, retName(got))
			}
		}
	}
}

// TestFilterNotifyIfAndNoSys: clone is notified only with CLONE_PARENT
// and without CLONE_THREAD, or with a namespace flag (only the low 32 bits
// count, as in the kernel's clone), every other clone runs natively; clone3 is answered
// ENOSYS by the filter itself; the program and the oracle agree, and a
// trusted caller's notified clone runs natively.
func TestFilterNotifyIfAndNoSys(t *testing.T) {
	const parent, thread = unix.CLONE_PARENT, unix.CLONE_THREAD
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		for _, trusted := range []bool{false, true} {
			p := policyFor(a)
			p.Allow = without(p.Allow, "clone", "clone3")
			p.NoSys = []string{"clone3"}
			p.NotifyIf = []ArgBits{{Name: "clone", Arg: 0, Mask: parent | thread, Want: parent, Any: unix.CLONE_NEWNET | unix.CLONE_NEWUSER}}
			if trusted {
				p.Trusted = []IPRange{{0x400000, 0x500000}}
			}
			vm := newVM(t, p)
			clone, _ := a.Nr("clone")
			clone3, _ := a.Nr("clone3")
			for _, c := range []struct {
				name  string
				nr    uint32
				flags uint64
				want  uint32
			}{
				{"fork-like clone", clone, uint64(unix.SIGCHLD), RetAllow},
				{"thread clone", clone, unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | thread, RetAllow},
				{"CLONE_PARENT", clone, parent | uint64(unix.SIGCHLD), RetUserNotif},
				{"CLONE_PARENT|CLONE_THREAD", clone, parent | thread | unix.CLONE_VM | unix.CLONE_SIGHAND, RetAllow},
				{"CLONE_PARENT in the high half only", clone, parent << 32, RetAllow},
				{"CLONE_NEWNET", clone, unix.CLONE_NEWNET | uint64(unix.SIGCHLD), RetUserNotif},
				{"CLONE_NEWUSER|CLONE_THREAD", clone, unix.CLONE_NEWUSER | thread | unix.CLONE_VM | unix.CLONE_SIGHAND, RetUserNotif},
				{"CLONE_NEWUSER|CLONE_PARENT|CLONE_THREAD", clone, unix.CLONE_NEWUSER | parent | thread, RetUserNotif},
				{"CLONE_NEWNET in the high half only", clone, unix.CLONE_NEWNET << 32, RetAllow},
				{"CLONE_NEWPID, not in Any", clone, unix.CLONE_NEWPID, RetAllow},
				{"clone3", clone3, 0, RetErrno | uint32(unix.ENOSYS)},
			} {
				d := SeccompData{Nr: int32(c.nr), Arch: a.AuditArch, InstructionPointer: 0x1000, Args: [6]uint64{c.flags}}
				got := run(t, vm, &d)
				if got != c.want {
					t.Errorf("%s %s: got %s want %s", a.Name, c.name, retName(got), retName(c.want))
				}
				if o := p.DecideAt(c.nr, a.AuditArch, d.InstructionPointer, d.Args); o != got {
					t.Errorf("%s %s: oracle %s, program %s", a.Name, c.name, retName(o), retName(got))
				}
				if trusted && c.want == RetUserNotif {
					d.InstructionPointer = 0x400010
					if got := run(t, vm, &d); got != RetAllow {
						t.Errorf("%s %s from trusted code: got %s", a.Name, c.name, retName(got))
					}
				}
			}
		}
	}
	bad := policyFor(ArchX86_64)
	bad.NotifyIf = []ArgBits{{Name: "clone", Arg: 0, Mask: 1, Want: 2}}
	if _, err := bad.Build(); err == nil {
		t.Errorf("a rule wanting bits outside its mask was accepted")
	}
	bad.NotifyIf = []ArgBits{{Name: "no_such_call", Arg: 0, Mask: 1, Want: 1}}
	if _, err := bad.Build(); err == nil {
		t.Errorf("a rule naming an unknown syscall was accepted")
	}
}

// TestFilterNotifyIfNone: a rule with None and no Mask, as mmap's (an fd
// in argument 4 at or above 1024 and not negative is notified): the
// program and the oracle agree, and a rule that tests nothing is refused.
func TestFilterNotifyIfNone(t *testing.T) {
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		p := policyFor(a)
		p.Allow = without(p.Allow, "mmap")
		p.NotifyIf = []ArgBits{{Name: "mmap", Arg: 4, Any: 0x7ffffc00, None: 0x80000000}}
		vm := newVM(t, p)
		mmap, _ := a.Nr("mmap")
		for _, c := range []struct {
			fd   uint64
			want uint32
		}{
			{0, RetAllow}, {3, RetAllow}, {1023, RetAllow}, {1024, RetUserNotif}, {4000, RetUserNotif},
			{0x7fffffff, RetUserNotif}, {0xffffffff, RetAllow}, {0x80000400, RetAllow},
			{0xffffffff00000005, RetAllow}, {0xffffffff00000400, RetUserNotif},
		} {
			d := SeccompData{Nr: int32(mmap), Arch: a.AuditArch, InstructionPointer: 0x1000, Args: [6]uint64{0, 4096, 1, 2, c.fd, 0}}
			got := run(t, vm, &d)
			if got != c.want {
				t.Errorf("%s fd %#x: got %s want %s", a.Name, c.fd, retName(got), retName(c.want))
			}
			if o := p.DecideAt(uint32(mmap), a.AuditArch, d.InstructionPointer, d.Args); o != got {
				t.Errorf("%s fd %#x: oracle %s, program %s", a.Name, c.fd, retName(o), retName(got))
			}
		}
	}
	bad := policyFor(ArchX86_64)
	bad.Allow = without(bad.Allow, "mmap")
	bad.NotifyIf = []ArgBits{{Name: "mmap", Arg: 4, None: 1}}
	if _, err := bad.Build(); err == nil {
		t.Errorf("a rule with no Mask and no Any was accepted")
	}
}

func without(l []string, drop ...string) []string {
	var out []string
	for _, n := range l {
		keep := true
		for _, d := range drop {
			keep = keep && n != d
		}
		if keep {
			out = append(out, n)
		}
	}
	return out
}

// TestUnconditional: a number Unconditional names is notified by the
// assembled filter whatever its arguments (every vector tried); one it
// does not name is answered otherwise for at least one of them.
func TestUnconditional(t *testing.T) {
	for _, a := range []*Arch{ArchX86_64, ArchAArch64} {
		p := policyFor(a)
		vm := newVM(t, p)
		un, err := p.Unconditional(600)
		if err != nil {
			t.Fatal(err)
		}
		vectors := [][6]uint64{
			{},
			{0, unix.TIOCSTI},
			{3, 0, 0, 0, 0, 0},
			{uint64(p.VirtualFDBase), 1, 2, 3, 4, 5},
			{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)},
			{uint64(unix.SIGCHLD)},
		}
		for nr := uint32(0); nr < 600; nr++ {
			notified := 0
			for _, v := range vectors {
				d := SeccompData{Nr: int32(nr), Arch: a.AuditArch, Args: v}
				if run(t, vm, &d) == p.notify() {
					notified++
				}
			}
			if un[nr] && notified != len(vectors) {
				t.Errorf("%s nr %d: unconditional, but %d of %d vectors notified", a.Name, nr, notified, len(vectors))
			}
			if !un[nr] && notified == len(vectors) {
				t.Errorf("%s nr %d: not unconditional, but every vector notified", a.Name, nr)
			}
		}
		if nr, _ := a.Nr("openat"); !un[nr] {
			t.Errorf("%s: openat not unconditional", a.Name)
		}
	}
}
