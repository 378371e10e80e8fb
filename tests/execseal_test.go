//go:build lkl

package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestExecMemfdsSealed: every file the seccomp tier has the host kernel
// execute for a guest, the program, its loader, a static program, is a
// memfd sealed against any change, as the guest process maps it (read
// from the host, through /proc/PID/map_files). The loader's and a static
// program's were not (0x0 on 12e9dd6's parent).
func TestExecMemfdsSealed(t *testing.T) {
	img := imagePath(t)
	for _, c := range []struct {
		name string
		argv []string
		want []string // the memfds' names the guest maps
	}{
		{"dynamic", []string{"/bin/sleep", "30"}, []string{"kbox-exec:/bin/sleep", "kbox-exec:/lib64/ld-linux-x86-64.so.2"}},
		{"static", []string{"/bin/busybox", "sleep", "30"}, []string{"kbox-exec:/bin/busybox"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := startKbox(t, append([]string{"image", "-S", img, "--read-only", "--"}, c.argv...)...)
			var seals map[string]int
			deadline := time.Now().Add(20 * time.Second)
			for {
				seals = map[string]int{}
				for _, pid := range descendants(k.Pid()) {
					for name, s := range memfdSeals(t, pid) {
						seals[name] = s
					}
				}
				all := true
				for _, name := range c.want {
					_, ok := seals[name]
					all = all && ok
				}
				if all || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			for _, name := range c.want {
				s, ok := seals[name]
				if !ok {
					t.Fatalf("the guest maps no memfd %s; it maps %v\nstderr: %s", name, seals, k.Stderr())
				}
				const all = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
				if s&all != all {
					t.Errorf("%s: seals %#x, want %#x", name, s, all)
				}
			}
		})
	}
}

// memfdSeals returns the seals of each memfd process pid maps, by the
// memfd's name; it skips the test where map_files cannot be opened (it
// needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE).
func memfdSeals(t *testing.T, pid int) map[string]int {
	dir := "/proc/" + strconv.Itoa(pid) + "/map_files"
	ents, _ := os.ReadDir(dir)
	out := map[string]int{}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		name, ok := strings.CutPrefix(target, "/memfd:")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, " (deleted)")
		if _, seen := out[name]; seen {
			continue
		}
		fd, err := unix.Open(filepath.Join(dir, e.Name()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EPERM || err == unix.EACCES {
			t.Skipf("SKIP: %s cannot be opened here (%v): it needs CAP_SYS_ADMIN", dir, err)
		}
		if err != nil {
			continue
		}
		s, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
		unix.Close(fd)
		if err == nil {
			out[name] = s
		}
	}
	return out
}
