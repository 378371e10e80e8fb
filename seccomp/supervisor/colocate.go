package supervisor

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// colocationHold is how long a pin outlives the last notification of its
// task.
const colocationHold = 20 * time.Millisecond

// colocator keeps the guest task that opens files and the serving thread on
// one CPU, and hides that from the guest.
//
// ADDFD is a round trip of its own: the ioctl wakes the waiting task so that
// it installs the fd, then sleeps until the task has done so. Both wake-ups
// are plain ones (the kernel's sync wake-up flag covers only the
// notification and the reply), so the scheduler sends the woken task to an
// idle CPU: two cross-CPU wake-ups, each an IPI and, in a VM, an exit from
// the idle halt. On this machine class an ADDFD answer costs ~40 µs that
// way and ~8 µs with both tasks on one CPU.
//
// Changing the masks for every ADDFD and back costs ~2 µs per
// sched_setaffinity, so the pin is sticky: the first ADDFD for a task pins
// it and the serving thread to the serving thread's CPU, and later ADDFDs
// for the same task cost nothing. At most one guest task is pinned: an
// ADDFD for another task moves the pin to it; when no task is pinned, any
// notification pins its task (touch). Both masks are restored when the
// pinned task has not been served for hold, when it forks (so children
// inherit its own mask), when the guest sets its mask itself, and at the
// end.
// While pinned, the guest's sched_getaffinity reports the task's own mask
// (dispatch/sched.go asks Mask).
type colocator struct {
	enabled bool
	hold    time.Duration
	self    unix.CPUSet // the serving thread's own mask
	selfTid int

	uses atomic.Uint64 // bumped by every use of the pin; the release loop watches it

	// tid is the pinned guest task, 0 when none. It changes only under
	// mu; the per-notification checks read it without the lock.
	tid atomic.Int64

	mu      sync.Mutex
	cpu     int         // the CPU both are pinned to, -1 when none
	guest   unix.CPUSet // the pinned task's own mask
	looping bool        // the release loop runs
}

// newColocator reads the serving thread's mask; with a single CPU there is
// nothing to gain and colocation stays off. It must run on the serving
// thread.
func newColocator(hold time.Duration) *colocator {
	c := &colocator{hold: hold, cpu: -1, selfTid: unix.Gettid()}
	if unix.SchedGetaffinity(0, &c.self) == nil && c.self.Count() > 1 {
		c.enabled = true
	}
	return c
}

// pin colocates task tid (asleep in its notified syscall) with the serving
// thread, on the CPU the serving thread runs on. It does nothing when tid
// may not run there. It runs on the serving thread.
func (c *colocator) pin(tid int) {
	if c == nil || !c.enabled {
		return
	}
	c.uses.Add(1)
	if c.tid.Load() == int64(tid) {
		return // already together: the common case costs nothing
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restoreGuest()
	if c.cpu < 0 {
		cpu, ok := currentCPU()
		if !ok {
			return
		}
		var one unix.CPUSet
		one.Set(cpu)
		if unix.SchedSetaffinity(0, &one) != nil {
			return
		}
		c.cpu = cpu
		if !c.looping {
			c.looping = true
			go c.releaseLoop()
		}
	}
	if unix.SchedGetaffinity(tid, &c.guest) != nil || !c.guest.IsSet(c.cpu) {
		return
	}
	var one unix.CPUSet
	one.Set(c.cpu)
	if unix.SchedSetaffinity(tid, &one) == nil {
		c.tid.Store(int64(tid))
	}
}

// touch colocates task tid, which made a notification, when no task is
// pinned, and keeps a pin on it alive; it never moves a pin from another
// task (only an ADDFD, far costlier unpinned, does that). A pinned round
// trip is ~1 µs cheaper here.
func (c *colocator) touch(tid int) {
	if c == nil || !c.enabled {
		return
	}
	switch c.tid.Load() {
	case int64(tid):
		c.uses.Add(1)
	case 0:
		c.pin(tid)
	}
}

// restoreGuest gives the pinned task its own mask back. A task that died
// meanwhile gives ESRCH, which changes nothing. c.mu is held.
func (c *colocator) restoreGuest() {
	if t := c.tid.Swap(0); t != 0 {
		unix.SchedSetaffinity(int(t), &c.guest)
	}
}

// releaseAll restores both masks. c.mu is held.
func (c *colocator) releaseAll() {
	c.restoreGuest()
	if c.cpu >= 0 {
		unix.SchedSetaffinity(c.selfTid, &c.self)
		c.cpu = -1
	}
}

// releaseLoop ends the colocation once it went unused for a whole hold.
func (c *colocator) releaseLoop() {
	for {
		seen := c.uses.Load()
		time.Sleep(c.hold)
		c.mu.Lock()
		if c.uses.Load() == seen || c.cpu < 0 {
			c.releaseAll()
			c.looping = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

// close ends the colocation for good (the guest is gone).
func (c *colocator) close() {
	if c == nil || !c.enabled {
		return
	}
	c.mu.Lock()
	c.releaseAll()
	c.enabled = false
	c.mu.Unlock()
}

// Mask reports the mask task tid had before kbox pinned it; ok is false
// when kbox has not pinned it.
func (c *colocator) Mask(tid int) (mask unix.CPUSet, ok bool) {
	if c == nil || !c.enabled {
		return mask, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tid.Load() != int64(tid) {
		return mask, false
	}
	return c.guest, true
}

// Release gives task tid its own mask back, if kbox pinned it.
func (c *colocator) Release(tid int) {
	if c == nil || !c.enabled {
		return
	}
	c.mu.Lock()
	if c.tid.Load() == int64(tid) {
		c.restoreGuest()
	}
	c.mu.Unlock()
}

// Forget drops task tid without restoring its mask: the guest is about to
// set the mask itself.
func (c *colocator) Forget(tid int) {
	if c == nil || !c.enabled {
		return
	}
	c.mu.Lock()
	c.tid.CompareAndSwap(int64(tid), 0)
	c.mu.Unlock()
}
