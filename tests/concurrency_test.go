//go:build lkl

package tests

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/dispatch/dispatchtest"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/rootfs"
	"golang.org/x/sys/unix"
)

// threadGuest is one guest thread of an in-process tier: argument memory
// of its own, the pid of its process.
type threadGuest struct {
	*dispatchtest.Guest
	pid int
}

// newThreadGuest is a guest thread of process pid with size bytes of
// argument memory.
func newThreadGuest(pid, size int) *threadGuest {
	g, err := dispatchtest.New(size)
	if err != nil {
		panic(err)
	}
	return &threadGuest{Guest: g, pid: pid}
}

func (g *threadGuest) Pid() int { return g.pid }

// execOK is a tier whose every exec goes ahead (the engine then does what
// an execve does to the process).
type execOK struct{}

func (execOK) Exec(*dispatch.Request, *dispatch.Exec) dispatch.Result { return dispatch.Result{} }

func init() {
	// engine-concurrent serves syscalls of two guest processes from many
	// goroutines at once, as an in-process tier's guest threads do: path
	// lookups (the stat cache), changes (which invalidate it), directory
	// fds, cwd changes, exec (exe, credentials; the fds are not
	// close-on-exec: Linux's execve ends the process's other threads), /proc
	// reads of each other's state, identity changes, shadows of one file.
	// It prints the failures of each operation; built with -race, the
	// race detector fails it on any unsynchronised access.
	helpers["engine-concurrent"] = func(img string, ro bool) error {
		return withRoot(img, ro, func(*rootfs.Root) error {
			eng := dispatch.New(dispatch.Options{HostRoutes: []string{"/proc", guestpath.CPURoute}, Dev: true, RootID: true})
			eng.Tier = execOK{}
			var served sync.Map
			eng.Observe = func(*dispatch.Request, *dispatch.Result, time.Duration) {}
			procs := []int{unix.Getpid(), os.Getppid()}
			for _, pid := range procs {
				eng.Start(pid, "/")
				// Each process has run a program (its /proc/PID/exe).
				g := newThreadGuest(pid, 4096)
				r := &dispatch.Request{G: g, P: eng.Lookup(pid), Nr: unix.SYS_EXECVE, Args: [6]uint64{g.Str("/bin/true")}}
				if res := eng.Serve(r); res.Errno != 0 {
					return fmt.Errorf("execve /bin/true: %v", res.Errno)
				}
			}
			const workers, rounds = 8, 300
			var fails [workers]map[string]int
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					fails[w] = map[string]int{}
					g := newThreadGuest(procs[w%len(procs)], 8192)
					defer g.Close()
					r := &dispatch.Request{G: g}
					path, out := g.Buf(1024), g.Buf(7168)
					at := uint64(unix.AT_FDCWD & 0xffffffff)
					call := func(name string, nr int, p string, args ...uint64) int64 {
						copy(g.Bytes(path, len(p)+1), p+"\x00")
						r.Nr, r.P = nr, eng.Lookup(g.pid)
						r.Args = [6]uint64{}
						copy(r.Args[:], args)
						res := eng.Serve(r)
						served.Store(name, true)
						if res.Errno != 0 {
							fails[w][name+"_"+strconv.Itoa(int(res.Errno))]++
							return -1
						}
						return res.Val
					}
					dir := "/tmp/w" + strconv.Itoa(w)
					for i := 0; i < rounds; i++ {
						call("stat", unix.SYS_NEWFSTATAT, "/etc/hostname", at, path, out, 0)
						call("access", unix.SYS_FACCESSAT, "/etc/passwd", at, path, unix.R_OK)
						call("mkdir", unix.SYS_MKDIRAT, dir, at, path, 0o755)
						call("stat_new", unix.SYS_NEWFSTATAT, dir, at, path, out, 0)
						call("chdir", unix.SYS_CHDIR, dir, path)
						call("getcwd", unix.SYS_GETCWD, "", out, 256)
						call("chdir_back", unix.SYS_CHDIR, "/", path)
						call("rmdir", unix.SYS_UNLINKAT, dir, at, path, unix.AT_REMOVEDIR)
						if fd := call("opendir", unix.SYS_OPENAT, "/etc", at, path, unix.O_RDONLY|unix.O_DIRECTORY); fd >= 0 {
							call("getdents", unix.SYS_GETDENTS64, "", uint64(fd), out, 4096)
							call("close", unix.SYS_CLOSE, "", uint64(fd))
						}
						call("open", unix.SYS_OPENAT, "/etc/hostname", at, path, unix.O_RDONLY|unix.O_CLOEXEC)
						call("readlink_exe", unix.SYS_READLINKAT, "/proc/"+strconv.Itoa(procs[(w+1)%len(procs)])+"/exe", at, path, out, 256)
						call("proc_status", unix.SYS_NEWFSTATAT, "/proc/self/status", at, path, out, 0)
						if i%50 == 0 {
							call("execve", unix.SYS_EXECVE, "/bin/true", path, 0, 0)
							call("setresuid", unix.SYS_SETRESUID, "", 0, 0, 0)
						}
					}
				}(w)
			}
			wg.Wait()
			total := map[string]int{}
			for _, f := range fails {
				for k, n := range f {
					total[k] += n
				}
			}
			for k, n := range total {
				fmt.Printf("fail_%s=%d\n", k, n)
			}
			n := 0
			served.Range(func(any, any) bool { n++; return true })
			fmt.Printf("ops=%d\n", n)
			return eng.Close()
		})
	}
}

// TestEngineConcurrent dispatches from many goroutines at once, as the
// in-process tiers do, and checks every call succeeds. `make check` runs
// it with -race as well (make race), which fails on any data race.
func TestEngineConcurrent(t *testing.T) {
	img := copyImage(t, imagePath(t))
	kv := helper(t, "engine-concurrent", img, false)
	if kv["ops"] == "" {
		t.Fatalf("helper printed nothing: %v", kv)
	}
	for k, v := range kv {
		if k != "ops" {
			t.Errorf("%s: %s calls failed", k, v)
		}
	}
}
