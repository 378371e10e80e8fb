//go:build linux && amd64 && cgo

package trap

import (
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Guest threads: clone with CLONE_THREAD becomes a new kbox-made thread
// (core.c) that starts in guest code with the parent's registers, the
// new stack and thread pointer; it inherits the seccomp filter from the
// thread that creates it. A clone without CLONE_THREAD (a new process) is
// refused (sysFork).

const threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD

func sysClone(th *thread, a *[6]uint64) bool {
	t := tr
	flags, stack, ptid, ctid, tls := a[0], a[1], a[2], a[3], a[4]
	if flags&threadFlags != threadFlags {
		return sysFork(th, a)
	}
	if flags&(unix.CLONE_VFORK|unix.CLONE_PARENT|unix.CLONE_NEWNS|unix.CLONE_NEWUSER|unix.CLONE_NEWPID|
		unix.CLONE_NEWNET|unix.CLONE_NEWIPC|unix.CLONE_NEWUTS|unix.CLONE_NEWCGROUP|unix.CLONE_PIDFD) != 0 {
		th.fail(unix.EINVAL)
		return true
	}
	nt, err := t.newThread()
	if err != nil {
		th.fail(sysabi.ErrnoOr(err, unix.EMFILE))
		return true
	}
	nt.k.Gregs = th.k.Gregs
	nt.k.Gregs[regRAX] = 0
	if stack != 0 {
		nt.k.Gregs[regRSP] = stack
	}
	nt.k.FSGuest = th.k.FSGuest
	if flags&unix.CLONE_SETTLS != 0 {
		nt.k.FSGuest = tls
	}
	copy(nt.xsave, th.fpArea())
	t.sig.mu.Lock()
	nt.mask = th.mask
	t.sig.mu.Unlock()
	if flags&unix.CLONE_CHILD_CLEARTID != 0 {
		nt.ctid = ctid
	}
	if flags&unix.CLONE_CHILD_SETTID != 0 {
		nt.setctid = ctid
	}
	if flags&unix.CLONE_PARENT_SETTID != 0 {
		nt.setptid = ptid // before the child runs, as the kernel writes it (warm)
	}
	if err := nt.start(nil); err != nil {
		t.drop(nt)
		th.fail(unix.EAGAIN)
		return true
	}
	<-nt.started
	th.ret(int64(nt.tid))
	return true
}

// drop forgets a thread that never started.
func (t *tier) drop(th *thread) {
	t.tmu.Lock()
	t.threads[th.slot].Store(nil)
	t.live--
	t.tmu.Unlock()
}

// sysExit ends the calling thread: its clear_child_tid is zeroed and
// woken (pthread_join), and the last thread's exit ends the guest.
func sysExit(th *thread, a *[6]uint64) bool {
	t := tr
	if th.ctid != 0 {
		if writeU32(&t.mem, th.ctid, 0) == nil {
			b := [6]uint64{th.ctid, 1 /* FUTEX_WAKE */, 1}
			native(unix.SYS_FUTEX, &b)
		}
	}
	th.die.Store(true)
	t.tmu.Lock()
	t.live--
	last := t.live == 0
	t.tmu.Unlock()
	if last {
		t.finish(Exit{Status: int(a[0] & 0xff)})
	}
	return true
}
