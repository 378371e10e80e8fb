//go:build lkl

package lkl

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sysPipe2 is pipe2's number in LKL's (asm-generic) table.
const sysPipe2 = 59

// TestSyncContended runs the kernel's locks and semaphores (sync.c) as a
// guest's threads do: threads that call LKL at once, and pairs that
// block in LKL on a pipe and wake each other (each wake a switch of the
// kernel's tasks, each a semaphore). A lost wake-up hangs a pair; two
// owners of the LKL CPU at once is one of LKL's bugs (a panic). On one
// CPU (taskset -c 0) the waiters do not spin.
func TestSyncContended(t *testing.T) {
	booted := make(chan error, 1)
	go func() { booted <- Boot(Config{}) }()
	select {
	case err := <-booted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the kernel did not boot in 60 s: a lost wake-up")
	}
	hung := false
	defer func() {
		if !hung { // a hung kernel would not halt either
			Halt()
		}
	}()
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		t.Fatal(err)
	}
	n := syncSpins()
	t.Logf("a waiter spins %d times before it sleeps", n)
	switch {
	case n < 0:
		t.Fatal("the kernel's locks are LKL's, not kbox's")
	case cpus.Count() < 2 && n != 0:
		t.Fatalf("on one CPU a waiter spins %d times", n)
	case cpus.Count() >= 2 && (n < 16 || n > 4096):
		t.Fatalf("a waiter spins %d times, not about 2 us", n)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	// Callers at once: each call takes and gives the LKL CPU.
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			want, le := Syscall6(SysGetpid, 0, 0, 0, 0, 0, 0)
			for range 20000 {
				if pid, le2 := Syscall6(SysGetpid, 0, 0, 0, 0, 0, 0); le != 0 || le2 != 0 || pid != want {
					errs <- "getpid differs or fails"
					return
				}
			}
		}()
	}
	// Pairs that block in LKL: a byte there and back through two pipes.
	for p := range 3 {
		fds := make([]int32, 4)
		for i := 0; i < 2; i++ {
			if _, le := Syscall6(sysPipe2, PtrOf(&fds[2*i]), 0, 0, 0, 0, 0); le != 0 {
				t.Fatalf("pipe2: %v", le)
			}
		}
		ping, pong := fds[:2], fds[2:]
		const rounds = 3000
		echo := func(in, out int32, first bool, who string) {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b := make([]byte, 1)
			for i := range rounds {
				if first {
					b[0] = byte(i + p)
					if n, le := Syscall6(SysWrite, uintptr(out), Ptr(b), 1, 0, 0, 0); le != 0 || n != 1 {
						errs <- who + ": write fails"
						return
					}
				}
				if n, le := Syscall6(SysRead, uintptr(in), Ptr(b), 1, 0, 0, 0); le != 0 || n != 1 {
					errs <- who + ": read fails"
					return
				}
				if b[0] != byte(i+p) {
					errs <- who + ": another byte"
					return
				}
				if !first {
					if n, le := Syscall6(SysWrite, uintptr(out), Ptr(b), 1, 0, 0, 0); le != 0 || n != 1 {
						errs <- who + ": write fails"
						return
					}
				}
			}
		}
		wg.Add(2)
		go echo(pong[0], ping[1], true, "client")
		go echo(ping[0], pong[1], false, "server")
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		hung = true
		t.Fatal("the callers did not finish in 60 s: a lost wake-up")
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
