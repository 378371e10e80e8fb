package unixsock

import (
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMain serves as the binder when BinderStarter runs this test binary
// (its /proc/self/exe) with KBOX_BINDER_ONLY, as kbox does: fakeBinder.
// KBOX_GUEST_REEXEC makes BinderStarter run this binary again, as a kbox
// built without its start-up program does, not the program's binder.c
// (tests/unix_test.go runs that one).
func TestMain(m *testing.M) {
	if os.Getenv("KBOX_BINDER_ONLY") == "1" {
		fakeBinder()
		return
	}
	os.Setenv("KBOX_GUEST_REEXEC", "1")
	os.Exit(m.Run())
}

// fakeBinder answers on fd 4 as binder.c does: its first answer unasked
// (paths kept: 0), then to every request ENOENT, or EPERM if it has a
// parent-death signal, until kbox's end closes.
func fakeBinder() {
	answer := func(v int32) bool {
		_, err := unix.Write(4, []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
		return err == nil
	}
	v := int32(unix.ENOENT)
	var sig int32
	if _, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0); e != 0 || sig != 0 {
		v = int32(unix.EPERM)
	}
	if !answer(0) {
		os.Exit(1)
	}
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(4, buf)
		if n <= 0 && err != unix.EINTR {
			os.Exit(0)
		}
		if n > 0 && !answer(v) {
			os.Exit(1)
		}
	}
}

// TestBinderOutlivesItsThread: the binder has no parent-death signal and
// keeps serving after Go ends idle threads, as kbox's settle does
// (cmd/kbox/settle.go). A parent-death signal follows the thread that
// started the binder: when Go ended that thread, the binder died and
// every later bind failed with EIO.
func TestBinderOutlivesItsThread(t *testing.T) {
	if os.Getenv("KBOX_EMULATED") != "" {
		t.Skip("kbox: *** SKIP: under qemu-user the binder (this binary, run again) is not started ***")
	}
	start, stop := BinderStarter()
	defer stop()
	b := NewLazyBinder(start)
	if _, err := b.OpenIPC("shm"); err != unix.ENOENT {
		t.Fatalf("first request: %v, want the binder's ENOENT", err)
	}
	// End idle threads: a goroutine that exits locked ends its thread.
	for range 32 {
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(done)
		}()
		<-done
		for range 20 {
			runtime.Gosched()
		}
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := b.OpenIPC("shm"); err != unix.ENOENT {
		t.Fatalf("request after Go ended idle threads: %v, want the binder's ENOENT", err)
	}
}
