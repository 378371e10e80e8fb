package dispatch

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/kbox-project/kbox/clock"
	"golang.org/x/sys/unix"
)

// The engine's part of a run, the same for every tier. A tier:
//
//	e.Begin(root, keeper, cwd)   // its first guest process exists
//	res := e.Serve(&req)         // each syscall, on any thread
//	e.Stop()                     // the last guest is gone; before the
//	                             // tier closes its own transport
//
// and whoever made the engine calls e.Close() last: it writes what the
// guests wrote back to the image and reports what could not be.
//
// Observation lives here too (Observe, Debug), so the observatory, the
// JSON trace and --stats see every tier's syscalls the same way.

// Observer sees each served syscall, its result and how long serving it
// took. It runs on the serving thread: keep it short and allocation-free.
type Observer func(r *Request, res *Result, latency time.Duration)

// lifecycle is the engine's start/stop state.
type lifecycle struct {
	stopOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
}

// Begin records the run's first guest process (root, whose parent keeper
// reaps its orphans; 0 when there is none) with its working directory.
func (e *Engine) Begin(root, keeper int, cwd string) *Proc {
	e.RootPid, e.Keeper = root, keeper
	if err := e.applyLimits(root); err != nil {
		// The guest has not run yet: it must not run unlimited.
		fmt.Fprintf(os.Stderr, "kbox: policy: %v: killing the guest\n", err)
		unix.Kill(root, unix.SIGKILL)
	}
	return e.Start(root, cwd)
}

// BeginSession records a live session's spawner (the seccomp tier's
// spawner.c) in place of a first guest process: it is the guest's keeper,
// hidden from the guest as kbox's keeper is, and every process it starts
// is a guest process whose parent the guest sees as 0, as a process
// entered into a container (docker exec) sees its parent. Each inherits
// the spawner's credentials, limits and, until it changes directory, cwd.
func (e *Engine) BeginSession(spawner int, cwd string) *Proc {
	e.RootPid, e.Keeper = 0, spawner
	if err := e.applyLimits(spawner); err != nil {
		fmt.Fprintf(os.Stderr, "kbox: policy: %v: killing the session\n", err)
		unix.Kill(spawner, unix.SIGKILL)
	}
	return e.Start(spawner, cwd)
}

// Serve serves r as Dispatch does, and reports it to Observe and, with
// Debug, on stderr. Tiers call Serve.
func (e *Engine) Serve(r *Request) Result {
	if e.Observe == nil && !e.Debug {
		return e.Dispatch(r)
	}
	start := clock.Now()
	res := e.Dispatch(r)
	if e.Observe != nil {
		e.Observe(r, &res, clock.Since(start))
	}
	if e.Debug {
		pid := 0
		if r.G != nil {
			pid = r.G.Pid()
		}
		fmt.Fprintf(os.Stderr, "kbox: pid %d nr %d (%s) -> act %d val %d err %v\n",
			pid, r.Nr, NameOf(r.Nr), res.Action, res.Val, res.Errno)
	}
	return res
}

// Stop ends what the engine does for live guests: parked FIFO opens and
// socket calls still waiting are answered or dropped (so the tier must
// still be able to answer: call Stop before closing the transport), and
// the guest's unix-socket names are released. Stop may be called more
// than once.
func (e *Engine) Stop() {
	e.life.stopOnce.Do(func() {
		e.StopLateReplies()
		e.FIFOs.Close()
		if e.Sockets != nil {
			e.Sockets.Close()
		}
	})
}

// drainWait bounds how long Close waits for the write pumps of dup2'd
// virtual fds (bridge.go) to empty.
const drainWait = 5 * time.Second

// Close ends the run: it stops (Stop), lets the pumps of dup2'd virtual
// fds finish, and writes every shadow back to the image. An error means
// data a guest wrote, and was told was written, did not reach the image:
// the caller must report it, not pass on the guest's status. Close may be
// called more than once; later calls return the first one's error.
func (e *Engine) Close() error {
	e.Stop()
	e.life.closeOnce.Do(func() {
		e.Drain(drainWait)
		e.dropPrewarmed()
		e.gdbStop() // before the kernel halts (gdb.go)
		e.life.closeErr = e.Shadows.Close()
	})
	return e.life.closeErr
}

// Leave is Close for a run whose writes to the kernel's disks are all
// discarded, its kernel left to the process's exit (rootfs.Root.Leave):
// the shadows are not written back (shadowfd.Manager.Leave).
func (e *Engine) Leave() {
	e.Stop()
	e.life.closeOnce.Do(func() {
		e.Drain(drainWait)
		e.dropPrewarmed()
		e.gdbStop()
		e.Shadows.Leave()
	})
}
