//go:build lkl

package tests

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

func init() {
	// shadow-flushall: a file written through a writable shadow (8 MiB),
	// its writer gone; FlushAll twice (a guest's sync, then a session's
	// checkpoint): the first writes it back, the second finds nothing to
	// do; then a write and a third FlushAll, which writes back again.
	helpers["shadow-flushall"] = func(img string, ro bool) error {
		runtime.LockOSThread()
		return withRoot(img, ro, func(*rootfs.Root) error {
			m := shadowfd.New()
			defer m.Close()
			m.Holders = func() []int { return nil } // no guest process
			const p = "/root/flushall"
			lfd, err := lkl.Open(p, int(lkl.OpenFlagsToLKL(unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC)), 0o644)
			if err != nil {
				return err
			}
			st, err := lkl.Fstat(lfd)
			if err != nil {
				return err
			}
			hfd, err := m.Open(lfd, &st, p, unix.O_RDWR)
			if err != nil {
				return err
			}
			data := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
			if _, err := unix.Pwrite(hfd, data, 0); err != nil {
				return err
			}
			unix.Close(hfd)
			w0 := m.WriteBacks()
			first := m.FlushAll()
			w1 := m.WriteBacks()
			// A write-back within 50 ms of the content's last change
			// hashes it whatever else it knows (shadowfd's recent: a
			// host tmpfs may stamp two writes of one clock tick alike).
			time.Sleep(60 * time.Millisecond)
			second := m.FlushAll()
			w2 := m.WriteBacks()
			fmt.Printf("first_wrote=%v\nfirst_err=%v\nsecond_wrote=%v\nsecond_err=%v\n", w1 != w0, first, w2 != w1, second)
			// What LKL has is what was written.
			rfd, err := lkl.Open(p, int(lkl.OpenFlagsToLKL(unix.O_RDONLY|unix.O_CLOEXEC)), 0)
			if err != nil {
				return err
			}
			got := make([]byte, len(data)+1)
			n, _ := lkl.Read(rfd, got)
			lkl.Close(rfd)
			fmt.Printf("content=%v\n", n == len(data) && bytes.Equal(got[:n], data))
			// A new writer, a write: written back again.
			if lfd, err = lkl.Open(p, int(lkl.OpenFlagsToLKL(unix.O_RDWR|unix.O_CLOEXEC)), 0); err != nil {
				return err
			}
			hfd, err = m.Open(lfd, &st, p, unix.O_RDWR)
			if err != nil {
				return err
			}
			unix.Pwrite(hfd, []byte("changed"), 4096)
			unix.Close(hfd)
			third := m.FlushAll()
			rfd, _ = lkl.Open(p, int(lkl.OpenFlagsToLKL(unix.O_RDONLY|unix.O_CLOEXEC)), 0)
			var b [7]byte
			lkl.Syscall6(lkl.SysPread64, uintptr(rfd), lkl.Ptr(b[:]), 7, 4096, 0, 0)
			lkl.Close(rfd)
			fmt.Printf("third_wrote=%v\nthird_err=%v\nthird_content=%v\n", m.WriteBacks() != w2, third, string(b[:]) == "changed")
			return nil
		})
	}
}

// TestFlushAllSettles: a sync(2) writes back what a writer that has gone
// wrote, and a second one (a session's checkpoint after the guest's
// sync) does not hash the file again; a later write is written back.
func TestFlushAllSettles(t *testing.T) {
	kv := helper(t, "shadow-flushall", copyImage(t, imagePath(t)), false)
	for k, want := range map[string]string{
		"first_wrote": "true", "first_err": "<nil>", "second_wrote": "false", "second_err": "<nil>", "content": "true",
		"third_wrote": "true", "third_err": "<nil>", "third_content": "true",
	} {
		if kv[k] != want {
			t.Errorf("%s = %q, want %q (all: %v)", k, kv[k], want, kv)
		}
	}
}
