// The proc family's identity: uids, gids, groups, capabilities, the parent
// a process sees (FamProc in table.go).

package dispatch

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// Identity is emulated, always: each process's credentials live in its Proc
// (cred.go has the rules), the getters answer from there without an LKL
// call, and LKL checks file operations with them (cred.go). The guest's
// host process never changes its host ids.

// sysGetuid serves getuid(2).
func sysGetuid(e *Engine, r *Request) Result { return ok(int64(r.P.creds().UID), Emulated) }

// sysGeteuid serves geteuid(2).
func sysGeteuid(e *Engine, r *Request) Result { return ok(int64(r.P.creds().EUID), Emulated) }

// sysGetgid serves getgid(2).
func sysGetgid(e *Engine, r *Request) Result { return ok(int64(r.P.creds().GID), Emulated) }

// sysGetegid serves getegid(2).
func sysGetegid(e *Engine, r *Request) Result { return ok(int64(r.P.creds().EGID), Emulated) }

// writeRes writes the three ids of getresuid/getresgid, each to its own
// pointer, in order: a bad pointer stops there with EFAULT.
func writeRes(r *Request, ids [3]uint32) Result {
	var b [4]byte
	for i, id := range ids {
		binary.LittleEndian.PutUint32(b[:], id)
		if err := r.G.Write(r.Args[i], b[:]); err != nil {
			return errno(unix.EFAULT, Emulated)
		}
	}
	return ok(0, Emulated)
}

// sysGetresuid serves getresuid(2).
func sysGetresuid(e *Engine, r *Request) Result {
	c := r.P.creds()
	return writeRes(r, [3]uint32{c.UID, c.EUID, c.SUID})
}

// sysGetresgid serves getresgid(2).
func sysGetresgid(e *Engine, r *Request) Result {
	c := r.P.creds()
	return writeRes(r, [3]uint32{c.GID, c.EGID, c.SGID})
}

// sysGetgroups serves getgroups(2).
func sysGetgroups(e *Engine, r *Request) Result {
	size := int32(r.Args[0])
	groups := r.P.creds().Groups
	switch {
	case size < 0:
		return errno(unix.EINVAL, Emulated)
	case size == 0:
		return ok(int64(len(groups)), Emulated)
	case int(size) < len(groups):
		return errno(unix.EINVAL, Emulated)
	}
	if len(groups) > 0 {
		b := make([]byte, 4*len(groups))
		for i, g := range groups {
			binary.LittleEndian.PutUint32(b[4*i:], g)
		}
		if err := r.G.Write(r.Args[1], b); err != nil {
			return errno(unix.EFAULT, Emulated)
		}
	}
	return ok(int64(len(groups)), Emulated)
}

// setID applies a set*id change that succeeds or fails with an errno.
func (e *Engine) setID(r *Request, change func(Cred) (Cred, unix.Errno)) Result {
	n, en := change(r.P.creds().Cred)
	if en != 0 {
		return errno(en, Emulated)
	}
	e.setCred(r.P, n)
	return ok(0, Emulated)
}

// arg32 is argument i as the uid_t or gid_t the kernel takes (-1 included).
func arg32(r *Request, i int) uint32 { return uint32(r.Args[i]) }

// sysSetuid serves setuid(2).
func sysSetuid(e *Engine, r *Request) Result {
	return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.SetUID(arg32(r, 0)) })
}

// sysSetgid serves setgid(2).
func sysSetgid(e *Engine, r *Request) Result {
	return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.SetGID(arg32(r, 0)) })
}

// sysSetreuid serves setreuid(2).
func sysSetreuid(e *Engine, r *Request) Result {
	return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.SetREUID(arg32(r, 0), arg32(r, 1)) })
}

// sysSetregid serves setregid(2).
func sysSetregid(e *Engine, r *Request) Result {
	return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.SetREGID(arg32(r, 0), arg32(r, 1)) })
}

// sysSetresuid serves setresuid(2).
func sysSetresuid(e *Engine, r *Request) Result {
	return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.SetRESUID(arg32(r, 0), arg32(r, 1), arg32(r, 2)) })
}

// sysSetresgid serves setresgid(2).
func sysSetresgid(e *Engine, r *Request) Result {
	return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.SetRESGID(arg32(r, 0), arg32(r, 1), arg32(r, 2)) })
}

// setfsuid and setfsgid never fail: they return the previous id.
func sysSetfsuid(e *Engine, r *Request) Result {
	n, old := r.P.creds().SetFSUID(arg32(r, 0))
	e.setCred(r.P, n)
	return ok(int64(old), Emulated)
}

