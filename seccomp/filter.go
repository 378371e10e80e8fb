//go:build linux

package seccomp

import (
	"fmt"
	"sort"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// DefaultVirtualFDBase is the default first virtual fd number. See DESIGN.md.
const DefaultVirtualFDBase = 1024

// Policy describes the seccomp filter. The zero value is not useful; start
// from NewPolicy. kbox's own lists derive from the syscall table
// (dispatch/table.go; tierpolicy.Seccomp).
//
// Evaluation order (identical in BPF and in Decide):
//  1. arch != Arch.AuditArch            → KILL_PROCESS
//  2. x86_64 only: nr >= 0x40000000 (x32) → ERRNO(ENOSYS)
//  3. nr in Deny                         → ERRNO(DenyErrno)
//     3b. nr in NoSys                       → ERRNO(ENOSYS)
//     3c. nr in NotifyIf: the low 32 bits of the rule's argument have no
//     bit of None and, masked with Mask (when not 0), equal Want, or have
//     a bit of Any → USER_NOTIF; else ALLOW
//  4. nr in Allow                        → ALLOW
//  5. nr in HostFD: ioctl with TIOCSTI/TIOCLINUX → ERRNO(DenyErrno);
//     ioctl with a command of IoctlNotify or in IoctlNotifyRanges (low
//     32 bits of args[1]) → USER_NOTIF;
//     fcntl F_DUPFD/F_DUPFD_CLOEXEC whose minimum (low 32 bits of args[2])
//     is >= VirtualFDBase → USER_NOTIF (the new fd would be virtual);
//     fcntl F_ADD_SEALS/F_GET_SEALS → USER_NOTIF;
//     a syscall of NullArg whose named argument (all 64 bits) is not 0,
//     or whose args[NullFlagsArg] (low 32 bits) has a bit of NullFlags,
//     → USER_NOTIF;
//     a syscall of FDArg whose named argument's low 32 bits are >=
//     VirtualFDBase → USER_NOTIF;
//     low 32 bits of args[0] < VirtualFDBase → ALLOW, else USER_NOTIF
//  6. anything else                      → USER_NOTIF
//
// An in-process tier (package trap) sets Notify to SECCOMP_RET_TRAP,
// Trusted to kbox's own code and DupfdAlways: a verdict of Notify or Deny
// for a syscall made from a Trusted address becomes ALLOW (kbox's code runs
// on the guest's threads), and every F_DUPFD(_CLOEXEC) is notified.
type Policy struct {
	Arch   *Arch
	Deny   []string
	Allow  []string
	HostFD []string
	// NullArg names syscalls of HostFD that run natively only while one
	// argument (the index) is 0: sendto with a destination address must
	// reach the supervisor, which resolves it.
	NullArg map[string]int
	// NullFlags, when not 0, are flag bits of args[NullFlagsArg] that
	// make a NullArg syscall notified too: recvfrom with MSG_ERRQUEUE
	// reads an internet stream's error queue, which is LKL's.
	NullFlags    uint32
	NullFlagsArg int
	// FDArg names syscalls of HostFD with a second fd argument (the
	// index): they run natively only while it too is below
	// VirtualFDBase (epoll_ctl's target fd, in the in-process tiers).
	FDArg map[string]int
	// IoctlNotify are ioctl commands notified on host fds too (with
	// --net, FIONREAD and SIOCOUTQ: an internet socket's queues are
	// LKL's as well as its pair's).
	IoctlNotify []uint32
	// IoctlNotifyRanges are ranges of ioctl commands (inclusive) notified
	// on host fds too: a socket's network-device commands (SIOCGIFCONF,
	// SIOCGIFHWADDR, ...) answer from the guest's network namespace,
	// not the host's (dispatch.DeviceIoctls).
	IoctlNotifyRanges [][2]uint32
	VirtualFDBase     uint32
	DenyErrno         unix.Errno
	// Notify is the action for syscalls the filter does not let run;
	// 0 means SECCOMP_RET_USER_NOTIF.
	Notify uint32
	// Trusted are instruction-pointer ranges whose syscalls run natively
	// whatever the verdict (Notify or Deny) would be. Every range must lie
	// within one 4 GiB-aligned block (Hi-1 and Lo share the upper 32 bits).
	Trusted []IPRange
	// DupfdAlways notifies every fcntl F_DUPFD and F_DUPFD_CLOEXEC, not
	// only those with a minimum at or above VirtualFDBase.
	DupfdAlways bool
	// NoSys are answered ENOSYS in the filter, as a kernel without them
	// would: clone3, whose flags lie in memory the filter cannot read
	// (libc falls back to clone).
	NoSys []string
	// NotifyIf are syscalls notified only when some bits of an argument
	// have given values, and run natively otherwise: clone with
	// CLONE_PARENT or a namespace flag (a notified clone can fail with
	// EINTR, which Linux's never does, so only the clones kbox must check
	// are notified).
	NotifyIf []ArgBits
}

// ArgBits is a NotifyIf rule: syscall Name is notified when the low 32
// bits of args[Arg] have no bit of None and, masked with Mask, equal
// Want (a Mask of 0 asks nothing), or have a bit of Any.
type ArgBits struct {
	Name       string
	Arg        int
	Mask, Want uint32
	Any, None  uint32
}

// notifies reports whether rule r notifies a call whose argument's low 32
// bits are v.
func (r *ArgBits) notifies(v uint32) bool {
	return v&r.None == 0 && (r.Mask != 0 && v&r.Mask == r.Want || v&r.Any != 0)
}

func (p *Policy) notify() uint32 {
	if p.Notify == 0 {
		return RetUserNotif
	}
	return p.Notify
}

// NewPolicy returns an empty policy for a (the native architecture when
// nil, x86_64 on an unsupported host so that it can still be simulated):
// refusals with EPERM, the default virtual fd base, every syscall
// notified until lists are given.
func NewPolicy(a *Arch) *Policy {
	if a == nil {
		a = NativeArch()
	}
	if a == nil {
		a = ArchX86_64
	}
	return &Policy{Arch: a, VirtualFDBase: DefaultVirtualFDBase, DenyErrno: unix.EPERM}
}

// verdict classes of a syscall number.
type class uint8

const (
	clsNotify class = iota
	clsAllow
	clsDeny
	clsHostFD
	clsIoctl // HostFD plus terminal-injection guard
	clsFcntl // HostFD plus dups into the virtual range
	clsX32
	clsNoSys
	// clsNullArg+i: HostFD while args[i] is 0 (NullArg), for i in 0..5.
	clsNullArg
	// clsFDArg+i: HostFD while args[i] is below VirtualFDBase too
	// (FDArg), for i in 0..5.
	clsFDArg = clsNullArg + 6
	// clsArgBits+i: the rule NotifyIf[i].
	clsArgBits = clsFDArg + 6
)

// argBits returns the NotifyIf index of an ArgBits class.
func (c class) argBits() (int, bool) {
	if c >= clsArgBits {
		return int(c - clsArgBits), true
	}
	return 0, false
}

// fdArg returns the argument index of an FDArg class.
func (c class) fdArg() (int, bool) {
	if c >= clsFDArg && c < clsFDArg+6 {
		return int(c - clsFDArg), true
	}
	return 0, false
}

// nullArg returns the argument index of a NullArg class.
func (c class) nullArg() (int, bool) {
	if c >= clsNullArg && c < clsNullArg+6 {
		return int(c - clsNullArg), true
	}
	return 0, false
}

// classes resolves the name lists for p.Arch into number → class.
func (p *Policy) classes() (map[uint32]class, error) {
	if p.Arch == nil {
		return nil, fmt.Errorf("seccomp: policy has no Arch")
	}
	if p.DenyErrno <= 0 || p.DenyErrno > unix.Errno(RetData) {
		return nil, fmt.Errorf("seccomp: invalid DenyErrno %d", p.DenyErrno)
	}
	for _, l := range []struct {
		name  string
		names []string
	}{{"Deny", p.Deny}, {"Allow", p.Allow}, {"HostFD", p.HostFD}, {"NoSys", p.NoSys}} {
		if err := checkNames(l.name, l.names); err != nil {
			return nil, err
		}
	}
	m := make(map[uint32]class)
	seen := make(map[string]string)
	add := func(list string, names []string, c class) error {
		for _, n := range names {
			if prev, dup := seen[n]; dup && prev != list {
				return fmt.Errorf("seccomp: syscall %q is in both %s and %s", n, prev, list)
			}
			seen[n] = list
			nr, ok := p.Arch.Nr(n)
			if !ok {
				continue // does not exist on this arch
			}
			if c == clsHostFD && n == "ioctl" {
				m[nr] = clsIoctl
			} else if c == clsHostFD && n == "fcntl" {
				m[nr] = clsFcntl
			} else {
				m[nr] = c
			}
		}
		return nil
	}
	if err := add("Deny", p.Deny, clsDeny); err != nil {
		return nil, err
	}
	if err := add("Allow", p.Allow, clsAllow); err != nil {
		return nil, err
	}
	if err := add("HostFD", p.HostFD, clsHostFD); err != nil {
		return nil, err
	}
	if err := add("NoSys", p.NoSys, clsNoSys); err != nil {
		return nil, err
	}
	for i, r := range p.NotifyIf {
		if err := checkNames("NotifyIf", []string{r.Name}); err != nil {
			return nil, err
		}
		if r.Arg < 0 || r.Arg > 5 || r.Want&^r.Mask != 0 || r.Mask == 0 && r.Any == 0 {
			return nil, fmt.Errorf("seccomp: NotifyIf %q: argument %d, mask %#x, want %#x", r.Name, r.Arg, r.Mask, r.Want)
		}
		if err := add("NotifyIf", []string{r.Name}, clsArgBits+class(i)); err != nil {
			return nil, err
		}
	}
	for n, i := range p.NullArg {
		if seen[n] != "HostFD" {
			return nil, fmt.Errorf("seccomp: NullArg syscall %q is not in HostFD", n)
		}
		if i < 0 || i > 5 {
			return nil, fmt.Errorf("seccomp: NullArg %q: argument %d out of range", n, i)
		}
		if p.NullFlagsArg < 0 || p.NullFlagsArg > 5 {
			return nil, fmt.Errorf("seccomp: NullFlagsArg %d out of range", p.NullFlagsArg)
		}
		if nr, ok := p.Arch.Nr(n); ok {
			if m[nr] != clsHostFD {
				return nil, fmt.Errorf("seccomp: NullArg %q cannot have a guard of its own", n)
			}
			m[nr] = clsNullArg + class(i)
		}
	}
	for n, i := range p.FDArg {
		if seen[n] != "HostFD" {
			return nil, fmt.Errorf("seccomp: FDArg syscall %q is not in HostFD", n)
		}
		if i < 1 || i > 5 {
			return nil, fmt.Errorf("seccomp: FDArg %q: argument %d out of range", n, i)
		}
		if nr, ok := p.Arch.Nr(n); ok {
			if m[nr] != clsHostFD {
				return nil, fmt.Errorf("seccomp: FDArg %q cannot have a guard of its own", n)
			}
			m[nr] = clsFDArg + class(i)
		}
	}
	if nr, ok := p.Arch.Nr("ioctl"); ok && m[nr] == clsAllow {
		return nil, fmt.Errorf("seccomp: ioctl must be in HostFD, not Allow (terminal-injection guard)")
	}
	if nr, ok := p.Arch.Nr("fcntl"); ok && m[nr] == clsAllow {
		return nil, fmt.Errorf("seccomp: fcntl must be in HostFD, not Allow (dups into the virtual range)")
	}
	for nr := range m {
		if p.Arch.X32Bit != 0 && nr >= p.Arch.X32Bit {
			return nil, fmt.Errorf("seccomp: syscall number %#x collides with the x32 range", nr)
		}
	}
	for _, r := range p.Trusted {
		if r.Hi <= r.Lo || r.Lo>>32 != (r.Hi-1)>>32 {
			return nil, fmt.Errorf("seccomp: trusted range %#x-%#x is empty or crosses a 4 GiB boundary", r.Lo, r.Hi)
		}
	}
	return m, nil
}

func (p *Policy) retFor(c class, args *[6]uint64) uint32 {
	if i, isRule := c.argBits(); isRule {
		if p.NotifyIf[i].notifies(uint32(args[p.NotifyIf[i].Arg])) {
			return p.notify()
		}
		return RetAllow
	}
	if i, isNull := c.nullArg(); isNull {
		if args[i] != 0 || uint32(args[p.NullFlagsArg])&p.NullFlags != 0 {
			return p.notify()
		}
		c = clsHostFD
	}
	if i, isFD := c.fdArg(); isFD {
		if uint32(args[i]) >= p.VirtualFDBase {
			return p.notify()
		}
		c = clsHostFD
	}
	switch c {
	case clsAllow:
		return RetAllow
	case clsDeny:
		return RetErrno | uint32(p.DenyErrno)
	case clsX32, clsNoSys:
		return RetErrno | uint32(unix.ENOSYS)
	case clsIoctl:
		if cmd := uint32(args[1]); cmd == ioctlTIOCSTI || cmd == ioctlTIOCLINUX {
			return RetErrno | uint32(p.DenyErrno)
		}
		for _, cmd := range p.IoctlNotify {
			if uint32(args[1]) == cmd {
				return p.notify()
			}
		}
		for _, rg := range p.IoctlNotifyRanges {
			if cmd := uint32(args[1]); cmd >= rg[0] && cmd <= rg[1] {
				return p.notify()
			}
		}
		if uint32(args[0]) < p.VirtualFDBase {
			return RetAllow
		}
	case clsFcntl:
		cmd := uint32(args[1])
		if (cmd == fcntlDupfd || cmd == fcntlDupfdCloexec) && (p.DupfdAlways || uint32(args[2]) >= p.VirtualFDBase) {
			return p.notify()
		}
		if cmd >= fcntlAddSeals && cmd <= fcntlGetSeals {
			return p.notify()
		}
		fallthrough
	case clsHostFD:
		if uint32(args[0]) < p.VirtualFDBase {
			return RetAllow
		}
	}
	return p.notify()
}

// Unconditional reports, for each number below n, whether its verdict is
// Notify whatever its arguments (made at an untrusted address): the
// numbers in none of the lists. The rewrite tier's stubs for sites whose
// number is in a register enter kbox directly for these and let the
// filter judge the rest (rewrite/x86dyn.go).
func (p *Policy) Unconditional(n uint32) ([]bool, error) {
	m, err := p.classes()
	if err != nil {
		return nil, err
	}
	out := make([]bool, n)
	for nr := range n {
		c, listed := m[nr]
		out[nr] = (!listed || c == clsNotify) && (p.Arch.X32Bit == 0 || nr < p.Arch.X32Bit)
	}
	return out, nil
}

// Decide is the reference model of the filter: it returns the SECCOMP_RET_*
// value the assembled program yields for the given seccomp_data fields. It
// is written independently of the BPF code generator and serves as the test
// oracle. It panics if the policy is invalid.
func (p *Policy) Decide(nr uint32, arch uint32, args [6]uint64) uint32 {
	return p.DecideAt(nr, arch, 0, args)
}

// DecideAt is Decide for a syscall made at instruction pointer ip.
func (p *Policy) DecideAt(nr uint32, arch uint32, ip uint64, args [6]uint64) uint32 {
	v := p.decide(nr, arch, args)
	if (v == p.notify() || v == RetErrno|uint32(p.DenyErrno)) && p.trusted(ip) {
		return RetAllow
	}
	return v
}

func (p *Policy) decide(nr uint32, arch uint32, args [6]uint64) uint32 {
	if arch != p.Arch.AuditArch {
		return RetKillProcess
	}
	if p.Arch.X32Bit != 0 && nr >= p.Arch.X32Bit {
		return RetErrno | uint32(unix.ENOSYS)
	}
	m, err := p.classes()
	if err != nil {
		panic(err)
	}
	return p.retFor(m[nr], &args)
}

// interval is a run of syscall numbers [lo, next.lo) sharing one class.
type interval struct {
	lo  uint32
	cls class
}

func (p *Policy) intervals(m map[uint32]class) []interval {
	nrs := make([]uint32, 0, len(m))
	for nr := range m {
		nrs = append(nrs, nr)
	}
	sort.Slice(nrs, func(i, j int) bool { return nrs[i] < nrs[j] })
	iv := []interval{{0, clsNotify}}
	push := func(lo uint32, c class) {
		last := &iv[len(iv)-1]
		switch {
		case last.cls == c:
		case last.lo == lo:
			last.cls = c
			if len(iv) > 1 && iv[len(iv)-2].cls == c {
				iv = iv[:len(iv)-1]
			}
		default:
			iv = append(iv, interval{lo, c})
		}
	}
	for _, nr := range nrs {
		push(nr, m[nr])
		push(nr+1, clsNotify)
	}
	if p.Arch.X32Bit != 0 {
		// Everything from the x32 bit up (x32 calls and numbers that are
		// negative as int) is refused in one run.
		push(p.Arch.X32Bit, clsX32)
	}
	return iv
}

// Program building: a tiny label assembler on top of x/net/bpf.

type label int

type op struct {
	ins    bpf.Instruction // concrete instruction, or nil for a jump/label
	jge    bool            // if A >= val goto target, else fall through
	ja     bool            // goto target
	val    uint32
	target label
	mark   label // >0: this op is a label marker
	long   bool  // jge needs a trampoline (distance > 255)
}

type asm struct {
	ops    []op
	labels label
}

func (a *asm) newLabel() label { a.labels++; return a.labels }
func (a *asm) emit(ins ...bpf.Instruction) {
	for _, i := range ins {
		a.ops = append(a.ops, op{ins: i})
	}
}
func (a *asm) setLabel(l label)        { a.ops = append(a.ops, op{mark: l}) }
func (a *asm) jgeTo(v uint32, l label) { a.ops = append(a.ops, op{jge: true, val: v, target: l}) }
func (a *asm) jaTo(l label)            { a.ops = append(a.ops, op{ja: true, target: l}) }

func (o *op) size() int {
	switch {
	case o.mark > 0:
		return 0
	case o.jge && o.long:
		return 2
	}
	return 1
}

func (a *asm) assemble() ([]bpf.Instruction, error) {
	pos := make([]int, len(a.ops))
	where := make(map[label]int)
	for {
		n := 0
		for i := range a.ops {
			pos[i] = n
			if a.ops[i].mark > 0 {
				where[a.ops[i].mark] = n
			}
			n += a.ops[i].size()
		}
		grew := false
		for i := range a.ops {
			o := &a.ops[i]
			if o.jge && !o.long && where[o.target]-(pos[i]+1) > 255 {
				o.long, grew = true, true
			}
		}
		if !grew {
			break
		}
	}
	var out []bpf.Instruction
	for i := range a.ops {
		o := &a.ops[i]
		switch {
		case o.mark > 0:
		case o.ins != nil:
			out = append(out, o.ins)
		case o.ja:
			out = append(out, bpf.Jump{Skip: uint32(where[o.target] - (pos[i] + 1))})
		case o.jge && o.long:
			out = append(out,
				bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: o.val, SkipTrue: 0, SkipFalse: 1},
				bpf.Jump{Skip: uint32(where[o.target] - (pos[i] + 2))})
		case o.jge:
			d := where[o.target] - (pos[i] + 1)
			if d < 0 {
				return nil, fmt.Errorf("seccomp: backward jump")
			}
			out = append(out, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: o.val, SkipTrue: uint8(d)})
		}
	}
	return out, nil
}

