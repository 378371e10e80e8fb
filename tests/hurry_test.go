//go:build lkl

package tests

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

func init() {
	// kernel-hurry: the kernel's CLOCK_MONOTONIC against the host's over
	// three waits of an lkl.Hurrier (each moves the kernel's clock a
	// tick on), in ns.
	helpers["kernel-hurry"] = func(string, bool) error {
		if err := lkl.Boot(lkl.Config{}); err != nil {
			return err
		}
		defer lkl.Halt()
		kernelNow := func() (int64, error) {
			ts := new(unix.Timespec)
			if _, en := lkl.Syscall6(lkl.SysClockGettime, unix.CLOCK_MONOTONIC, lkl.PtrOf(ts), 0, 0, 0, 0); en != 0 {
				return 0, en
			}
			return ts.Nano(), nil
		}
		// The host's interval lies inside the kernel's, so the kernel's
		// is at least as long; the hurries make it 3 ticks longer.
		k0, err := kernelNow()
		if err != nil {
			return err
		}
		h0 := time.Now()
		var h lkl.Hurrier
		for i := 0; i < 3; i++ {
			h.Wait()
		}
		host := time.Since(h0)
		k1, err := kernelNow()
		if err != nil {
			return err
		}
		fmt.Printf("kernel=%d\nhost=%d\n", k1-k0, host.Nanoseconds())
		return nil
	}
}

// TestKernelHurry: a teardown wait (lkl.Hurrier, used by the unmounts at
// the end of a run) moves the kernel's clock a tick on per wait, so that
// work the kernel defers by a tick (a kernel thread's last fput and
// mntput) runs at once; the host's clock is untouched.
func TestKernelHurry(t *testing.T) {
	h := helper(t, "kernel-hurry", "", false)
	k, err1 := strconv.ParseInt(h["kernel"], 10, 64)
	host, err2 := strconv.ParseInt(h["host"], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("helper output %v", h)
	}
	if ahead := time.Duration(k - host); ahead < 3*lkl.Tick {
		t.Errorf("the kernel's clock moved %v in %v of the host's: want 3 ticks (%v) ahead", time.Duration(k), time.Duration(host), 3*lkl.Tick)
	}
}