// sysSetfsgid serves setfsgid(2).
func sysSetfsgid(e *Engine, r *Request) Result {
	n, old := r.P.creds().SetFSGID(arg32(r, 0))
	e.setCred(r.P, n)
	return ok(int64(old), Emulated)
}

// sysSetgroups serves setgroups(2).
func sysSetgroups(e *Engine, r *Request) Result {
	c := r.P.creds()
	size := uint32(r.Args[0])
	// The kernel's order: permission, size, then the list.
	if !c.Has(capSetgid) {
		return errno(unix.EPERM, Emulated)
	}
	if size > NGroupsMax {
		return errno(unix.EINVAL, Emulated)
	}
	b := make([]byte, 4*size)
	if size > 0 {
		if err := r.G.Read(r.Args[1], b); err != nil {
			return errno(unix.EFAULT, Emulated)
		}
	}
	groups := make([]uint32, size)
	for i := range groups {
		groups[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.SetGroups(groups) })
}

// Capability header versions (linux/capability.h): version 1 carries 32
// bits per set, versions 2 and 3 carry 64.
const (
	capV1 = 0x19980330
	capV2 = 0x20071026
	capV3 = 0x20080522
)

// capVersion reads the version in capget/capset's header and returns the
// number of 32-bit words per set. An unknown version gets the kernel's
// answer: the preferred version written back and EINVAL.
func capVersion(r *Request) (words int, en unix.Errno) {
	var b [4]byte
	if err := r.G.Read(r.Args[0], b[:]); err != nil {
		return 0, unix.EFAULT
	}
	switch binary.LittleEndian.Uint32(b[:]) {
	case capV1:
		return 1, 0
	case capV2, capV3:
		return 2, 0
	}
	binary.LittleEndian.PutUint32(b[:], capV3)
	if err := r.G.Write(r.Args[0], b[:]); err != nil {
		return 0, unix.EFAULT
	}
	return 0, unix.EINVAL
}

// capPid reads the pid in capget/capset's header.
func capPid(r *Request) (int32, unix.Errno) {
	var b [4]byte
	if err := r.G.Read(r.Args[0]+4, b[:]); err != nil {
		return 0, unix.EFAULT
	}
	return int32(binary.LittleEndian.Uint32(b[:])), 0
}

// sysCapget serves capget(2).
func sysCapget(e *Engine, r *Request) Result {
	words, en := capVersion(r)
	if r.Args[1] == 0 && (en == 0 || en == unix.EINVAL) {
		return ok(0, Emulated) // a probe of the version
	}
	if en != 0 {
		return errno(en, Emulated)
	}
	pid, en := capPid(r)
	if en != 0 {
		return errno(en, Emulated)
	}
	if pid < 0 {
		return errno(unix.EINVAL, Emulated)
	}
	c := r.P.creds()
	if pid != 0 && int(pid) != r.G.Pid() && int(pid) != r.P.Tgid {
		p := (*e.procs.Load())[int(pid)]
		if p == nil && e.isGuest(int(pid)) {
			p = e.Lookup(int(pid))
		}
		if p == nil {
			return errno(unix.ESRCH, Emulated) // not a guest process
		}
		c = p.creds()
	}
	var b [24]byte
	for i := 0; i < words; i++ {
		binary.LittleEndian.PutUint32(b[12*i:], uint32(c.Eff>>(32*i)))
		binary.LittleEndian.PutUint32(b[12*i+4:], uint32(c.Perm>>(32*i)))
		binary.LittleEndian.PutUint32(b[12*i+8:], uint32(c.Inh>>(32*i)))
	}
	if err := r.G.Write(r.Args[1], b[:12*words]); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	return ok(0, Emulated)
}

// sysCapset serves capset(2).
func sysCapset(e *Engine, r *Request) Result {
	words, en := capVersion(r)
	if en != 0 {
		return errno(en, Emulated)
	}
	pid, en := capPid(r)
	if en != 0 {
		return errno(en, Emulated)
	}
	if pid != 0 && int(pid) != r.G.Pid() {
		return errno(unix.EPERM, Emulated) // only the calling thread
	}
	var b [24]byte
	if err := r.G.Read(r.Args[1], b[:12*words]); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	var eff, perm, inh uint64
	for i := 0; i < words; i++ {
		eff |= uint64(binary.LittleEndian.Uint32(b[12*i:])) << (32 * i)
		perm |= uint64(binary.LittleEndian.Uint32(b[12*i+4:])) << (32 * i)
		inh |= uint64(binary.LittleEndian.Uint32(b[12*i+8:])) << (32 * i)
	}
	return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.SetCaps(eff, perm, inh) })
}

// sysGetppid serves getppid(2): the parent /proc shows (shownParent).
func sysGetppid(e *Engine, r *Request) Result {
	ppid, _ := e.shownParent(r.P.Tgid)
	return ok(int64(ppid), Emulated)
}

