// The signal family: signals between guest processes (FamSignal in
// table.go).

package dispatch

import (
	"os"
	"strconv"

	"github.com/kbox-project/kbox/procfs"
	"golang.org/x/sys/unix"
)

// Signals reach the guest's own tree only: the first guest process and
// its descendants (zombies included: their parent may still signal them).
// Within it they behave as on Linux, because the kernel delivers them:
// kbox checks the target and continues the syscall. A pid that does not
// exist gives ESRCH, as on Linux; a live process outside the tree gives
// EPERM. A process group (kill(0), kill(-pgrp)) is the guest's when every
// member is a guest process: the guest leads a group of its own
// (seccomp/supervisor/guestinit.c), so the keeper is in none of them.

// isGuest reports whether host pid is the first guest or one of its
// descendants, or a process orphaned in the guest's tree: the keeper is a
// subreaper, so those become its children, like the socket binder it
// forked (Binder), which is not the guest's. In an in-process tier (no
// keeper) the guest is kbox's own process: pid must be it or one of its
// threads; kbox's children (its socket binder) are not the guest's.
func (e *Engine) isGuest(pid int) bool {
	if e.Keeper <= 0 {
		if e.RootPid <= 0 || pid <= 0 {
			return false
		}
		tgid, ok := statusField(pid, "Tgid")
		return pid == e.RootPid || ok && tgid == e.RootPid
	}
	for i := 0; i < 64 && pid > 1; i++ {
		if pid == e.RootPid {
			return true
		}
		if pid == e.Binder && e.Binder > 0 {
			return false
		}
		ppid, ok := statusField(pid, "PPid")
		if !ok {
			return false
		}
		if ppid == e.Keeper && e.Keeper > 0 {
			return true
		}
		pid = ppid
	}
	return false
}

// exists reports whether host pid names a process or thread (a zombie
// too).
func exists(pid int) bool {
	return pid > 0 && unix.Access("/proc/"+strconv.Itoa(pid), unix.F_OK) == nil
}

func (e *Engine) signalTarget(r *Request, pid int) Result {
	switch {
	case pid == -1:
		return errno(unix.EPERM, Denied) // every process the user owns
	case pid == 0:
		pg, ok := pgrpOf(r.G.Pid())
		if !ok {
			return errno(unix.ESRCH, Host)
		}
		return e.groupTarget(pg)
	case pid < -1:
		return e.groupTarget(-pid)
	}
	if e.isGuest(pid) {
		if !e.maySignal(r, pid) {
			return errno(unix.EPERM, Emulated)
		}
		return cont
	}
	if !exists(pid) {
		return errno(unix.ESRCH, Host)
	}
	return errno(unix.EPERM, Denied)
}

// capKill is CAP_KILL.
const capKill = 5

// maySignal applies Linux's rule between guest credentials (the host sees
// one uid): the sender needs CAP_KILL, or its real or effective uid must
// be the target's real or saved uid; SIGCONT goes within a session. A
// process the engine does not know yet (forked, no notified syscall) has
// its parent's credentials: left to the kernel.
func (e *Engine) maySignal(r *Request, pid int) bool {
	var sig uint64
	switch r.Nr {
	case unix.SYS_KILL, unix.SYS_TKILL:
		sig = r.Args[1]
	case unix.SYS_TGKILL:
		sig = r.Args[2]
	default:
		return true // pidfd_open: no permission to check
	}
	t := e.procOf(pid)
	if t == nil || t == r.P {
		return true
	}
	s, d := r.P.creds(), t.creds()
	if s == nil || d == nil || s.Has(capKill) {
		return true
	}
	if s.EUID == d.SUID || s.EUID == d.UID || s.UID == d.SUID || s.UID == d.UID {
		return true
	}
	if sig == uint64(unix.SIGCONT) {
		sa, oka := statusField(r.G.Pid(), "NSsid")
		sb, okb := statusField(pid, "NSsid")
		return oka && okb && sa == sb
	}
	return false
}

// groupTarget allows a signal to process group pg when it is the guest's:
// its leader (the process whose pid the group's id is, and which made it)
// is a guest process, or else it has members and all are guest
// processes. The second check reads every process's /proc/PID/stat (a
// few ms with a hundred host processes), so the first one, the common
// case (kill(0) in the guest's own group), comes first: a group a guest
// made can hold another process only if that process joined it itself,
// from the same session. ESRCH for an empty group, EPERM for one with a
// process outside the guest's tree.
func (e *Engine) groupTarget(pg int) Result {
	if e.isGuest(pg) {
		return cont // the kernel answers ESRCH if pg leads no group
	}
	members := groupMembers(pg)
	for _, pid := range members {
		if !e.isGuest(pid) {
			return errno(unix.EPERM, Denied)
		}
	}
	if len(members) == 0 {
		return errno(unix.ESRCH, Host)
	}
	return cont
}

