// The proc family's scheduling, affinity, clone and pidfds (FamProc in
// table.go).

package dispatch

import (
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Pins is a tier's record of the guest task it pinned to one CPU for speed
// (the seccomp tier's colocation). The guest must not see it: its own mask
// is reported, the guest's own mask changes end the pin, and the tasks a
// pinned task makes (fork and clone run natively, so they inherit the
// pin) get the mask they would have had.
type Pins interface {
	// Mask returns the mask task tid had before it was pinned; ok is
	// false when it is not pinned.
	Mask(tid int) (mask unix.CPUSet, ok bool)
	// Forget drops task tid's pin (tgid: its process, 0 if unknown)
	// without restoring its mask: the guest sets it.
	Forget(tid, tgid int)
	// Inherited is told of a task new to kbox (tid of process tgid,
	// whose parent is ppid) before its first notification is served:
	// if its maker held a pin, it gets its own mask back.
	Inherited(tid, tgid, ppid int)
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
// namespace of its own (the first guest process's parent, kbox's keeper,
// too: getppid says 0, shownParent in procserve.go). A negative id names no task: the
// kernel answers it (EINVAL for the sched_* calls, ESRCH for the others).
func (e *Engine) taskTarget(pid int32) Result {
	if pid <= 0 || e.isGuest(int(pid)) {
		return cont
	}
	return errno(unix.ESRCH, Denied)
}

// sysGetRobustList serves get_robust_list(2) for the caller only.
func sysGetRobustList(e *Engine, r *Request) Result {
	// The caller's own list (pid 0 or its own thread id) is read natively;
	// another guest task's is refused (EPERM: its robust-futex pointer is an
	// ASLR leak); any other id names no task of the guest (ESRCH,
	// taskTarget).
	pid := int32(r.Args[0])
	switch {
	case pid == 0 || int(pid) == r.G.Pid():
		return cont
	case pid < 0:
		return errno(unix.ESRCH, Emulated)
	}
	if res := e.taskTarget(pid); res.Action != Continue {
		return res
	}
	return errno(unix.EPERM, Denied)
}

// capSysNice is CAP_SYS_NICE.
const capSysNice = 23

// sysSchedSetscheduler serves sched_setscheduler(2) by guest credentials.
func sysSchedSetscheduler(e *Engine, r *Request) Result {
	// A real-time policy (SCHED_FIFO, SCHED_RR) needs CAP_SYS_NICE or a
	// priority within RLIMIT_RTPRIO: the guest's credentials decide, not
	// kbox's (the host would let a guest of a root kbox have it).
	pid := int32(r.Args[0])
	if res := e.taskTarget(pid); res.Action != Continue || pid < 0 {
		return res
	}
	if res := e.schedOwner(r); res.Action != Continue {
		return res
	}
	policy := int32(r.Args[1]) &^ unix.SCHED_RESET_ON_FORK
	if policy != unix.SCHED_FIFO && policy != unix.SCHED_RR {
		return cont
	}
	if c := r.P.creds(); c.Has(capSysNice) {
		return cont
	}
	var prio [4]byte
	if r.G.Read(r.Args[2], prio[:]) != nil {
		return cont // the kernel reports the EFAULT
	}
	target := int(pid)
	if target == 0 {
		target = r.G.Pid()
	}
	var lim unix.Rlimit
	if unix.Prlimit(target, unix.RLIMIT_RTPRIO, nil, &lim) != nil {
		return cont
	}
	p := int32(uint32(prio[0]) | uint32(prio[1])<<8 | uint32(prio[2])<<16 | uint32(prio[3])<<24)
	if p < 1 || p > 99 {
		return cont // the kernel's EINVAL
	}
	if uint64(p) > lim.Cur {
		return errno(unix.EPERM, Emulated)
	}
	return cont
}

// sysTaskArg0 serves getpgid(2), getsid(2), sched_getattr(2) and the rest of its family.
func sysTaskArg0(e *Engine, r *Request) Result { return e.taskTarget(int32(r.Args[0])) }

// sysPriority serves getpriority, setpriority, ioprio_get and ioprio_set for guest processes.
func sysPriority(e *Engine, r *Request) Result {
	// Arguments (which, who, ...). PRIO_PROCESS/IOPRIO_WHO_PROCESS (1 for ioprio, 0 for priority) and the
	// process-group forms name the guest's own processes only; getpriority
	// and setpriority by user are served over the guest's processes
	// (userPriority), ioprio's per-user forms, which reach every process of
	// kbox's uid, are refused.
	which, who := int(r.Args[0]), int32(r.Args[1])
	if r.Nr == unix.SYS_IOPRIO_GET || r.Nr == unix.SYS_IOPRIO_SET {
		which-- // IOPRIO_WHO_PROCESS is 1, PRIO_PROCESS 0
	}
	if r.Nr == unix.SYS_IOPRIO_SET && ioprioClass(r.Args[2]) == ioprioClassRT {
		// The kernel checks the class before the target.
		if c := r.P.creds(); !c.Has(capSysAdmin) && !c.Has(capSysNice) {
			return errno(unix.EPERM, Emulated)
		}
	}
	switch which {
	case unix.PRIO_PROCESS:
		if res := e.taskTarget(who); res.Action != Continue {
			return res
		}
		switch r.Nr {
		case unix.SYS_SETPRIORITY:
			return e.setNice(r, int(who))
		case unix.SYS_IOPRIO_SET:
			return e.setIoprio(r, int(who))
		}
		return cont
	case unix.PRIO_PGRP:
		if who != 0 {
			if res := e.groupTarget(int(who)); res.Action != Continue {
				return res
			}
		}
		switch r.Nr {
		case unix.SYS_SETPRIORITY:
			return e.setGroupNice(r, int(who))
		case unix.SYS_IOPRIO_SET:
			return e.setGroupIoprio(r, int(who))
		}
		return cont
	case unix.PRIO_USER:
		if r.Nr == unix.SYS_IOPRIO_GET || r.Nr == unix.SYS_IOPRIO_SET {
			return errno(unix.EPERM, Denied)
		}
		return e.userPriority(r, who)
	}
	return cont // the kernel answers EINVAL
}

// setNice checks setpriority(PRIO_PROCESS) by the guest's credentials,
// as Linux's set_one_prio does: the host process is kbox's, so the host
// would let any guest (kbox may be root) lower any guest task's nice
// value. Without CAP_SYS_NICE the target must be the caller's user (its
// uid or euid the caller's euid: EPERM), and a lower nice value than the
// target's must be within the target's RLIMIT_NICE (EACCES).
func (e *Engine) setNice(r *Request, who int) Result {
	c := r.P.creds()
	if c.Has(capSysNice) {
		return cont
	}
	tid := who
	if tid == 0 {
		tid = r.G.Pid()
	}
	target := r.P
	if p := e.Lookup(tid); p != nil {
		target = p
	}
	if en := niceDenied(c, target, tid, niceArg(r)); en != 0 {
		return errno(en, Emulated)
	}
	return cont
}

// niceArg is setpriority's value, clamped as the kernel does.
func niceArg(r *Request) int { return min(max(int(int32(r.Args[2])), -20), 19) }

// niceDenied is Linux's set_one_prio check of a caller without
// CAP_SYS_NICE (credentials c) setting task tid (of process target) to
// nice: EPERM unless the target is the caller's user, EACCES for a lower
// value than the task's beyond its RLIMIT_NICE, else 0.
func niceDenied(c *procCred, target *Proc, tid, nice int) unix.Errno {
	if tc := target.creds(); tc.UID != c.EUID && tc.EUID != c.EUID {
		return unix.EPERM
	}
	cur, _, en := unix.Syscall(unix.SYS_GETPRIORITY, unix.PRIO_PROCESS, uintptr(tid), 0)
	if en != 0 || nice >= 20-int(cur) {
		return 0 // not lower (or the kernel's own error)
	}
	var lim unix.Rlimit
	if unix.Prlimit(tid, unix.RLIMIT_NICE, nil, &lim) == nil && uint64(20-nice) <= lim.Cur {
		return 0
	}
	return unix.EACCES
}

// ioprio_set's class field and the real-time class.
const ioprioClassRT = 1

func ioprioClass(ioprio uint64) uint64 { return (ioprio >> 13) & 7 }

// setIoprio checks ioprio_set(IOPRIO_WHO_PROCESS) by the guest's
// credentials, as Linux's set_task_ioprio does: without CAP_SYS_NICE
// the target task's uid must be the caller's uid or euid (EPERM).
func (e *Engine) setIoprio(r *Request, who int) Result {
	tid := who
	if tid == 0 {
		tid = r.G.Pid()
	}
	if en := ioprioDenied(r.P.creds(), e.Lookup(tid)); en != 0 {
		return errno(en, Emulated)
	}
	return cont
}

// setGroupIoprio is setIoprio for IOPRIO_WHO_PGRP (pg 0: the
// caller's group): Linux stops at the first task it may not change.
func (e *Engine) setGroupIoprio(r *Request, pg int) Result {
	c := r.P.creds()
	if c.Has(capSysNice) {
		return cont
	}
	for _, pid := range e.guestGroup(r, pg) {
		if en := ioprioDenied(c, e.Lookup(pid)); en != 0 {
			return errno(en, Emulated)
		}
	}
	return cont
}

// guestGroup lists the guest's processes in process group pg (0: the
// caller's).
func (e *Engine) guestGroup(r *Request, pg int) []int {
	if pg == 0 {
		var found bool
		if pg, found = pgrpOf(r.P.Tgid); !found {
			return nil
		}
	}
	var pids []int
	for _, pid := range groupMembers(pg) {
		if e.isGuest(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ioprioDenied is set_task_ioprio's check of target (nil: unknown, left
// to the kernel) for a caller with credentials c.
func ioprioDenied(c *procCred, target *Proc) unix.Errno {
	if target == nil || c.Has(capSysNice) {
		return 0
	}
	if tc := target.creds(); tc.UID != c.EUID && tc.UID != c.UID {
		return unix.EPERM
	}
	return 0
}

// setGroupNice checks setpriority(PRIO_PGRP) by the guest's credentials:
// the host would apply it to every task of the group (groupTarget has
// made sure they are all the guest's) with kbox's. As Linux does, each
// task is checked alone: the ones that pass are set, and the call fails
// with the error of the last one that does not. pg 0 is the caller's
// group.
func (e *Engine) setGroupNice(r *Request, pg int) Result {
	c := r.P.creds()
	if c.Has(capSysNice) {
		return cont
	}
	nice := niceArg(r)
	var allowed []int
	var denied unix.Errno
	for _, pid := range e.guestGroup(r, pg) {
		p := e.Lookup(pid)
		if p == nil {
			continue
		}
		for _, tid := range threadsOf(pid) {
			if en := niceDenied(c, p, tid, nice); en != 0 {
				denied = en
			} else {
				allowed = append(allowed, tid)
			}
		}
	}
	if denied == 0 {
		return cont
	}
	for _, tid := range allowed {
		unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
	}
	return errno(denied, Emulated)
}

// sysSchedSetaffinity serves sched_setaffinity(2) on the host, ending kbox's pin.
func sysSchedSetaffinity(e *Engine, r *Request) Result {
	if res := e.taskTarget(int32(r.Args[0])); res.Action != Continue {
		return res
	}
	if res := e.schedOwner(r); res.Action != Continue {
		return res
	}
	if e.Pins != nil {
		target, tgid := affinityTarget(r), 0
		if p := (*e.procs.Load())[target]; p != nil {
			tgid = p.Tgid
		}
		e.Pins.Forget(target, tgid)
	}
	return cont
}

// sysClone serves the notified clone(2), fork(2) and vfork(2).
func sysClone(e *Engine, r *Request) Result {
	// Notified in the seccomp tier: only a clone with CLONE_PARENT and without
	// CLONE_THREAD or with a namespace flag, or every one when the agent
	// policy counts or refuses processes (ForkLike: the others run on the
	// host, never notified, so that a signal cannot make them fail with
	// EINTR). The in-process tiers make their threads themselves
	// (trap/threads.go).
	if en := cloneNamespaces(r); en != 0 {
		return errno(en, Denied)
	}
	if en := e.cloneCredOK(r); en != 0 {
		return errno(en, Denied)
	}
	return cont
}

// cloneNamespaces refuses a clone that makes namespaces, as unshare is
// refused (EPERM): on the host they would be namespaces the supervisor
// cannot model. Linux's EINVAL for flags that cannot go together comes
// first, as in Linux: a new mount or user namespace with CLONE_FS, a new
// user or pid namespace with CLONE_THREAD.
func cloneNamespaces(r *Request) unix.Errno {
	if r.Nr != unix.SYS_CLONE {
		return 0
	}
	f := r.Args[0]
	switch {
	case f&sysabi.CloneNamespaces == 0:
		return 0
	case f&(unix.CLONE_NEWNS|unix.CLONE_NEWUSER) != 0 && f&unix.CLONE_FS != 0,
		f&(unix.CLONE_NEWUSER|unix.CLONE_NEWPID) != 0 && f&unix.CLONE_THREAD != 0:
		return unix.EINVAL
	}
	return unix.EPERM
}

// cloneCredOK keeps CLONE_PARENT from handing a child credentials its
// creator does not have. A new process takes its credentials from its
// parent as kbox finds it (Lookup), and CLONE_PARENT makes that the
// caller's parent. So, once credentials differ between processes, it is
// refused (EPERM) unless the caller's parent has the caller's credentials.
// clone3, whose flags are in memory the filter cannot read, is answered
// ENOSYS by the filter (InFilter), and libc falls back to clone.
func (e *Engine) cloneCredOK(r *Request) unix.Errno {
	if !e.credsChanged.Load() || r.Nr != unix.SYS_CLONE {
		return 0
	}
	if r.Args[0]&unix.CLONE_PARENT == 0 || r.Args[0]&unix.CLONE_THREAD != 0 {
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
	return unix.EPERM
}

// sysPidfdOpen serves pidfd_open(2): guest processes only.
func sysPidfdOpen(e *Engine, r *Request) Result {
	if int32(r.Args[0]) <= 0 {
		return errno(unix.EINVAL, Denied)
	}
	return e.signalTarget(r, int(int32(r.Args[0])))
}

// sysSchedSet serves sched_setparam(2) and sched_setattr(2) by guest credentials.
func sysSchedSet(e *Engine, r *Request) Result {
	// The guest's tasks only, by the guest's credentials (schedOwner).
	if res := e.taskTarget(int32(r.Args[0])); res.Action != Continue {
		return res
	}
	return e.schedOwner(r)
}

// schedOwner is Linux's check_same_owner for the calls that change
// another task's scheduling (sched_setaffinity, sched_setparam,
// sched_setscheduler, sched_setattr): without CAP_SYS_NICE the caller's
// euid must be the target's uid or euid, else EPERM. The host would judge
// by kbox's uid, which every guest task shares. The errors Linux reports
// before it (a bad pointer's EFAULT, a priority the policy does not take,
// EINVAL) come first, found here, for the call must not reach the host.
func (e *Engine) schedOwner(r *Request) Result {
	pid := int32(r.Args[0])
	c := r.P.creds()
	if pid <= 0 || c == nil || c.Has(capSysNice) {
		return cont
	}
	t := e.Lookup(int(pid))
	if t == nil || t.Tgid == r.P.Tgid {
		return cont
	}
	if tc := t.creds(); tc == nil || tc.UID == c.EUID || tc.EUID == c.EUID {
		return cont
	}
	if en := schedArgsErr(r, int(pid)); en != 0 {
		return errno(en, Emulated)
	}
	return errno(unix.EPERM, Emulated)
}

// schedArgsErr is the error Linux finds in a sched_set* call's arguments
// before it checks the caller's permission (0: none found).
func schedArgsErr(r *Request, tid int) unix.Errno {
	switch r.Nr {
	case unix.SYS_SCHED_SETAFFINITY:
		var mask [8]byte
		if r.G.Read(r.Args[2], mask[:min(r.Args[1], 8)]) != nil {
			return unix.EFAULT
		}
		return 0
	case unix.SYS_SCHED_SETATTR:
		var size [4]byte
		switch {
		case r.Args[1] == 0 || r.Args[2] != 0:
			return unix.EINVAL
		case r.G.Read(r.Args[1], size[:]) != nil:
			return unix.EFAULT
		}
		return 0
	}
	policy := int32(r.Args[1]) &^ unix.SCHED_RESET_ON_FORK
	param := r.Args[2]
	if r.Nr == unix.SYS_SCHED_SETPARAM {
		cur, _, en := unix.Syscall(unix.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
		if en != 0 {
			return en
		}
		policy, param = int32(cur)&^unix.SCHED_RESET_ON_FORK, r.Args[1]
	}
	if param == 0 || int32(r.Args[1]) < 0 && r.Nr == unix.SYS_SCHED_SETSCHEDULER {
		return unix.EINVAL
	}
	var b [4]byte
	if r.G.Read(param, b[:]) != nil {
		return unix.EFAULT
	}
	prio := int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	switch policy {
	case unix.SCHED_FIFO, unix.SCHED_RR:
		if prio < 1 || prio > 99 {
			return unix.EINVAL
		}
	case unix.SCHED_NORMAL, unix.SCHED_BATCH, unix.SCHED_IDLE:
		if prio != 0 {
			return unix.EINVAL
		}
	default: // SCHED_DEADLINE too: a sched_param has none of its fields
		return unix.EINVAL
	}
	return 0
}

// userPriority serves getpriority and setpriority with PRIO_USER over the
// guest's tasks alone, as Linux does over the tasks of a pid namespace:
// the host's would reach every process of kbox's uid. The tasks are those
// whose guest real uid is who (0: the caller's); none is ESRCH. getpriority
// gives the highest of their priorities (20 - nice, as the syscall does);
// setpriority checks each task as setNice does, sets those that pass and
// fails with the error of the last one that does not.
func (e *Engine) userPriority(r *Request, who int32) Result {
	c := r.P.creds()
	uid := uint32(who)
	if who == 0 {
		uid = c.UID
	}
	if uid == ^uint32(0) {
		return errno(unix.ESRCH, Emulated) // no valid uid
	}
	set := r.Nr == unix.SYS_SETPRIORITY
	nice := niceArg(r)
	found, best := false, 0
	var denied unix.Errno
	for _, pid := range procfs.GuestTgids((*procSys)(e)) {
		p := e.Lookup(pid)
		if p == nil {
			continue
		}
		if pc := p.creds(); pc == nil || pc.UID != uid {
			continue
		}
		for _, tid := range threadsOf(pid) {
			if !set {
				prio, _, en := unix.Syscall(unix.SYS_GETPRIORITY, unix.PRIO_PROCESS, uintptr(tid), 0)
				if en == 0 {
					found, best = true, max(best, int(prio))
				}
				continue
			}
			found = true
			if !c.Has(capSysNice) {
				if en := niceDenied(c, p, tid, nice); en != 0 {
					denied = en
					continue
				}
			}
			unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
		}
	}
	switch {
	case !found:
		return errno(unix.ESRCH, Emulated)
	case denied != 0:
		return errno(denied, Emulated)
	case set:
		return ok(0, Emulated)
	}
	return ok(int64(best), Emulated)
}
