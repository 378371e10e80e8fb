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

// affinityTarget is the task a sched_*affinity call names: pid 0 is the
// caller.
func affinityTarget(r *Request) int {
	if pid := int(int32(r.Args[0])); pid != 0 {
		return pid
	}
	return r.G.Pid()
}

// sysSchedGetaffinity serves sched_getaffinity(2): a pinned task sees its own mask.
func sysSchedGetaffinity(e *Engine, r *Request) Result {
	if res := e.taskTarget(int32(r.Args[0])); res.Action != Continue {
		return res
	}
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

// Syscalls that name a task by id act on the host's task of that id: a
// guest could renice, reschedule or read the scheduling of any host
// process kbox's uid may touch. Only the guest's own tasks are there for
// them (0 is the caller); any other id is ESRCH, as if the guest had a pid
// namespace of its own.
func (e *Engine) taskTarget(pid int32) Result {
	if pid == 0 || pid > 0 && e.isGuest(int(pid)) {
		return cont
	}
	return errno(unix.ESRCH, Denied)
}

// sysTaskArg0 serves getpgid(2), getsid(2), sched_getattr(2) and the rest of its family.
func sysTaskArg0(e *Engine, r *Request) Result { return e.taskTarget(int32(r.Args[0])) }

// sysPriority serves getpriority/setpriority (which, who, ...) and
// ioprio_get/ioprio_set (which, who, ...): PRIO_PROCESS/IOPRIO_WHO_PROCESS
// (1 for ioprio, 0 for priority) and the process-group forms name the
// guest's own processes only; the per-user forms, which reach every
// process of kbox's uid, are refused.
func sysPriority(e *Engine, r *Request) Result {
	which, who := int(r.Args[0]), int32(r.Args[1])
	if r.Nr == unix.SYS_IOPRIO_GET || r.Nr == unix.SYS_IOPRIO_SET {
		which-- // IOPRIO_WHO_PROCESS is 1, PRIO_PROCESS 0
	}
	switch which {
	case unix.PRIO_PROCESS:
		return e.taskTarget(who)
	case unix.PRIO_PGRP:
		if who == 0 {
			return cont
		}
		return e.groupTarget(int(who))
	case unix.PRIO_USER:
		return errno(unix.EPERM, Denied)
	}
	return cont // the kernel answers EINVAL
}

// sysSchedSetaffinity serves sched_setaffinity(2) on the host, ending kbox's pin.
func sysSchedSetaffinity(e *Engine, r *Request) Result {
	if res := e.taskTarget(int32(r.Args[0])); res.Action != Continue {
		return res
	}
	if e.Pins != nil {
		e.Pins.Forget(affinityTarget(r))
	}
	return cont
}

// sysClone serves clone(2), clone3(2), fork(2) and vfork(2).
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
