package dispatch

import "golang.org/x/sys/unix"

// Pins is a tier's record of the guest task it pinned to one CPU for speed
// (the seccomp tier's colocation). The guest must not see it: its own mask
// is reported, and forks and the guest's own mask changes undo the pin.
type Pins interface {
	// Mask returns the mask task tid had before it was pinned; ok is
	// false when it is not pinned.
	Mask(tid int) (mask unix.CPUSet, ok bool)
	// Release gives task tid its own mask back, if it is pinned.
	Release(tid int)
	// Forget drops task tid's pin without restoring its mask.
	Forget(tid int)
}

func init() {
	register(unix.SYS_SCHED_GETAFFINITY, sysSchedGetaffinity) // sched_getaffinity(2): a pinned task sees its own mask
	register(unix.SYS_SCHED_SETAFFINITY, sysSchedSetaffinity) // sched_setaffinity(2): on the host, ending kbox's pin
	register(unix.SYS_CLONE, sysClone)                        // clone(2): on the host, after kbox's pin is undone
	register(unix.SYS_CLONE3, sysClone)                       // clone3(2): as clone
}

// affinityTarget is the task a sched_*affinity call names: pid 0 is the
// caller.
func affinityTarget(r *Request) int {
	if pid := int(int32(r.Args[0])); pid != 0 {
		return pid
	}
	return r.G.Pid()
}

func sysSchedGetaffinity(e *Engine, r *Request) Result {
	if e.Pins == nil {
		return cont
	}
	mask, pinned := e.Pins.Mask(affinityTarget(r))
	if !pinned {
		return cont
	}
	// kbox's own call checks the length as the kernel would for the
	// guest, and gives the size the kernel reports.
	if r.Args[1]%8 != 0 {
		return errno(unix.EINVAL, Emulated)
	}
	var probe unix.CPUSet
	size, en := schedGetaffinity(min(r.Args[1], uint64(len(asBytes(&probe)))), &probe)
	if en != 0 {
		return errno(en, Emulated)
	}
	if err := r.G.Write(r.Args[2], asBytes(&mask)[:size]); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	return ok(int64(size), Emulated)
}

func sysSchedSetaffinity(e *Engine, r *Request) Result {
	if e.Pins != nil {
		e.Pins.Forget(affinityTarget(r))
	}
	return cont
}

func sysClone(e *Engine, r *Request) Result {
	if e.Pins != nil {
		e.Pins.Release(r.G.Pid()) // children inherit the parent's mask
	}
	if en := e.cloneCredOK(r); en != 0 {
		return errno(en, Denied)
	}
	if e.credsChanged.Load() {
		e.sweepDead() // the new task must not find a dead one's entry (proc.go)
	}
	return cont
}

// cloneCredOK keeps CLONE_PARENT from handing a child credentials its
// creator does not have. A new process takes its credentials from its
// parent as kbox finds it (Lookup), and CLONE_PARENT makes that the
// caller's parent. So, once credentials differ between processes, it is
// refused (EPERM) unless the caller's parent has the caller's credentials.
// clone3's flags are in guest memory, which another thread could change
// after kbox read them: a caller whose credentials differ from its
// parent's gets ENOSYS for clone3, and libc falls back to clone, whose
// flags are in registers.
func (e *Engine) cloneCredOK(r *Request) unix.Errno {
	if !e.credsChanged.Load() || r.Nr != unix.SYS_CLONE && r.Nr != unix.SYS_CLONE3 {
		return 0
	}
	if r.Nr == unix.SYS_CLONE && (r.Args[0]&unix.CLONE_PARENT == 0 || r.Args[0]&unix.CLONE_THREAD != 0) {
		return 0
	}
	c := r.P.creds()
	if r.P.Tgid == e.RootPid && c.Equal(&e.initCred.Cred) {
		return 0 // its parent is kbox's keeper, as if with these credentials
	}
	if ppid, found := statusField(r.P.Tgid, "PPid"); found {
		if parent := (*e.procs.Load())[ppid]; parent != nil && parent.creds().Equal(&c.Cred) {
			return 0
		}
	}
	if r.Nr == unix.SYS_CLONE3 {
		return unix.ENOSYS
	}
	return unix.EPERM
}