// Build assembles the policy into classic BPF instructions.
//
// Layout: load arch, compare, kill on mismatch; load nr; a balanced binary
// search over the runs of equally-classified syscall numbers (the x32 range
// is one of those runs), each leaf a single RET or a jump into the shared
// ioctl-guard / host-fd blocks at the end. Lookups cost O(log runs)
// comparisons, about 8 for the default policy.
func (p *Policy) Build() ([]bpf.Instruction, error) {
	m, err := p.classes()
	if err != nil {
		return nil, err
	}
	iv := p.intervals(m)
	var a asm
	ioctlL, hostL, fcntlL := a.newLabel(), a.newLabel(), a.newLabel()
	ret := func(v uint32) bpf.Instruction { return bpf.RetConstant{Val: v} }
	deny := RetErrno | uint32(p.DenyErrno)
	notify := p.notify()
	// With trusted ranges, a Notify or Deny verdict first asks whether
	// the caller is trusted (blocks at the end: BPF jumps only forward).
	var trustNotifyL, trustDenyL label
	if len(p.Trusted) > 0 {
		trustNotifyL, trustDenyL = a.newLabel(), a.newLabel()
	}
	verdict := func(v uint32) {
		switch {
		case v == notify && trustNotifyL != 0:
			a.jaTo(trustNotifyL)
		case v == deny && trustDenyL != 0:
			a.jaTo(trustDenyL)
		default:
			a.emit(ret(v))
		}
	}

	a.emit(
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: p.Arch.AuditArch, SkipTrue: 1},
		ret(RetKillProcess),
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	)
	nullL, fdL, ruleL := map[int]label{}, map[int]label{}, map[int]label{}
	var gen func(iv []interval)
	gen = func(iv []interval) {
		if len(iv) == 1 {
			c := iv[0].cls
			if i, isNull := c.nullArg(); isNull {
				if nullL[i] == 0 {
					nullL[i] = a.newLabel()
				}
				a.jaTo(nullL[i])
				return
			}
			if i, isFD := c.fdArg(); isFD {
				if fdL[i] == 0 {
					fdL[i] = a.newLabel()
				}
				a.jaTo(fdL[i])
				return
			}
			if i, isRule := c.argBits(); isRule {
				if ruleL[i] == 0 {
					ruleL[i] = a.newLabel()
				}
				a.jaTo(ruleL[i])
				return
			}
			switch c {
			case clsIoctl:
				a.jaTo(ioctlL)
			case clsHostFD:
				a.jaTo(hostL)
			case clsFcntl:
				a.jaTo(fcntlL)
			default:
				verdict(p.retFor(c, nil))
			}
			return
		}
		mid := len(iv) / 2
		right := a.newLabel()
		a.jgeTo(iv[mid].lo, right)
		gen(iv[:mid])
		a.setLabel(right)
		gen(iv[mid:])
	}
	gen(iv)
	a.setLabel(ioctlL)
	a.emit(
		bpf.LoadAbsolute{Off: ArgLowOffset(1), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: ioctlTIOCSTI, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: ioctlTIOCLINUX, SkipFalse: 1},
	)
	verdict(deny)
	// A still holds the command: IoctlNotify's are notified.
	for _, cmd := range p.IoctlNotify {
		a.emit(bpf.JumpIf{Cond: bpf.JumpEqual, Val: cmd, SkipFalse: 1})
		verdict(notify) // one instruction, a RET or a jump
	}
	for _, rg := range p.IoctlNotifyRanges {
		a.emit(
			bpf.JumpIf{Cond: bpf.JumpLessThan, Val: rg[0], SkipTrue: 2},
			bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: rg[1], SkipTrue: 1},
		)
		verdict(notify)
	}
	a.setLabel(hostL)
	a.emit(
		bpf.LoadAbsolute{Off: ArgLowOffset(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: p.VirtualFDBase, SkipTrue: 1},
		ret(RetAllow),
	)
	verdict(notify)
	// fcntl: a virtual fd, a seal command, or F_DUPFD(_CLOEXEC) of a
	// host fd with a minimum in the virtual range (any minimum with
	// DupfdAlways), is notified; every other fcntl of a host fd runs
	// natively.
	a.setLabel(fcntlL)
	if p.DupfdAlways {
		a.emit(
			bpf.LoadAbsolute{Off: ArgLowOffset(0), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: p.VirtualFDBase, SkipTrue: 5},
			bpf.LoadAbsolute{Off: ArgLowOffset(1), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: fcntlAddSeals, SkipFalse: 1},
			bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: fcntlGetSeals, SkipFalse: 2},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: fcntlDupfd, SkipTrue: 1},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: fcntlDupfdCloexec, SkipFalse: 1},
		)
	} else {
		a.emit(
			bpf.LoadAbsolute{Off: ArgLowOffset(0), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: p.VirtualFDBase, SkipTrue: 7},
			bpf.LoadAbsolute{Off: ArgLowOffset(1), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: fcntlAddSeals, SkipFalse: 1},
			bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: fcntlGetSeals, SkipFalse: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: fcntlDupfd, SkipTrue: 1},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: fcntlDupfdCloexec, SkipFalse: 3},
			bpf.LoadAbsolute{Off: ArgLowOffset(2), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: p.VirtualFDBase, SkipFalse: 1},
		)
	}
	fcntlNotify := a.newLabel()
	a.jaTo(fcntlNotify)
	a.emit(ret(RetAllow))
	a.setLabel(fcntlNotify)
	verdict(notify)
	// NullArg: a non-zero argument (either half) is notified, else as
	// any HostFD syscall.
	for i := 0; i < 6; i++ {
		if l := nullL[i]; l != 0 {
			a.setLabel(l)
			a.emit(
				bpf.LoadAbsolute{Off: ArgLowOffset(i), Size: 4},
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 2},
				bpf.LoadAbsolute{Off: ArgLowOffset(i) + 4, Size: 4},
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 1},
			)
			verdict(notify) // one instruction, a RET or a jump
			if p.NullFlags != 0 {
				a.emit(
					bpf.LoadAbsolute{Off: ArgLowOffset(p.NullFlagsArg), Size: 4},
					bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: p.NullFlags, SkipFalse: 1},
				)
				verdict(notify)
			}
			a.emit(
				// The host fd check (BPF jumps only forward).
				bpf.LoadAbsolute{Off: ArgLowOffset(0), Size: 4},
				bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: p.VirtualFDBase, SkipTrue: 1},
				ret(RetAllow),
			)
			verdict(notify)
		}
	}
	// FDArg: a second fd in the virtual range is notified, else as any
	// HostFD syscall.
	for i := 0; i < 6; i++ {
		if l := fdL[i]; l != 0 {
			a.setLabel(l)
			a.emit(
				bpf.LoadAbsolute{Off: ArgLowOffset(i), Size: 4},
				bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: p.VirtualFDBase, SkipFalse: 1},
			)
			verdict(notify) // one instruction, a RET or a jump
			a.emit(
				bpf.LoadAbsolute{Off: ArgLowOffset(0), Size: 4},
				bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: p.VirtualFDBase, SkipTrue: 1},
				ret(RetAllow),
			)
			verdict(notify)
		}
	}
	// NotifyIf: the argument's masked bits decide.
	for i, r := range p.NotifyIf {
		if l := ruleL[i]; l != 0 {
			a.setLabel(l)
			a.emit(bpf.LoadAbsolute{Off: ArgLowOffset(r.Arg), Size: 4})
			eq := uint8(0) // the Mask and Want test's instructions
			if r.Mask != 0 {
				eq = 2
			}
			if r.None != 0 {
				// A bit of None: on to the ALLOW below.
				skip := eq
				if r.Any != 0 {
					skip++
				}
				a.emit(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: r.None, SkipTrue: skip})
			}
			if r.Any != 0 {
				// A bit of Any: on to the verdict, past the ALLOW.
				a.emit(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: r.Any, SkipTrue: eq + 1})
			}
			if r.Mask != 0 {
				a.emit(
					bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: r.Mask},
					bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.Want, SkipTrue: 1},
				)
			}
			a.emit(ret(RetAllow))
			verdict(notify)
		}
	}
	if trustNotifyL != 0 {
		a.setLabel(trustNotifyL)
		p.emitTrusted(&a)
		a.emit(ret(notify))
		a.setLabel(trustDenyL)
		p.emitTrusted(&a)
		a.emit(ret(deny))
	}
	prog, err := a.assemble()
	if err != nil {
		return nil, err
	}
	if len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: program too long (%d instructions)", len(prog))
	}
	return prog, nil
}

// Assemble builds the policy and encodes it for Install.
func (p *Policy) Assemble() ([]bpf.RawInstruction, error) {
	prog, err := p.Build()
	if err != nil {
		return nil, err
	}
	return bpf.Assemble(prog)
}
