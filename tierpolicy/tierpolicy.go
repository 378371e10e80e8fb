// Package tierpolicy derives the filter policies of kbox's tiers from
// dispatch's syscall table: what the seccomp tier's filter lets run, refuses
// or notifies (Seccomp, WithNet, NotifyForks), and what the in-process
// tiers' filter traps. Both tiers import it; neither imports the other.
package tierpolicy

import (
	"math/bits"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/seccomp"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Seccomp returns the filter policy of the seccomp tier for a guest with
// (ipcNS) or without an IPC namespace of its own, derived from the syscall table (dispatch/table.go):
// Native entries run natively, NativeInNS ones too when the guest has its
// own IPC namespace, HostFD ones natively on host fds (in each of their fd
// arguments; FDArg4: mmap's fd is argument 4, a NotifyIf rule; AddrArg4: only
// without a destination address and without MSG_ERRQUEUE or MSG_MORE) and so are FilterHostFD ones (close), Refused ones get EPERM in BPF, Absent
// InFilter ones ENOSYS; ForkLike ones run natively, but clone with
// CLONE_PARENT and without CLONE_THREAD, or with a namespace flag; every
// other syscall (Served, Absent) is notified.
func Seccomp(virtualBase uint32, ipcNS bool) *seccomp.Policy {
	p := seccomp.NewPolicy(nil)
	p.NullArg, p.FDArg = map[string]int{}, map[string]int{}
	dispatch.Syscalls(func(nr int, s *dispatch.Syscall) {
		switch s.How {
		case dispatch.Native:
			p.Allow = append(p.Allow, s.Name)
		case dispatch.NativeInNS:
			if ipcNS {
				p.Allow = append(p.Allow, s.Name)
			}
		case dispatch.HostFD:
			if s.Facts&dispatch.FDArg4 != 0 {
				// mmap: notified with a virtual fd, a number at or
				// above the base (a power of two) and not negative.
				p.NotifyIf = append(p.NotifyIf, seccomp.ArgBits{Name: s.Name, Arg: 4,
					Any: ^(1<<(31-bits.LeadingZeros32(max(virtualBase, 1))) - 1) &^ (1 << 31), None: 1 << 31})
				break
			}
			p.HostFD = append(p.HostFD, s.Name)
			if more := s.FDs.FDArgs() &^ 1; more != 0 {
				// Its other fd (epoll_ctl's target, splice's
				// and tee's output) may be virtual too.
				p.FDArg[s.Name] = bits.TrailingZeros8(more)
			}
			if s.Facts&dispatch.AddrArg4 != 0 {
				p.NullArg[s.Name] = 4
				// Their flags are args[3]: MSG_ERRQUEUE asks for an
				// internet stream's error queue, LKL's; a send with
				// MSG_MORE is corked in LKL (inet/more.go).
				p.NullFlags, p.NullFlagsArg = unix.MSG_ERRQUEUE|unix.MSG_MORE, 3
			}
		case dispatch.Refused:
			p.Deny = append(p.Deny, s.Name)
		case dispatch.Served:
			if s.Facts&dispatch.FilterHostFD != 0 {
				p.HostFD = append(p.HostFD, s.Name)
				if s.Facts&dispatch.FilterNewFD != 0 {
					p.FDArg[s.Name] = 1 // dup2's and dup3's new fd
				}
			}
		case dispatch.Absent:
			if s.Facts&dispatch.InFilter != 0 && s.Errno == unix.ENOSYS {
				p.NoSys = append(p.NoSys, s.Name)
			}
		}
		switch {
		case s.Facts&dispatch.ForkLike == 0:
		case s.Name == "clone":
			p.NotifyIf = append(p.NotifyIf, seccomp.ArgBits{Name: s.Name, Arg: 0,
				Mask: unix.CLONE_PARENT | unix.CLONE_THREAD, Want: unix.CLONE_PARENT, Any: sysabi.CloneNamespaces})
		default:
			p.Allow = append(p.Allow, s.Name)
		}
	})
	p.IoctlNotifyRanges = dispatch.DeviceIoctls
	p.IoctlNotify = append(p.IoctlNotify, dispatch.InodeIoctls...)
	p.VirtualFDBase = virtualBase
	return p
}

// NotifyForks adjusts policy p for an agent policy that counts or refuses
// processes (dispatch.Policy.SeesForks): every fork, vfork and clone is
// notified.
func NotifyForks(p *seccomp.Policy) {
	forks := tableNames(func(s *dispatch.Syscall) bool { return s.Facts&dispatch.ForkLike != 0 })
	p.Allow = dropNames(p.Allow, forks)
	var rules []seccomp.ArgBits
	for _, r := range p.NotifyIf {
		if !forks[r.Name] {
			rules = append(rules, r)
		}
	}
	p.NotifyIf = rules
}

// WithNet adjusts policy p for a guest with a network (--net): the
// table's NetServed syscalls (recvmsg, recvmmsg) are notified on host fds
// too, and so are the ioctl commands of dispatch.NetIoctls (FIONREAD,
// SIOCOUTQ); kbox serves them for internet sockets and continues the
// others.
func WithNet(p *seccomp.Policy) {
	served := tableNames(func(s *dispatch.Syscall) bool {
		return s.How == dispatch.HostFD && s.Facts&dispatch.NetServed != 0
	})
	p.HostFD = dropNames(p.HostFD, served)
	p.IoctlNotify = append(p.IoctlNotify, dispatch.NetIoctls...)
}

// tableNames are the names of the syscall table's entries that match.
func tableNames(match func(s *dispatch.Syscall) bool) map[string]bool {
	names := map[string]bool{}
	dispatch.Syscalls(func(nr int, s *dispatch.Syscall) {
		if match(s) {
			names[s.Name] = true
		}
	})
	return names
}

// dropNames returns list without the names in drop.
func dropNames(list []string, drop map[string]bool) []string {
	var keep []string
	for _, n := range list {
		if !drop[n] {
			keep = append(keep, n)
		}
	}
	return keep
}

// InProcess returns the filter policy of the in-process tiers' guest
// threads, but for the trusted ranges (kbox's own code), for a guest
// with fds [0, guestFDs), with a network (net) or not, with the rewrite
// tier (rewrite) or not. It is the seccomp tier's, without IPC namespace,
// with SECCOMP_RET_TRAP where that notifies, and the table's InProc
// column on top: what the in-process tier answers itself (InProc.Own),
// FDGuard's and, under the rewrite tier, Inline's syscalls are trapped
// on every fd; GuestFDs ones run natively on the guest's fds only (in
// argument 0 and the table's other fd argument: epoll_ctl's target). Every
// clone is trapped (the tier makes the threads), and every F_DUPFD.
func InProcess(guestFDs uint32, net, rewrite bool) *seccomp.Policy {
	p := Seccomp(guestFDs, false)
	if net {
		WithNet(p) // recvmsg and recvmmsg are trapped anyway
	}
	trapped := tableNames(func(s *dispatch.Syscall) bool {
		return s.InProc.Own() || s.InProc == dispatch.FDGuard || s.InProc == dispatch.GuestFDs ||
			rewrite && s.InProc == dispatch.Inline
	})
	p.Allow = dropNames(p.Allow, trapped)
	p.NotifyIf = nil
	p.HostFD = append(dropNames(p.HostFD, trapped),
		dispatch.Names(func(s *dispatch.Syscall) bool { return s.InProc == dispatch.GuestFDs })...)
	// A GuestFDs call's second fd (epoll_ctl's target) is checked too.
	p.FDArg = map[string]int{}
	dispatch.Syscalls(func(nr int, s *dispatch.Syscall) {
		if more := s.FDs.FDArgs() &^ 1; s.InProc == dispatch.GuestFDs && more != 0 {
			p.FDArg[s.Name] = bits.TrailingZeros8(more)
		}
	})
	p.IoctlNotify = append(p.IoctlNotify, dispatch.FDIoctls...)
	p.Notify = unix.SECCOMP_RET_TRAP
	p.DupfdAlways = true
	return p
}
