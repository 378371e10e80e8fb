package unixsock

import (
	"os"
	"os/exec"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/kbox-project/kbox/seccomp/startup"
)

// binderName is the binder process's argv[0].
const binderName = "kbox-socket-binder"

// BinderStarter is the socket binder (binder.c) for a guest that runs in
// kbox's own process (the in-process tiers), which has no keeper to fork
// it. start runs the start-up program (package startup; kbox re-executed
// where it was built without it) with KBOX_BINDER_ONLY, which it answers
// (seccomp/supervisor/guestinit.c, before Go starts in kbox) by serving on
// fd 4 from a private directory (0700, made by start); start returns
// kbox's end of the binder's socketpair (for NewLazyBinder). stop ends
// the binder and removes its directory. start spawns from a goroutine of
// its own, on a thread Go made without the guest's seccomp filter (a
// process started from a guest thread would inherit it), so it may be
// called while a guest syscall is served. kbox starts the binder at the
// first bind of a path, not before: most programs never bind one.
func BinderStarter() (start func() (int, error), stop func()) {
	var (
		mu  sync.Mutex
		cmd *exec.Cmd
		dir string
	)
	spawn := func() (int, error) {
		d, err := os.MkdirTemp("", "kbox-sock-")
		if err != nil {
			return -1, err
		}
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			os.Remove(d)
			return -1, err
		}
		theirs := os.NewFile(uintptr(pair[1]), "binder")
		defer theirs.Close()
		null, err := os.Open(os.DevNull)
		if err != nil {
			unix.Close(pair[0])
			os.Remove(d)
			return -1, err
		}
		defer null.Close()
		c := &exec.Cmd{Args: []string{binderName}} // what ps shows
		c.Env = []string{"KBOX_BINDER_ONLY=1", "KBOX_GUEST_SOCKDIR=" + d}
		c.ExtraFiles = []*os.File{null, theirs} // fds 3 and 4
		startup.Command(c)
		// No parent-death signal: it follows the thread that started
		// the binder, which Go may end (kbox ends idle threads a second
		// into a run: cmd/kbox/settle.go), and the binder would go with
		// it, every later bind failing with EIO. The binder ends when
		// kbox's end of the socketpair closes, as it does when kbox
		// exits or is killed (the guest shares kbox's process and
		// cannot fork in these tiers to hold it).
		if err := c.Start(); err != nil {
			unix.Close(pair[0])
			os.Remove(d)
			return -1, err
		}
		cmd, dir = c, d
		return pair[0], nil
	}
	start = func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		type result struct {
			fd  int
			err error
		}
		done := make(chan result)
		go func() {
			fd, err := spawn()
			done <- result{fd, err}
		}()
		r := <-done
		return r.fd, r.err
	}
	stop = func() {
		mu.Lock()
		defer mu.Unlock()
		if cmd != nil {
			cmd.Process.Kill()
			cmd.Wait()
			cmd = nil
		}
		if dir != "" {
			os.RemoveAll(dir)
			dir = ""
		}
	}
	return start, stop
}
