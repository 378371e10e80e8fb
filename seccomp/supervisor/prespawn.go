package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kbox-project/kbox/seccomp/startup"
)

// Prespawned is the guest's start-up process (guestinit.c) begun before
// kbox knows the guest: the start-up program (package startup; kbox
// re-executed where it was built without it) makes the keeper, the
// namespaces and the socket binder, then waits on its socket for the
// start message (sendStart) with the guest's arguments and environment.
// Begun beside the kernel's boot, all that (the exec, two forks and an
// unshare) leaves the run's path. The process starts with nothing of the
// guest's environment, so the guest's LD_* variables never reach the
// host's loader.
type Prespawned struct {
	ready    chan struct{} // closed once started, or failed
	work     chan func()   // Run's serving, on the thread that started it
	err      error
	cmd      *exec.Cmd
	parent   *os.File // kbox's end of the start-up socket (fd 3)
	binder   int      // kbox's end of the socket binder's (fd 4)
	tty      bool     // its process group took the terminal
	stage    string   // its working directory's parent (Run)
	progs    string   // its working directory: the programs' stage
	sockDir  string   // the socket binder's root
	taken    bool
	released sync.Once
}

// Prespawn begins a guest start-up, in namespaces of the guest's own
// unless noNamespaces. With a terminal on stdin, its process group takes
// the terminal's foreground, as the guest's will.
func Prespawn(noNamespaces bool) *Prespawned {
	p := &Prespawned{ready: make(chan struct{}), work: make(chan func())}
	go func() {
		// The thread that starts the guest must outlive it: the start-up
		// process's parent-death signal (SIGKILL) fires when that thread
		// exits. The goroutine stays locked to it and serves the guest
		// there (serve); the thread ends with the goroutine, once the
		// guest is gone (release).
		runtime.LockOSThread()
		p.err = p.start(noNamespaces)
		close(p.ready)
		if p.err == nil {
			for f := range p.work {
				f()
			}
		}
	}()
	return p
}

func (p *Prespawned) start(noNamespaces bool) error {
	// Guest processes orphaned below the keeper come back to kbox.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	// The stage holds the programs' staging directory (the guest's host
	// cwd: the kernel resolves staged names there, named as the
	// programs are) and, beside it, the socket binder's root
	// (binder.c): a program named "sock" once met the binder's directory
	// in its place and could not be run (EACCES). The keeper removes the
	// stage even when kbox was killed (guestinit.c).
	var err error
	if p.stage, err = os.MkdirTemp("", "kbox-stage-"); err != nil {
		return err
	}
	p.progs, p.sockDir = filepath.Join(p.stage, "p"), filepath.Join(p.stage, "sock")
	for _, d := range []string{p.progs, p.sockDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			os.RemoveAll(p.stage)
			return err
		}
	}
	wantNS := "1"
	if noNamespaces {
		wantNS = "0"
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		os.RemoveAll(p.stage)
		return err
	}
	parent := os.NewFile(uintptr(pair[0]), "kbox-supervisor")
	child := os.NewFile(uintptr(pair[1]), "kbox-guest")
	defer child.Close()
	bpair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		parent.Close()
		os.RemoveAll(p.stage)
		return err
	}
	binderEnd := os.NewFile(uintptr(bpair[1]), "kbox-binder")
	defer binderEnd.Close()
	cmd := &exec.Cmd{
		Args:       []string{"kbox-guest"},
		Env:        []string{"KBOX_GUEST_INIT=1", "KBOX_GUEST_NS=" + wantNS, "KBOX_GUEST_SOCKDIR=" + p.sockDir},
		Dir:        p.progs,
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{child, binderEnd},
		SysProcAttr: &syscall.SysProcAttr{
			Pdeathsig: syscall.SIGKILL,
			Setpgid:   true,
		},
	}
	if p.tty = isTTY(0); p.tty {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = 0
	}
	startup.Command(cmd)
	if err := cmd.Start(); err != nil {
		parent.Close()
		unix.Close(bpair[0])
		os.RemoveAll(p.stage)
		return fmt.Errorf("start guest: %w", err)
	}
	p.cmd, p.parent, p.binder = cmd, parent, bpair[0]
	return nil
}

// PrespawnEarly is Prespawn for a start-up begun well before its guest
// runs (beside the kernel's boot): nil when stdin is a terminal, whose
// foreground must not move before there is a guest to give it to.
func PrespawnEarly(noNamespaces bool) *Prespawned {
	if isTTY(0) {
		return nil
	}
	return Prespawn(noNamespaces)
}

// serve runs f on the thread that started the process (which Run's
// serving needs: one thread, the guest's parent), once it has started,
// then lets that thread end.
func (p *Prespawned) serve(f func() error) error {
	<-p.ready
	p.taken = true
	if p.err != nil {
		return p.err
	}
	var err error
	done := make(chan struct{})
	p.work <- func() {
		defer close(done)
		err = f()
	}
	<-done
	p.release()
	return err
}

// release lets the thread that started the process end.
func (p *Prespawned) release() { p.released.Do(func() { close(p.work) }) }

// Abandon ends a start-up that Run did not take (the run failed before
// its guest, or took an in-process tier): at EOF on its socket the
// process exits. A no-op once Run took it.
func (p *Prespawned) Abandon() {
	if p == nil || p.taken {
		return
	}
	<-p.ready
	if p.err == nil {
		p.parent.Close()
		unix.Close(p.binder)
		p.cmd.Wait() // the keeper removed the stage; so does kbox
		os.RemoveAll(p.stage)
		if p.tty {
			restoreForeground()
		}
	}
	p.release()
}

// sendStart sends the start message (guestinit.c, read_start): 'C', a
// u32 length, then the argument count, the arguments and the
// environment, each ending in a NUL.
func sendStart(sock *os.File, args, env []string) error {
	fields := append(append([]string{strconv.Itoa(len(args))}, args...), env...)
	n := 0
	for _, f := range fields {
		if strings.IndexByte(f, 0) >= 0 {
			return fmt.Errorf("start guest: %q holds a NUL byte", f)
		}
		n += len(f) + 1
	}
	if n > 32<<20 {
		return errors.New("start guest: arguments and environment above 32 MiB")
	}
	msg := binary.NativeEndian.AppendUint32([]byte{'C'}, uint32(n))
	for _, f := range fields {
		msg = append(append(msg, f...), 0)
	}
	if _, err := sock.Write(msg); err != nil {
		return fmt.Errorf("start guest: %w", err)
	}
	return nil
}
