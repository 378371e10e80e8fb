//go:build lkl

package tests

import (
	"fmt"
	"testing"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/dispatch/dispatchtest"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/rootfs"
	"golang.org/x/sys/unix"
)

func init() {
	// dispatch-allocs reports the allocations of the hot dispatch paths:
	// stat, statx, access, an absent extended attribute, fstat and
	// statx of a host fd, a read-only
	// open of a cached image file, and a directory's listing, also once
	// it prepares its entries' stats.
	helpers["dispatch-allocs"] = func(img string, ro bool) error {
		return withRoot(img, ro, func(*rootfs.Root) error {
			eng := dispatch.New(dispatch.Options{HostRoutes: []string{"/proc", guestpath.CPURoute}, Dev: true})
			defer eng.Shadows.Close()
			g, err := dispatchtest.New(48 << 10)
			if err != nil {
				return err
			}
			defer g.Close()
			path, out := g.Str("/etc/hostname"), g.Buf(256)
			r := &dispatch.Request{G: g, P: eng.Start(unix.Getpid(), "/")}
			run := func(name string, nr int, args ...uint64) {
				r.Nr = nr
				copy(r.Args[:], args)
				res := eng.Dispatch(r)
				if res.Errno != 0 {
					fmt.Printf("%s_errno=%d\n", name, res.Errno)
				}
				fmt.Printf("%s_allocs=%.1f\n", name, testing.AllocsPerRun(200, func() { eng.Dispatch(r) }))
			}
			run("stat", unix.SYS_NEWFSTATAT, uint64(unix.AT_FDCWD&0xffffffff), path, out, 0)
			run("statx", unix.SYS_STATX, uint64(unix.AT_FDCWD&0xffffffff), path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, out)
			run("access", unix.SYS_FACCESSAT, uint64(unix.AT_FDCWD&0xffffffff), path, unix.R_OK)
			// ls -l's question of every file: an absent attribute (ENODATA).
			run("lgetxattr", unix.SYS_LGETXATTR, path, g.Str("system.posix_acl_access"), out, 132)
			// ls -l's statx once it prepares the gets' answers (an
			// in-process tier's Hints, dispatch/hint.go).
			hints := &usedHints{}
			r.Hints = hints
			r.Nr, r.Args = unix.SYS_STATX, [6]uint64{uint64(unix.AT_FDCWD & 0xffffffff), path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, out}
			eng.Dispatch(r)
			run("lgetxattr_pattern", unix.SYS_LGETXATTR, path, g.Str("system.posix_acl_access"), out, 132)
			run("statx_ahead", unix.SYS_STATX, uint64(unix.AT_FDCWD&0xffffffff), path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, out)
			fmt.Printf("statx_ahead_arms=%d\n", hints.armed)
			r.Hints = nil
			// fstat and statx of a host fd (the image file itself, a
			// file of a host filesystem): served with the device the
			// guest sees (package hostdev).
			hfd, err := unix.Open(img, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(hfd)
			run("fstat_host", unix.SYS_FSTAT, uint64(hfd), out)
			run("statx_host", unix.SYS_STATX, uint64(hfd), g.Str(""), unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, out)
			run("open", unix.SYS_OPENAT, uint64(unix.AT_FDCWD&0xffffffff), path, unix.O_RDONLY|unix.O_CLOEXEC)
			// A directory's listing: a virtual fd, read through LKL (past
			// its end after the first call, the same path).
			r.Nr, r.Args = unix.SYS_OPENAT, [6]uint64{uint64(unix.AT_FDCWD & 0xffffffff), g.Str("/etc"), unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC}
			res := eng.Dispatch(r)
			if res.Errno != 0 {
				return fmt.Errorf("open /etc: %v", res.Errno)
			}
			dents := g.Buf(32 << 10)
			run("getdents", unix.SYS_GETDENTS64, uint64(res.Val), dents, 32<<10)
			// find's listing once it prepares its entries' stats (the
			// image is read-only: dispatch/hint_stat.go), from the start
			// each time.
			r.Hints = hints
			list := func() {
				r.Nr, r.Args = unix.SYS_LSEEK, [6]uint64{uint64(res.Val), 0, unix.SEEK_SET}
				eng.Dispatch(r)
				r.Nr, r.Args = unix.SYS_GETDENTS64, [6]uint64{uint64(res.Val), dents, 32 << 10}
				eng.Dispatch(r)
			}
			list()
			r.Nr, r.Args = unix.SYS_NEWFSTATAT, [6]uint64{uint64(unix.AT_FDCWD & 0xffffffff), path, out, unix.AT_SYMLINK_NOFOLLOW}
			eng.Dispatch(r) // the pattern: an entry of what it listed
			fmt.Printf("getdents_ahead_allocs=%.1f\n", testing.AllocsPerRun(200, list))
			fmt.Printf("getdents_ahead_stats=%d\n", hints.stats)
			r.Hints = nil
			r.Nr, r.Args = unix.SYS_CLOSE, [6]uint64{uint64(res.Val)}
			eng.Dispatch(r) // the image unmounts at the end
			return nil
		})
	}
}

// TestDispatchAllocs: the hot paths dispatch allocation-free.
func TestDispatchAllocs(t *testing.T) {
	kv := helper(t, "dispatch-allocs", imagePath(t), true)
	enodata := fmt.Sprint(int(unix.ENODATA))
	for _, k := range []string{"stat", "statx", "access", "lgetxattr", "lgetxattr_pattern", "statx_ahead", "fstat_host", "statx_host", "open", "getdents", "getdents_ahead"} {
		if e, want := kv[k+"_errno"], map[string]string{"lgetxattr": enodata, "lgetxattr_pattern": enodata}[k]; e != want {
			t.Errorf("%s: errno %q, want %q", k, e, want)
		}
		if a := kv[k+"_allocs"]; a != "0.0" {
			t.Errorf("%s: %s allocations per call, want 0", k, a)
		}
	}
	if kv["getdents_ahead_stats"] == "0" || kv["getdents_ahead_stats"] == "" {
		t.Errorf("the listing prepared no stats (%q): the getdents_ahead row measured nothing", kv["getdents_ahead_stats"])
	}
	if kv["statx_ahead_arms"] == "0" || kv["statx_ahead_arms"] == "" {
		t.Errorf("statx prepared no answers (%q): the statx_ahead row measured nothing", kv["statx_ahead_arms"])
	}
}

// usedHints is a tier's Hints whose every prepared answer was used; it
// counts what it is given.
type usedHints struct{ armed, stats int }

func (u *usedHints) ArmXattr(h *dispatch.XattrHint) bool {
	if h != nil {
		u.armed++
	}
	return true
}
func (u *usedHints) Ahead() bool { return false }
func (u *usedHints) StatBegin(dir string, gen, wb, buf uint64, sx dispatch.StatxKind) (bool, bool) {
	return true, true
}
func (u *usedHints) StatAdd(hash uint64, path []byte, a *dispatch.StatAnswers) bool {
	u.stats++
	return true
}
