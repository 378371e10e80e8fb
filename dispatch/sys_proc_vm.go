// The proc family's process_vm_readv(2) and process_vm_writev(2) (FamProc
// in table.go).

package dispatch

import "golang.org/x/sys/unix"

// capSysPtrace is CAP_SYS_PTRACE.
const capSysPtrace = 19

// sysProcessVM serves process_vm_readv(2) and process_vm_writev(2) between guest processes.
func sysProcessVM(e *Engine, r *Request) Result {
	// Between the guest's own processes they run on the host after Linux's
	// permission check by the guest's credentials (the host would judge by
	// kbox's, which every guest process shares); the host kernel then copies
	// and reports EFAULT, EINVAL and partial transfers itself. Any other
	// process is no task of the guest (ESRCH, as taskTarget). In an in-
	// process tier the guest is kbox's own process, whose memory the memory
	// guard keeps from it: refused (EPERM).
	if e.Keeper <= 0 {
		return errno(unix.EPERM, Denied)
	}
	if r.Args[5] != 0 {
		return errno(unix.EINVAL, Emulated)
	}
	pid := int32(r.Args[0])
	if pid <= 0 {
		return cont // the host finds no such task (ESRCH, after the iovecs' checks)
	}
	if !e.isGuest(int(pid)) {
		return errno(unix.ESRCH, Denied)
	}
	t := e.Lookup(int(pid))
	if t == nil || t.Tgid == r.P.Tgid {
		return cont
	}
	if ptraceDenied(r.P.creds(), t.creds()) {
		return errno(unix.EPERM, Emulated)
	}
	return cont
}

// ptraceDenied is Linux's ptrace_may_access check by real credentials
// (PTRACE_MODE_REALCREDS) of a caller c on another process's credentials
// t: the caller's uid must be the target's uid, euid and saved uid, and
// its gid the target's gid, egid and saved gid, unless it has
// CAP_SYS_PTRACE.
func ptraceDenied(c, t *procCred) bool {
	if c == nil || t == nil || c.Has(capSysPtrace) {
		return false
	}
	sameUser := c.UID == t.UID && c.UID == t.EUID && c.UID == t.SUID
	sameGroup := c.GID == t.GID && c.GID == t.EGID && c.GID == t.SGID
	return !sameUser || !sameGroup
}
