package supervisor

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/hostproc"
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
// pinned task has not been served for hold, when the guest sets its mask
// itself, and at the end.
// While pinned, the guest's sched_getaffinity reports the task's own mask
// (dispatch/sys_proc_sched.go asks Mask).
//
// Heirs. fork and clone run natively (a notified one could fail with
// EINTR), so a pinned task's new threads and children inherit the pin's
// one-CPU mask. Each heir gets the mask it would have had:
//   - at its first notification (Inherited, from the engine's Lookup),
//     when the task that made it held a pin: the pins held lately are
//     kept (pins) for that;
//   - once the pin has moved or ended, for heirs that made no
//     notification yet (a compute-bound child): the release loop walks
//     the pinned task's threads and children (walkHeirs).
//
// A task that set its own mask through kbox (Forget) is no longer taken
// for a pin's: its records go.
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
	tgid    int         // the pinned task's process
	guest   unix.CPUSet // the pinned task's own mask
	looping bool        // the release loop runs

	// pins are the pins held lately, newest at next-1: an heir's first
	// notification finds its maker's there.
	pins [8]pinRecord
	next int
	// known says whether the engine knows task tid (it has made a
	// notification): heirs leaves those to Inherited.
	known func(tid int) bool
	// walkq are the pins whose heirs the release loop walks next.
	walkq []pinRecord
}

// pinRecord is a pin once held: the tasks its task made while pinned
// have mask {cpu} and should have guest.
type pinRecord struct {
	tid, tgid, cpu int
	guest          unix.CPUSet
}

// newColocator reads the serving thread's mask; with a single CPU there is
// nothing to gain and colocation stays off. It must run on the serving
// thread.
func newColocator(hold time.Duration, known func(tid int) bool) *colocator {
	c := &colocator{hold: hold, cpu: -1, selfTid: unix.Gettid(), known: known}
	if unix.SchedGetaffinity(0, &c.self) == nil && c.self.Count() > 1 {
		c.enabled = true
	}
	return c
}

// pin colocates task tid of process tgid (asleep in its notified syscall)
// with the serving thread, on the CPU the serving thread runs on. It does
// nothing when tid may not run there. It runs on the serving thread.
func (c *colocator) pin(tid, tgid int) {
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
		c.tgid = tgid
		c.pins[c.next%len(c.pins)] = pinRecord{tid: tid, tgid: tgid, cpu: c.cpu, guest: c.guest}
		c.next++
	}
}

// touch colocates task tid, which made a notification, when no task is
// pinned, and keeps a pin on it alive; it never moves a pin from another
// task (only an ADDFD, far costlier unpinned, does that). A pinned round
// trip is ~1 µs cheaper here.
func (c *colocator) touch(tid, tgid int) {
	if c == nil || !c.enabled {
		return
	}
	switch c.tid.Load() {
	case int64(tid):
		c.uses.Add(1)
	case 0:
		c.pin(tid, tgid)
	}
}

// restoreGuest gives the pinned task its own mask back, and its heirs
// that made no notification yet theirs (by the release loop: a walk
// reads /proc). A task that died meanwhile gives ESRCH, which changes
// nothing. c.mu is held.
func (c *colocator) restoreGuest() {
	if t := c.tid.Swap(0); t != 0 {
		unix.SchedSetaffinity(int(t), &c.guest)
		c.queueWalk(int(t))
	}
}

// queueWalk asks the release loop, which runs while a pin is held, to
// walk task tid's heirs on its next round (at most hold later), once
// however often the pin moved meanwhile. c.mu is held.
func (c *colocator) queueWalk(tid int) {
	for _, w := range c.walkq {
		if w.tid == tid {
			return
		}
	}
	c.walkq = append(c.walkq, pinRecord{tid: tid, tgid: c.tgid, cpu: c.cpu, guest: c.guest})
}

// walkQueued walks the heirs of the tasks queueWalk was given.
func (c *colocator) walkQueued(q []pinRecord) {
	for _, w := range q {
		c.walkHeirs(w.tid, w.tgid, w.cpu, w.guest)
	}
}

