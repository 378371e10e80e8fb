package tierpolicy

import (
	"math/bits"
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
	notify, allow := uint32(seccomp.RetUserNotif), uint32(seccomp.RetAllow)
	type route struct {
		name     string
		fd       uint64
		want     uint32
		cmd, arg uint64 // args[1] and args[2]
		flags    uint64 // args[3]
		addr     uint64 // args[4]
	}
	check := func(p *seccomp.Policy, routes []route) {
		t.Helper()
		prog, err := p.Assemble()
		if err != nil || len(prog) == 0 {
			t.Fatalf("assemble for %s: %v", p.Arch.Name, err)
		}
		for _, c := range routes {
			nr, ok := p.Arch.Nr(c.name)
			if !ok {
				t.Errorf("%s: no syscall %s", p.Arch.Name, c.name)
				continue
			}
			if got := p.Decide(nr, p.Arch.AuditArch, [6]uint64{c.fd, c.cmd, c.arg, c.flags, c.addr}); got != c.want {
				t.Errorf("%s %s(fd %d, %d, %d, addr %#x) = %#x, want %#x", p.Arch.Name, c.name, c.fd, c.cmd, c.arg, c.addr, got, c.want)
			}
		}
	}
	// Without namespaces of its own, the guest's System V IPC is notified
	// (and refused: dispatch/sys_other_ipc.go); with them POSIX message
	// queues and shmdt run natively, and the System V calls that check
	// permissions reach kbox, which checks the guest's credentials
	// (dispatch/sys_other_sysv.go).
	check(Seccomp(1024, false), []route{
		{name: "shmget", want: notify},
		{name: "semop", want: notify},
		{name: "mq_open", want: notify},
	})
	check(Seccomp(1024, true), []route{
		{name: "shmget", want: notify},
		{name: "shmat", want: notify},
		{name: "shmdt", want: allow},
		{name: "semop", want: notify},
		{name: "semtimedop", want: notify},
		{name: "msgrcv", want: notify},
		{name: "mq_timedsend", want: allow},
		// Sockets: what names an address reaches kbox, the rest is native.
		{name: "socket", want: notify},
		{name: "bind", fd: 3, want: notify},
		{name: "connect", fd: 3, want: notify},
		{name: "sendmsg", fd: 3, want: notify}, // its msghdr may name a path
		{name: "sendmmsg", fd: 3, want: notify},
		{name: "sendto", fd: 3, want: allow},                                               // send(2)
		{name: "sendto", fd: 3, addr: 0x7fff0000, want: notify},                            // with an address
		{name: "sendto", fd: 3, flags: unix.MSG_MORE, want: notify},                        // corked in LKL (inet/more.go)
		{name: "sendto", fd: 3, flags: unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL, want: allow}, // other flags: native
		{name: "recvmsg", fd: 3, want: allow},
		{name: "recvfrom", fd: 3, want: allow},                            // recv(2)
		{name: "recvfrom", fd: 3, flags: unix.MSG_ERRQUEUE, want: notify}, // an internet stream's error queue is LKL's
		{name: "recvfrom", fd: 3, flags: unix.MSG_PEEK, want: allow},
		{name: "recvfrom", fd: 3, addr: 0x7fff0000, want: notify}, // an internet socket's source is LKL's
		{name: "accept4", fd: 3, want: notify},                    // an internet socket's is LKL's
		{name: "listen", fd: 3, want: notify},
		// An internet socket's name and options are LKL's.
		{name: "getsockname", fd: 3, want: notify},
		{name: "setsockopt", fd: 3, want: notify},
		{name: "accept4", fd: 1024, want: notify},
		{name: "socketpair", want: allow},
		{name: "recvmmsg", fd: 3, want: allow},
		{name: "ioctl", fd: 3, cmd: 0x541b, want: allow}, // FIONREAD
	})
	// With --net, recvmsg and recvmmsg (an internet datagram socket's
	// source is LKL's) and FIONREAD/SIOCOUTQ (LKL's queue) reach kbox on
	// host fds too; other ioctls and receives stay native.
	withNet := Seccomp(1024, true)
	WithNet(withNet)
	check(withNet, []route{
		{name: "recvmsg", fd: 3, want: notify},
		{name: "recvmmsg", fd: 3, want: notify},
		{name: "recvfrom", fd: 3, want: allow},
		{name: "read", fd: 3, want: allow},
		{name: "ioctl", fd: 3, cmd: 0x541b, want: notify}, // FIONREAD, SIOCINQ
		{name: "ioctl", fd: 3, cmd: 0x5411, want: notify}, // SIOCOUTQ
		{name: "ioctl", fd: 3, cmd: 0x5401, want: allow},  // TCGETS
		{name: "shmdt", want: allow},
	})
	p := Seccomp(1024, false)
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
		{"clone", uint64(unix.SIGCHLD), allow, 0, 0},                // fork: never notified, so never EINTR
		{"clone", unix.CLONE_PARENT, notify, 0, 0},                  // credentials checked (dispatch/sys_proc_sched.go)
		{"clone3", 0, seccomp.RetErrno | uint32(unix.ENOSYS), 0, 0}, // libc falls back to clone
		{"sched_getaffinity", 0, notify, 0, 0},                      // a pinned task sees its own mask
		{"read", 3, allow, 0, 0},                                    // host fd (pipe, terminal, shadow memfd): native
		{"read", 1024, notify, 0, 0},                                // virtual fd: served by kbox
		{"getdents64", 3, allow, 0, 0},                              // a directory from a host route
		{"getdents64", 1030, notify, 0, 0},
		{"fchmod", 1030, notify, 0, 0},
		{"fsync", 3, notify, 0, 0}, // a writable shadow is written back
		{"fdatasync", 3, notify, 0, 0},
		{"fcntl", 3, allow, unix.F_SETFL, unix.O_APPEND | unix.O_NONBLOCK},
		{"fcntl", 0, allow, unix.F_DUPFD_CLOEXEC, 10},
		{"fcntl", 0, notify, unix.F_DUPFD_CLOEXEC, 1025}, // busybox sh saving fd 0 above a virtual fd
		{"fcntl", 1030, notify, unix.F_GETFL, 0},
		{"sethostname", 0, notify, 0, 0},     // LKL's name (dispatch/sys_proc_sys.go)
		{"setdomainname", 0, notify, 0, 0},   // LKL's name
		{"umask", 0, notify, 0, 0},           // kept for creates in LKL (dispatch/umask.go)
		{"personality", 0, allow, 0, 0},      // takes effect at the host's exec
		{"set_tid_address", 0, notify, 0, 0}, // a new program's first syscall (dispatch/sys_proc_exec.go)
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

// TestPolicyFollowsTable: the filter does with every syscall what its
// entry in the syscall table says (dispatch/table.go), with the guest's
// own namespaces and without; make test-arm64 runs it for aarch64.
func TestPolicyFollowsTable(t *testing.T) {
	notify, allow := uint32(seccomp.RetUserNotif), uint32(seccomp.RetAllow)
	for _, ns := range []bool{true, false} {
		p := Seccomp(1024, ns)
		if _, err := p.Assemble(); err != nil {
			t.Fatal(err)
		}
		dispatch.Syscalls(func(nr int, s *dispatch.Syscall) {
			verdict := func(fd uint64) uint32 {
				if s.Facts&dispatch.FDArg4 != 0 { // mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 0)
					return p.Decide(uint32(nr), p.Arch.AuditArch, [6]uint64{0, 4096, 1, 2, fd})
				}
				return p.Decide(uint32(nr), p.Arch.AuditArch, [6]uint64{fd})
			}
			if s.Facts&dispatch.FDArg4 != 0 {
				if got := verdict(0xffffffff); got != allow {
					t.Errorf("%s with fd -1 (anonymous): %#x, want %#x", s.Name, got, allow)
				}
			}
			var want, wantVirtual uint32
			switch s.How {
			case dispatch.Native:
				want, wantVirtual = allow, allow
			case dispatch.NativeInNS:
				want, wantVirtual = notify, notify
				if ns {
					want, wantVirtual = allow, allow
				}
			case dispatch.HostFD:
				want, wantVirtual = allow, notify
			case dispatch.Refused:
				if s.Errno != unix.EPERM {
					t.Errorf("%s: refused with %v: the filter refuses with EPERM only", s.Name, s.Errno)
				}
				want = seccomp.RetErrno | uint32(unix.EPERM)
				wantVirtual = want
			case dispatch.Served, dispatch.Absent:
				want, wantVirtual = notify, notify
				if s.Facts&dispatch.FilterHostFD != 0 {
					want = allow
				}
			}
			if s.Facts&dispatch.ForkLike != 0 {
				// fd 3 and 1030 as clone flags: no CLONE_PARENT.
				want, wantVirtual = allow, allow
				parent := uint32(allow)
				if s.Name == "clone" {
					parent = notify
				}
				if got := p.Decide(uint32(nr), p.Arch.AuditArch, [6]uint64{unix.CLONE_PARENT}); got != parent {
					t.Errorf("%s with CLONE_PARENT: %#x, want %#x", s.Name, got, parent)
				}
				q := Seccomp(1024, ns)
				NotifyForks(q)
				if got := q.Decide(uint32(nr), q.Arch.AuditArch, [6]uint64{3}); got != notify {
					t.Errorf("%s with NotifyForks (an agent policy counting processes): %#x, want %#x", s.Name, got, notify)
				}
			}
			if s.Facts&dispatch.InFilter != 0 {
				want = seccomp.RetErrno | uint32(s.Errno)
				wantVirtual = want
			}
			if got := verdict(3); got != want {
				t.Errorf("%s (%s, IPC namespace %v) on fd 3: %#x, want %#x", s.Name, s.How, ns, got, want)
			}
			if got := verdict(1030); got != wantVirtual {
				t.Errorf("%s (%s, IPC namespace %v) on a virtual fd: %#x, want %#x", s.Name, s.How, ns, got, wantVirtual)
			}
			// A HostFD call's other fd argument (epoll_ctl's target,
			// splice's output) is notified when virtual too.
			if more := s.FDs.FDArgs() &^ 1; s.How == dispatch.HostFD && more != 0 {
				args := [6]uint64{3, 3, 3, 3, 3, 3}
				args[bits.TrailingZeros8(more)] = 1030
				if got := p.Decide(uint32(nr), p.Arch.AuditArch, args); got != notify {
					t.Errorf("%s with virtual fd argument %d: %#x, want %#x", s.Name, bits.TrailingZeros8(more), got, notify)
				}
			}
		})
	}
}

// TestInProcessFollowsTable: the in-process tiers' filter traps what the
// table's InProc column says on top of the seccomp tier's verdicts: what
// the tier answers itself and FDGuard's on every fd, GuestFDs' above the
// guest's fds, Inline's under the rewrite tier only, and every clone.
func TestInProcessFollowsTable(t *testing.T) {
	trap, allow := uint32(unix.SECCOMP_RET_TRAP), uint32(seccomp.RetAllow)
	for _, rewrite := range []bool{false, true} {
		p := InProcess(1024, false, rewrite)
		if _, err := p.Assemble(); err != nil {
			t.Fatal(err)
		}
		base := Seccomp(1024, false)
		dispatch.Syscalls(func(nr int, s *dispatch.Syscall) {
			for _, fd := range []uint64{3, 1030} {
				args := [6]uint64{fd}
				want := base.Decide(uint32(nr), p.Arch.AuditArch, args)
				if want == uint32(seccomp.RetUserNotif) {
					want = trap
				}
				switch {
				case s.InProc.Own(), s.InProc == dispatch.FDGuard, s.Name == "clone":
					if want == allow || s.Name == "clone" {
						want = trap
					}
				case s.InProc == dispatch.GuestFDs:
					want = allow
					if fd >= 1024 {
						want = trap
					}
				case s.InProc == dispatch.Inline && rewrite:
					want = trap
				}
				if got := p.Decide(uint32(nr), p.Arch.AuditArch, args); got != want {
					t.Errorf("%s (InProc %d, rewrite %v) on fd %d: %#x, want %#x", s.Name, s.InProc, rewrite, fd, got, want)
				}
			}
			// A GuestFDs call's other fd argument (epoll_ctl's
			// target) above the guest's fds is trapped as well.
			if more := s.FDs.FDArgs() &^ 1; s.InProc == dispatch.GuestFDs && more != 0 {
				args := [6]uint64{3, 3, 3, 3, 3, 3}
				args[bits.TrailingZeros8(more)] = 1030
				if got := p.Decide(uint32(nr), p.Arch.AuditArch, args); got != trap {
					t.Errorf("%s with fd argument %d above the guest's: %#x, want a trap", s.Name, bits.TrailingZeros8(more), got)
				}
			}
		})
	}
}
