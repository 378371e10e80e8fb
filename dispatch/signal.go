package dispatch

import (
	"golang.org/x/sys/unix"
)

func init() {
	register(unix.SYS_KILL, sysKill)                         // kill(2): guest processes only
	register(unix.SYS_TGKILL, sysTgkill)                     // tgkill(2): guest threads only
	register(unix.SYS_TKILL, sysTkill)                       // tkill(2): guest threads only
	register(unix.SYS_PIDFD_SEND_SIGNAL, sysPidfdSendSignal) // pidfd_send_signal(2)
	register(unix.SYS_PIDFD_OPEN, sysPidfdOpen)              // pidfd_open(2): guest processes only
}

// isGuest reports whether host pid is the first guest or one of its
// descendants.
func (e *Engine) isGuest(pid int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		if pid == e.RootPid {
			return true
		}
		ppid, ok := statusField(pid, "PPid")
		if !ok {
			return false
		}
		pid = ppid
	}
	return false
}

func (e *Engine) signalTarget(pid int) Result {
	switch {
	case pid == -1:
		return errno(unix.EPERM, Denied) // every process the user owns
	case pid == 0:
		return cont // the caller's own process group: a guest group
	case pid < -1:
		if e.isGuest(-pid) {
			return cont
		}
		return errno(unix.EPERM, Denied)
	}
	if e.isGuest(pid) {
		return cont
	}
	return errno(unix.EPERM, Denied)
}

func sysKill(e *Engine, r *Request) Result { return e.signalTarget(int(int32(r.Args[0]))) }

func sysTgkill(e *Engine, r *Request) Result {
	if int32(r.Args[0]) <= 0 {
		return errno(unix.EINVAL, Denied)
	}
	return e.signalTarget(int(int32(r.Args[0])))
}

func sysTkill(e *Engine, r *Request) Result {
	tgid, ok := statusField(int(int32(r.Args[0])), "Tgid")
	if !ok {
		return errno(unix.ESRCH, Host)
	}
	return e.signalTarget(tgid)
}

func sysPidfdOpen(e *Engine, r *Request) Result {
	if int32(r.Args[0]) <= 0 {
		return errno(unix.EINVAL, Denied)
	}
	return e.signalTarget(int(int32(r.Args[0])))
}

// pidfd_send_signal works on pidfds, which only pidfd_open (confined above)
// or clone(CLONE_PIDFD) of the guest's own children can produce.
func sysPidfdSendSignal(e *Engine, r *Request) Result { return cont }