// sysPrctl serves prctl(2): the guest's capability sets, securebits and no_new_privs; the rest natively.
func sysPrctl(e *Engine, r *Request) Result {
	// The host would answer these from kbox's host process, not the
	// guest's credentials (cred.go has the rules). PR_SET_SECCOMP is
	// checked, then run natively (kbox's own no_new_privs lets it).
	a2, a3, a4, a5 := r.Args[1], r.Args[2], r.Args[3], r.Args[4]
	c := r.P.creds()
	switch int32(r.Args[0]) {
	case unix.PR_CAPBSET_DROP, unix.PR_SET_SECUREBITS, unix.PR_SET_KEEPCAPS, unix.PR_CAP_AMBIENT, unix.PR_SET_NO_NEW_PRIVS, unix.PR_SET_SECCOMP:
		// prctl is OwnChange: the calls that may change the caller's
		// credentials move the stat cache's generation, which answers
		// prepared for a thread's credentials rely on (hint.go); the
		// rest (a shell's PR_SET_NAME for each command) do not.
		e.stats.Changed()
		defer e.changeDone()
	}
	switch int32(r.Args[0]) {
	case unix.PR_CAPBSET_READ:
		if a2 > CapLast {
			return errno(unix.EINVAL, Emulated)
		}
		return ok(int64(c.Bnd>>a2&1), Emulated)
	case unix.PR_CAPBSET_DROP:
		return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.CapbsetDrop(a2) })
	case unix.PR_GET_SECUREBITS:
		return ok(int64(c.Secure), Emulated)
	case unix.PR_SET_SECUREBITS:
		return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.SetSecurebits(a2) })
	case unix.PR_GET_KEEPCAPS:
		if c.secure(secKeepCaps) {
			return ok(1, Emulated)
		}
		return ok(0, Emulated)
	case unix.PR_SET_KEEPCAPS:
		return e.setID(r, func(c Cred) (Cred, unix.Errno) { return c.SetKeepCaps(a2) })
	case unix.PR_CAP_AMBIENT:
		v, n, en := c.Ambient(a2, a3, a4, a5)
		if en != 0 {
			return errno(en, Emulated)
		}
		e.setCred(r.P, n)
		return ok(v, Emulated)
	case unix.PR_GET_NO_NEW_PRIVS:
		if a2|a3|a4|a5 != 0 {
			return errno(unix.EINVAL, Emulated)
		}
		if c.NoNewPrivs {
			return ok(1, Emulated)
		}
		return ok(0, Emulated)
	case unix.PR_SET_NO_NEW_PRIVS:
		if a2 != 1 || a3|a4|a5 != 0 {
			return errno(unix.EINVAL, Emulated)
		}
		return e.setID(r, func(c Cred) (Cred, unix.Errno) { c.NoNewPrivs = true; return c, 0 })
	case unix.PR_SET_SECCOMP:
		if a2 == unix.SECCOMP_MODE_FILTER {
			return e.seccompFilter(r, 0, a3)
		}
	}
	return cont
}

// sysSeccomp serves seccomp(2): a filter needs the guest's no_new_privs or CAP_SYS_ADMIN.
func sysSeccomp(e *Engine, r *Request) Result {
	if r.Args[0] != unix.SECCOMP_SET_MODE_FILTER {
		return cont
	}
	return e.seccompFilter(r, r.Args[1], r.Args[2])
}

// seccompFilter checks the installation of a filter with flags from prog
// (a sock_fprog): with the guest's no_new_privs or CAP_SYS_ADMIN the host
// installs it (kbox's own no_new_privs lets it; it stacks on kbox's
// filter). Otherwise it fails as on Linux, in Linux's order: bad flags
// EINVAL, a program it cannot read EFAULT, an empty or oversized one
// EINVAL, else EACCES.
func (e *Engine) seccompFilter(r *Request, flags, prog uint64) Result {
	c := r.P.creds()
	if c.NoNewPrivs || c.Has(capSysAdmin) {
		return cont
	}
	const (
		tsync, listener, tsyncESRCH, killable = 1, 8, 16, 32
		known                                 = 0x3f
	)
	if flags&^known != 0 || flags&tsync != 0 && flags&listener != 0 && flags&tsyncESRCH == 0 ||
		flags&killable != 0 && flags&listener == 0 {
		return errno(unix.EINVAL, Emulated)
	}
	var b [16]byte // unsigned short len; struct sock_filter *filter
	if err := r.G.Read(prog, b[:]); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	if n := binary.LittleEndian.Uint16(b[:]); n == 0 || n > 4096 {
		return errno(unix.EINVAL, Emulated)
	}
	return errno(unix.EACCES, Denied)
}
