package supervisor

import "golang.org/x/sys/unix"

// colocator keeps a notifying task and the serving thread on one CPU while
// an ADDFD runs.
//
// ADDFD is a round trip of its own: the ioctl wakes the waiting task so that
// it installs the fd, then sleeps until the task has done so. Both wake-ups
// are plain ones (the kernel's sync wake-up flag covers only the
// notification and the reply), so the scheduler sends the woken task to an
// idle CPU: two cross-CPU wake-ups, each an IPI and, in a VM, an exit from
// the idle halt. That made an open about three times the cost of a stat.
// With both tasks allowed only on the CPU the serving thread runs on (the
// notifying task is asleep, so changing its mask moves nothing), each
// wake-up is a switch on that CPU. Both masks are restored as soon as the
// fds are in, before the reply when the reply is separate.
type colocator struct {
	enabled bool
	self    unix.CPUSet // the serving thread's own mask
	guest   unix.CPUSet // the pinned task's mask before pinning
	tid     int         // the pinned task, 0 when none
}

// newColocator reads the serving thread's mask; with a single CPU there is
// nothing to gain and colocation stays off.
func newColocator() *colocator {
	c := &colocator{}
	if unix.SchedGetaffinity(0, &c.self) == nil && c.self.Count() > 1 {
		c.enabled = true
	}
	return c
}

// pin moves nothing: it narrows the masks of task tid (asleep in its
// notified syscall) and of the serving thread to the current CPU. It does
// nothing when tid may not run there.
func (c *colocator) pin(tid int) {
	if c == nil || !c.enabled || c.tid != 0 {
		return
	}
	cpu, ok := currentCPU()
	if !ok || unix.SchedGetaffinity(tid, &c.guest) != nil || !c.guest.IsSet(cpu) {
		return
	}
	var one unix.CPUSet
	one.Set(cpu)
	if unix.SchedSetaffinity(tid, &one) != nil {
		return
	}
	c.tid = tid
	unix.SchedSetaffinity(0, &one)
}

// unpin restores both masks. A task that died meanwhile gives ESRCH, which
// changes nothing.
func (c *colocator) unpin() {
	if c == nil || c.tid == 0 {
		return
	}
	unix.SchedSetaffinity(c.tid, &c.guest)
	unix.SchedSetaffinity(0, &c.self)
	c.tid = 0
}
