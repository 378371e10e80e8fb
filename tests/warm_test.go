//go:build lkl

package tests

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

func init() {
	// shadow-warm: shadowfd.Manager.Warm on the image's libc, then an
	// open served from what it made; Warm again; Warm racing an Open of
	// one inode, 20 times over.
	helpers["shadow-warm"] = func(img string, ro bool) error {
		runtime.LockOSThread()
		return withRoot(img, ro, func(*rootfs.Root) error {
			m := shadowfd.New()
			defer m.Close()
			open := func(p string) (int, lkl.Stat64, error) {
				lfd, err := lkl.Open(p, int(lkl.OpenFlagsToLKL(unix.O_RDONLY|unix.O_CLOEXEC)), 0)
				if err != nil {
					return -1, lkl.Stat64{}, err
				}
				st, err := lkl.Fstat(lfd)
				return lfd, st, err
			}
			nodes := func() int {
				n := 0
				m.EachNode(func(string, int, uint64, uint64) { n++ })
				return n
			}
			const libc = "/lib/x86_64-linux-gnu/libc.so.6"
			lfd, st, err := open(libc)
			if err != nil {
				return err
			}
			m.Warm(lfd, &st, libc)
			hfd, _, hit, err := m.OpenCached(&st, unix.O_RDONLY)
			fmt.Printf("hit=%v\n", hit && err == nil)
			if hit && err == nil {
				var b [4]byte
				n, _ := unix.Pread(hfd, b[:], 0)
				var hs unix.Stat_t
				unix.Fstat(hfd, &hs)
				fmt.Printf("content=%v\n", n == 4 && string(b[:]) == "\x7fELF" && hs.Size == st.Size)
				unix.Close(hfd)
			}
			if lfd, st, err = open(libc); err != nil {
				return err
			}
			m.Warm(lfd, &st, libc)
			fmt.Printf("nodes_after_rewarm=%d\n", nodes())
			// Warm and Open of one inode at once: one node, and the
			// open's description has the file's content.
			bad := 0
			for i := 0; i < 20; i++ {
				p := "/usr/bin/ls"
				if i%2 == 1 {
					p = "/usr/bin/cat"
				}
				wfd, wst, err := open(p)
				if err != nil {
					return err
				}
				ofd, ost, err := open(p)
				if err != nil {
					return err
				}
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					runtime.LockOSThread()
					m.Warm(wfd, &wst, p)
				}()
				hfd, err := m.Open(ofd, &ost, p, unix.O_RDONLY)
				wg.Wait()
				var hs unix.Stat_t
				if err != nil || unix.Fstat(hfd, &hs) != nil || hs.Size != ost.Size {
					bad++
				}
				unix.Close(hfd)
				m.Release(ost.Dev) // the nodes go: the next round races again
			}
			fmt.Printf("race_bad=%d\n", bad)
			return nil
		})
	}
}

func init() {
	// prewarm: dispatch.Engine.Prewarm of a missing program, then of a
	// static one, then of a dynamic one: which shadows each made.
	helpers["prewarm"] = func(img string, ro bool) error {
		return withRoot(img, ro, func(*rootfs.Root) error {
			eng := dispatch.New(dispatch.Options{HostRoutes: []string{"/proc", guestpath.CPURoute}, Dev: true})
			defer eng.Shadows.Close()
			shadows := func() (names []string) {
				eng.Shadows.EachNode(func(p string, _ int, _, _ uint64) { names = append(names, p) })
				return names
			}
			// Each call is a no-op while an earlier one still runs: ask
			// until the warm-up that follows has made something, or 5 s.
			until := func(p string, done func([]string) bool) []string {
				for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
					eng.Prewarm(p)
					if n := shadows(); done(n) {
						return n
					}
				}
				return shadows()
			}
			eng.Prewarm("/no/such/program")
			eng.Prewarm("/bin/busybox") // static: nothing to warm
			time.Sleep(200 * time.Millisecond)
			fmt.Printf("after_missing_and_static=%s\n", strings.Join(shadows(), ","))
			got := until("/bin/true", func(n []string) bool { return len(n) > 0 })
			fmt.Printf("after_dynamic=%s\n", strings.Join(got, ","))
			return nil
		})
	}
}

// TestShadowWarm: a shadow made ahead of an open (the libraries of a
// program at its exec: dispatch/warm.go) serves that open, with the
// file's content; warming it again makes no second node; a warm racing
// the guest's own open of the inode leaves that open correct.
func TestShadowWarm(t *testing.T) {
	kv := helper(t, "shadow-warm", imagePath(t), true)
	for k, want := range map[string]string{"hit": "true", "content": "true", "nodes_after_rewarm": "1", "race_bad": "0"} {
		if kv[k] != want {
			t.Errorf("%s = %q, want %q (all: %v)", k, kv[k], want, kv)
		}
	}
}

// TestPrewarm: what kbox reads before the guest's first exec
// (Engine.Prewarm) makes the shadow of a dynamic program's libc, and
// nothing for a missing or a static program; a missing one does not stop
// a later warm-up.
func TestPrewarm(t *testing.T) {
	kv := helper(t, "prewarm", imagePath(t), true)
	if kv["after_missing_and_static"] != "" {
		t.Errorf("shadows after a missing and a static program: %q, want none", kv["after_missing_and_static"])
	}
	if !strings.Contains(kv["after_dynamic"], "libc.so.6") {
		t.Errorf("shadows after /bin/true: %q, want libc's", kv["after_dynamic"])
	}
}
