package seccomp

import "golang.org/x/sys/unix"

// BlockAsyncSignals blocks every asynchronous signal on the calling
// thread (a listener's serving thread, locked to its goroutine) and
// returns a function that restores its mask.
//
// A signal that interrupts the serving thread in SECCOMP_IOCTL_NOTIF_ADDFD
// makes the kernel restart the ioctl; with SECCOMP_ADDFD_FLAG_SEND, the
// guest could by then have been answered with a descriptor kbox was
// installing for it, while the restarted ioctl fails with ENOENT and kbox
// takes the open for failed (seen under load: a guest's O_WRONLY open
// returning a read-only descriptor, its writes EBADF, a file read back
// empty). The runtime's preemption signal (SIGURG) and process-directed
// signals such as SIGCHLD land on any thread that does not block them;
// other threads take them instead. Synchronous signals (faults) stay
// unblocked.
func BlockAsyncSignals() (restore func()) {
	var set, old unix.Sigset_t
	for sig := 1; sig <= 64; sig++ {
		switch unix.Signal(sig) {
		case unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGTRAP, unix.SIGSYS, unix.SIGKILL, unix.SIGSTOP:
			continue
		}
		set.Val[(sig-1)/64] |= 1 << (uint(sig-1) % 64)
	}
	if unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old) != nil {
		return func() {}
	}
	return func() { unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }
}
