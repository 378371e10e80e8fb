package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// A run settles once its start is over: the boot, the mounts and the
// guest's start-up come in bursts of blocking cgo calls and system calls,
// each of which can make Go start a thread, and Go keeps every thread it
// made, idle, for good. Go's heap has likewise grown to the boot's peak.
// A second after the guest's first instruction, when the guest is still
// running, kbox hands the heap's free pages back (debug.FreeOSMemory) and
// ends the idle threads. Both come back if a later burst needs them
// (docs/benchmarks.md, "Memory"). A session (serve.go) settles again a
// second after each of its busy spells.

// runGCPercent is a run's GOGC. A run's live heap is a few MB, under Go's
// 4 MB least goal at GOGC 100, so a guest's burst of calls (git status
// after its files were read) met a collection every few MB allocated,
// its mark assists and sweeps in the guest's time: at 200 the least goal
// is 8 MB. Idle memory is unchanged (the settle hands free pages back);
// the peak RSS of ls -lR /usr and git status grew by under 0.5 MB.
const runGCPercent = 200

// setRunGC sets runGCPercent, unless GOGC says otherwise.
func setRunGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(runGCPercent)
	}
}

// settleOnStart returns the tiers' phase hook (Config.Phase): the
// start-up trace's marks, and the settle, a second after the phase that
// ends as the guest starts ("exec" in the seccomp tier, "load" in
// process); stop cancels the settle.
func settleOnStart() (hook func(string), stop func()) {
	var mu sync.Mutex
	var t *time.Timer
	stopped := false
	hook = func(name string) {
		phases.mark(name)
		if name != "exec" && name != "load" {
			return
		}
		mu.Lock()
		if t == nil && !stopped {
			t = time.AfterFunc(time.Second, settleNow)
		}
		mu.Unlock()
	}
	stop = func() {
		mu.Lock()
		stopped = true
		if t != nil {
			t.Stop()
		}
		mu.Unlock()
	}
	return hook, stop
}

func settleNow() {
	debug.FreeOSMemory()
	before := goThreads()
	endIdleThreads()
	phases.settled(before, goThreads())
}

// goThreads is how many threads Go made and has now.
func goThreads() int {
	s := []metrics.Sample{{Name: "/sched/threads/total:threads"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int(s[0].Value.Uint64())
}

// endIdleThreads ends Go's idle threads. Go ends a thread whose goroutine
// exits while locked to it; a new goroutine runs on a thread that has
// work to pick up, an idle one when Go has one. So each goroutine started
// here that locks and exits ends one thread, and the count goes down
// while idle threads are left: once it stops going down, the thread that
// ended had to be made for the goroutine, and the rest are busy (in a
// cgo call, a system call or locked by kbox).
func endIdleThreads() {
	before := goThreads()
	if before == 0 {
		return // this Go does not count its threads
	}
	for range 64 {
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(done)
			// Exiting while locked: Go ends this thread.
		}()
		<-done
		// The thread ends after the goroutine's exit: give it the time.
		var n int
		for range 100 {
			runtime.Gosched()
			if n = goThreads(); n < before {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		if n >= before {
			return
		}
		before = n
	}
}