// groupMembers lists the host's processes in process group pg.
func groupMembers(pg int) []int {
	return pidsIn("/proc", func(pid int) bool {
		g, ok := pgrpOf(pid)
		return ok && g == pg
	})
}

// threadsOf lists the threads of process pid (pid itself if it has gone).
func threadsOf(pid int) []int {
	if t := pidsIn("/proc/"+strconv.Itoa(pid)+"/task", nil); len(t) > 0 {
		return t
	}
	return []int{pid}
}

// pidsIn lists the numeric entries of dir that keep (nil: all) keeps.
func pidsIn(dir string, keep func(int) bool) []int {
	ents, _ := os.ReadDir(dir)
	var ids []int
	for _, d := range ents {
		if id, err := strconv.Atoi(d.Name()); err == nil && (keep == nil || keep(id)) {
			ids = append(ids, id)
		}
	}
	return ids
}

// pgrpOf reads the process group of host process pid.
func pgrpOf(pid int) (int, bool) {
	st, ok := procfs.ReadPidStat(pid)
	return st.Pgrp, ok
}

// sysKill serves kill(2): guest processes only.
func sysKill(e *Engine, r *Request) Result { return e.signalTarget(r, int(int32(r.Args[0]))) }

// sysTgkill serves tgkill(2): guest threads only.
func sysTgkill(e *Engine, r *Request) Result {
	if int32(r.Args[0]) <= 0 || int32(r.Args[1]) <= 0 {
		return errno(unix.EINVAL, Denied)
	}
	return e.signalTarget(r, int(int32(r.Args[0])))
}

// sysTkill serves tkill(2): guest threads only.
func sysTkill(e *Engine, r *Request) Result {
	if int32(r.Args[0]) <= 0 {
		return errno(unix.EINVAL, Denied)
	}
	tgid, ok := statusField(int(int32(r.Args[0])), "Tgid")
	if !ok {
		return errno(unix.ESRCH, Host)
	}
	return e.signalTarget(r, tgid)
}

// rt_sigqueueinfo's pid is one process: 0 and negative ones name none.
func sysSigqueueinfo(e *Engine, r *Request) Result {
	if int32(r.Args[0]) <= 0 {
		return errno(unix.ESRCH, Host)
	}
	return e.signalTarget(r, int(int32(r.Args[0])))
}

// sysTgsigqueueinfo serves rt_tgsigqueueinfo(2): guest threads only.
func sysTgsigqueueinfo(e *Engine, r *Request) Result {
	if int32(r.Args[0]) <= 0 || int32(r.Args[1]) <= 0 {
		return errno(unix.EINVAL, Denied)
	}
	return e.signalTarget(r, int(int32(r.Args[0])))
}

// sysPidfdSendSignal serves pidfd_send_signal(2) natively.
func sysPidfdSendSignal(e *Engine, r *Request) Result {
	// It works on pidfds, which only pidfd_open (confined above) or
	// clone(CLONE_PIDFD) of the guest's own children can produce.
	return cont
}

// pipeSignal sends SIGPIPE to the guest thread for EPIPE, as the kernel
// would have without MSG_NOSIGNAL (kbox sends with it), and returns err.
func pipeSignal(err unix.Errno, flags int, g Guest, tgid, tid int) unix.Errno {
	if err == unix.EPIPE && flags&unix.MSG_NOSIGNAL == 0 {
		raise(g, tgid, tid, unix.SIGPIPE)
	}
	return err
}

// Raiser is a Guest whose tier delivers the guest's signals itself (the
// in-process tiers): Raise makes sig pending for the calling thread, as
// the kernel makes its own signal of a call (SIGPIPE, SIGXFSZ).
type Raiser interface{ Raise(sig int) }

// raise sends sig to guest g's calling thread tid (of process tgid).
func raise(g Guest, tgid, tid int, sig unix.Signal) {
	if rs, ok := g.(Raiser); ok {
		rs.Raise(int(sig))
		return
	}
	unix.Tgkill(tgid, tid, sig)
}
