//go:build linux && amd64 && cgo

package trap

import (
	"golang.org/x/sys/unix"
)

// Restarting a syscall that a signal interrupted, as Linux's signal
// delivery does (signal(7), "Interruption of system calls and library
// functions by signal handlers"). A syscall that waits ends, when a
// signal is to be taken, with one of the kernel's restart codes, and the
// delivery decides from the action of the first signal whose handler
// runs: ERESTARTSYS restarts the call after the handler when it has
// SA_RESTART and is EINTR otherwise; ERESTARTNOINTR always restarts;
// ERESTARTNOHAND and ERESTART_RESTARTBLOCK are EINTR when a handler runs.
// When no handler runs (a stop, a signal taken by another thread), every
// one restarts. Restarting points the thread back at its syscall
// instruction with the number in %rax: it traps (or, at a patched site,
// enters kbox through the site's SIGILL) and is served again.
//
// Where the codes come from:
//   - a deferred call (a FIFO open, a socket wait) that a signal ends
//     (guest.go): ERESTARTSYS, or EINTR when a timeout makes Linux give it
//     (the engine says which: InterruptWith);
//   - a syscall kbox makes in kbox mode for the guest (cont.go), ended by
//     the kick (core.c's kbox_trap_native);
//   - a native syscall of guest code (a read of a pipe, futex) that the
//     kick interrupted: the kick's handler has SA_RESTART, so the kernel
//     rewound the thread onto its syscall; kbox takes that back
//     (interruptedNative) and applies the guest's own flags.

const (
	errRestartSys      = 512
	errRestartNoIntr   = 513
	errRestartNoHand   = 514
	errRestartBlock    = 516
	futexLockPI        = 6
	futexWaitRequeuePI = 11
	futexLockPI2       = 13
	futexCmdMask       = 0x7f
)

// fixRestart applies the rules above to the result of the syscall th
// comes back from (th.sysNr, -1: none), for act, the action of the first
// signal whose handler runs (nil: none runs). Only its first call after a
// syscall acts.
func (th *thread) fixRestart(act *kaction) {
	nr := th.sysNr
	if nr < 0 {
		return
	}
	th.sysNr = -1
	g := &th.k.Gregs
	switch -int64(g[regRAX]) {
	case errRestartSys:
		if act != nil && act.flags&saRestart == 0 {
			th.fail(unix.EINTR)
			return
		}
	case errRestartNoIntr:
	case errRestartNoHand, errRestartBlock:
		if act != nil {
			th.fail(unix.EINTR)
			return
		}
	default:
		return
	}
	g[regRAX] = uint64(nr)
	g[regRIP] -= 2
}

// interruptedNative recognises a native syscall of guest code that the
// kick interrupted and the kernel rewound for a restart: %rip on a
// syscall instruction, %rcx the address after it and %r11 the flags (as
// the syscall instruction left them: a thread merely about to make the
// syscall has other values there). It turns the rewind back into the
// restart code the call returned, for fixRestart to decide with the
// guest's flags. A futex wait of a PI lock returned ERESTARTNOINTR (it
// always restarts); every other call that rewinds, ERESTARTSYS.
func (th *thread) interruptedNative() {
	g := &th.k.Gregs
	ip := g[regRIP]
	if g[regRCX] != ip+2 || g[regR11] != g[regEFL] || g[regRAX] >= 512 {
		return
	}
	var insn [2]byte
	if readMem(ip, insn[:]) != nil || insn != [2]byte{0x0f, 0x05} {
		return
	}
	nr := int(g[regRAX])
	code := errRestartSys
	if nr == unix.SYS_FUTEX {
		switch g[regRSI] & futexCmdMask {
		case futexLockPI, futexLockPI2, futexWaitRequeuePI:
			code = errRestartNoIntr
		}
	}
	th.sysNr = nr
	g[regRAX] = uint64(-int64(code))
	g[regRIP] = ip + 2
}