// maxHeirs bounds one walk.
const maxHeirs = 512

// walkHeirs gives the tasks that pinned task tid (of process tgid) made
// while it held the pin on cpu, and that made no notification yet, the
// mask guest: the threads of its process and its children (and theirs)
// whose mask is exactly {cpu}. Each check and change is made under c.mu,
// so a task's first notification (Lookup, then Inherited, then its own
// sched_setaffinity) cannot fall between them.
func (c *colocator) walkHeirs(tid, tgid, cpu int, guest unix.CPUSet) {
	heir := func(t int) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if int64(t) == c.tid.Load() || c.known != nil && c.known(t) {
			return false
		}
		var m unix.CPUSet
		if unix.SchedGetaffinity(t, &m) != nil || m.Count() != 1 || !m.IsSet(cpu) {
			return false
		}
		return unix.SchedSetaffinity(t, &guest) == nil
	}
	seen := 0
	var visit func(tgid, maker int)
	visit = func(tgid, maker int) {
		// The threads of the process: those made while pinned.
		for _, t := range taskIDs(tgid) {
			if t != maker && seen < maxHeirs {
				seen++
				heir(t)
			}
		}
		// The maker's children, and theirs.
		for _, ch := range childIDs(tgid, maker) {
			if seen >= maxHeirs {
				return
			}
			seen++
			if heir(ch) || c.known == nil || c.known(ch) {
				visit(ch, ch)
			}
		}
	}
	visit(tgid, tid)
}

// taskIDs lists the threads of process tgid.
func taskIDs(tgid int) []int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(tgid) + "/task")
	if err != nil {
		return nil
	}
	ids := make([]int, 0, len(ents))
	for _, e := range ents {
		if id, err := strconv.Atoi(e.Name()); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// childIDs lists the children thread tid of process tgid made.
func childIDs(tgid, tid int) []int {
	b, err := hostproc.Read("/proc/" + strconv.Itoa(tgid) + "/task/" + strconv.Itoa(tid) + "/children")
	if err != nil {
		return nil
	}
	var ids []int
	for _, f := range strings.Fields(string(b)) {
		if id, err := strconv.Atoi(f); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// Inherited gives task tid, new to kbox (its first notification), the
// mask it would have had if the task that made it held a pin then: a new
// thread of process tgid was made by a thread of tgid, a new process (tid
// == tgid) by its parent ppid. Its mask is then exactly the pin's CPU.
func (c *colocator) Inherited(tid, tgid, ppid int) {
	if c == nil || !c.enabled {
		return
	}
	maker := tgid
	if tid == tgid {
		maker = ppid
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(tid) == c.tid.Load() {
		return
	}
	for i := 1; i <= len(c.pins) && i <= c.next; i++ {
		r := &c.pins[(c.next-i)%len(c.pins)]
		if r.tgid != maker {
			continue
		}
		var m unix.CPUSet
		if unix.SchedGetaffinity(tid, &m) == nil && m.Count() == 1 && m.IsSet(r.cpu) {
			unix.SchedSetaffinity(tid, &r.guest)
		}
		return
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
		done := c.uses.Load() == seen || c.cpu < 0
		if done {
			c.releaseAll()
			c.looping = false
		}
		q := c.walkq
		c.walkq = nil
		c.mu.Unlock()
		c.walkQueued(q)
		if done {
			return
		}
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

// Forget drops task tid of process tgid (0: unknown) without restoring
// its mask: the guest is about to set the mask itself. Its heirs still
// get theirs, and the pins of its process are forgotten: the tasks it
// makes from now on take the mask it chose.
func (c *colocator) Forget(tid, tgid int) {
	if c == nil || !c.enabled {
		return
	}
	c.mu.Lock()
	if c.tid.CompareAndSwap(int64(tid), 0) {
		c.queueWalk(tid)
	}
	for i := range c.pins {
		if r := &c.pins[i]; r.tid == tid || tgid != 0 && r.tgid == tgid {
			*r = pinRecord{}
		}
	}
	c.mu.Unlock()
}
