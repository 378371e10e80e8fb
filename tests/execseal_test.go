//go:build lkl

package tests

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestExecMemfdsSealed: every file the seccomp tier has the host kernel
// execute for a guest, a dynamic program and its loader, a static
// program, is a memfd sealed against any change, as the guest process
// maps it (read from the host, through /proc/PID/map_files). The loader's
// and a static program's were not (0x0 on a10b072).
func TestExecMemfdsSealed(t *testing.T) {
	img := imagePath(t)
	for _, c := range []struct {
		name string
		argv []string
		mfds int // the kbox-exec memfds the guest maps: a dynamic program's and its loader's, a static one's
	}{
		{"dynamic", []string{"/bin/sleep", "30"}, 2},
		{"static", []string{"/bin/busybox", "sleep", "30"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := startKbox(t, append([]string{"image", "-S", img, "--read-only", "--"}, c.argv...)...)
			prog := "kbox-exec:" + c.argv[0]
			var seals map[string]int
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				seals = map[string]int{}
				for _, pid := range descendants(k.Pid()) {
					if !runsKboxExec(pid) {
						continue
					}
					for name, s := range memfdSeals(t, pid) {
						if strings.HasPrefix(name, "kbox-exec:") {
							seals[name] = s
						}
					}
				}
				if _, ok := seals[prog]; ok && len(seals) >= c.mfds || time.Now().After(deadline) {
					break
				}
			}
			if _, ok := seals[prog]; !ok || len(seals) != c.mfds {
				t.Fatalf("the guest maps the kbox-exec memfds %v, want %s and %d in all\nstderr: %s", seals, prog, c.mfds, k.Stderr())
			}
			const all = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
			for name, s := range seals {
				if s&all != all {
					t.Errorf("%s: seals %#x, want %#x", name, s, all)
				}
			}
		})
	}
}

// runsKboxExec says whether process pid runs a program kbox prepared
// (its executable a kbox-exec memfd): a guest process. A child of kbox
// that has not exec'd yet (os/exec's vfork) shares kbox's own memory,
// where kbox holds the files it reads for the next exec, not sealed yet.
func runsKboxExec(pid int) bool {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && strings.HasPrefix(exe, "/memfd:kbox-exec:")
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
		if errors.Is(err, fs.ErrPermission) {
			t.Skipf("SKIP: %s cannot be read here (%v): it needs CAP_SYS_ADMIN", dir, err)
		}
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
