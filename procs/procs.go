// Package procs keeps Go's processors (GOMAXPROCS) for Go's own work while
// some of kbox's threads hold one outside Go.
//
// A thread that is in C or in a system call keeps its P, in Go's syscall
// state, until sysmon takes the P over, and sysmon looks only every 20 µs
// while it finds work, then less and less often, up to every 10 ms. kbox
// has threads that spend their lives so: the seccomp tier's serving thread
// waits in the notification ioctl, and the in-process tiers' guest threads
// run guest code between the cgo callbacks that serve their system calls.
// With as many Ps as CPUs such threads can hold every P, and a goroutine
// that one of them readies (the run's end, a connect's wait, a pump) waits
// for sysmon: a git status under the rewrite tier stalled 8–10 ms in two
// runs of three (docs/tiers.md). Each such thread adds a P (Park), so that
// as many Ps as CPUs stay free for Go's work.
package procs

import (
	"runtime"
	"sync"
)

// maxExtra bounds the Ps added: a guest of thousands of threads gets 64.
const maxExtra = 64

var (
	mu     sync.Mutex
	base   int // GOMAXPROCS when nothing is parked
	parked int // threads that hold a P outside Go
	extra  int // Ps added now
)

// Park says that the calling thread holds a P outside Go from now on (its
// life in a blocking system call, or in guest code); Unpark that it no
// longer does.
func Park() { adjust(1) }

// Unpark undoes a Park.
func Unpark() { adjust(-1) }

// Extra returns the Ps added now.
func Extra() int {
	mu.Lock()
	defer mu.Unlock()
	return extra
}

// adjust grows GOMAXPROCS at once and shrinks it once the parked threads
// are half the Ps added or fewer: each change stops the world, and a
// guest's thread pool coming and going should not stop it for every
// thread.
func adjust(d int) {
	mu.Lock()
	defer mu.Unlock()
	if parked == 0 && extra == 0 {
		base = runtime.GOMAXPROCS(0)
	}
	parked = max(parked+d, 0)
	want := min(parked, maxExtra)
	if want == extra || want < extra && want > extra/2 {
		return
	}
	extra = want
	runtime.GOMAXPROCS(base + extra)
}
