// Package supervisor runs guest programs under the seccomp user-notification
// tier: it starts the guest with kbox's filter installed, holds the listener,
// and answers each notification through the dispatch engine.
package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procs"
	"github.com/kbox-project/kbox/seccomp"
	"github.com/kbox-project/kbox/tierpolicy"
	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Config describes one guest run.
type Config struct {
	Argv    []string
	Env     []string
	Path    string // guest path of the program
	WorkDir string
	// Engine serves the guest's syscalls (Engine.Serve, which also
	// observes them); Run begins and stops it, its maker closes it.
	Engine *dispatch.Engine
	Debug  bool // KBOX_DEBUG: the listener's set-up on stderr
	// Verbose prints setup steps (kbox -v): the namespaces the guest got.
	Verbose bool
	// NoNamespaces keeps the guest in kbox's network and IPC namespaces
	// (KBOX_NAMESPACES=off): abstract socket names and System V IPC are
	// then refused, as where no namespace can be made.
	NoNamespaces bool
	// Session, when set, makes the run a live session: no program runs
	// first, Argv and Path are unused, and Session starts programs until
	// it is closed (spawn.go). Run returns once it is.
	Session *Spawns
	// Phase, when set, is told where the run is (kbox's start-up trace,
	// KBOX_TRACE_STARTUP): "spawn" once the guest process is confined,
	// "exec" once its first execve is answered, "run" once it exited.
	Phase func(name string)
	// Pre, when set, is the guest's start-up begun earlier (Prespawn);
	// else Run begins one.
	Pre *Prespawned
}

// Namespaces are the namespaces the guest start-up made (guestinit.c).
type Namespaces uint32

// The namespaces, as guestinit.c reports them.
const (
	NSNet  Namespaces = 1
	NSIPC  Namespaces = 2
	NSUser Namespaces = 4
)

// guest is the dispatch.Guest of one notification.
type guest struct {
	l    *seccomp.Listener
	n    *seccomp.Notif
	co   *colocator
	tgid int // the notifying task's process
}

func (g *guest) Pid() int { return int(g.n.Pid) }

func (g *guest) ReadSome(addr uint64, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, e := processVM(int(g.n.Pid), b, addr, false)
	if e != 0 {
		return 0, e
	}
	return n, nil
}

func (g *guest) Read(addr uint64, b []byte) error {
	n, err := g.ReadSome(addr, b)
	if err == nil && n < len(b) {
		err = unix.EFAULT
	}
	return err
}

func (g *guest) Write(addr uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	n, e := processVM(int(g.n.Pid), b, addr, true)
	switch {
	case e != 0:
		return e
	case n < len(b):
		return unix.EFAULT
	}
	return nil
}

func (g *guest) WriteForce(addr uint64, b []byte) error {
	if err := g.Write(addr, b); err == nil {
		return nil
	}
	f, err := os.OpenFile("/proc/"+strconv.Itoa(int(g.n.Pid))+"/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(b, int64(addr))
	return err
}

func (g *guest) Valid() error { return g.l.IDValid(g.n.ID) }

func (g *guest) AddFDReply(hostfd int, cloexec bool) (int, error) {
	a := seccomp.NotifAddfd{ID: g.n.ID, Srcfd: uint32(hostfd), Flags: unix.SECCOMP_ADDFD_FLAG_SEND}
	if cloexec {
		a.NewfdFlags = unix.O_CLOEXEC
	}
	g.co.pin(int(g.n.Pid), g.tgid)
	return g.l.Addfd(&a)
}

// Defer keeps what answering the notification later needs.
func (g *guest) Defer() dispatch.Pending { return &pending{l: g.l, id: g.n.ID, pid: int(g.n.Pid)} }

// pending is a notification answered after others: the listener takes
// answers in any order and from any thread. Run closes the engine's FIFOs,
// which hold pendings, before it closes the listener.
type pending struct {
	l   *seccomp.Listener
	id  uint64
	pid int
}

func (p *pending) Valid() error { return p.l.IDValid(p.id) }

func (p *pending) Pid() int { return p.pid }

func (p *pending) AddFD(hostfd int, cloexec bool) (int, error) {
	a := seccomp.NotifAddfd{ID: p.id, Srcfd: uint32(hostfd)}
	if cloexec {
		a.NewfdFlags = unix.O_CLOEXEC
	}
	return p.l.Addfd(&a)
}

func (p *pending) Reply(val int64) error { return p.l.Return(p.id, val) }

func (p *pending) ReplyErrno(en unix.Errno) error { return p.l.Errno(p.id, en) }

func (p *pending) Write(addr uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	n, e := processVM(p.pid, b, addr, true)
	switch {
	case e != 0:
		return e
	case n < len(b):
		return unix.EFAULT
	}
	return nil
}

func (g *guest) AddFD(hostfd, target int, cloexec bool) (int, error) {
	a := seccomp.NotifAddfd{ID: g.n.ID, Srcfd: uint32(hostfd)}
	if target >= 0 {
		a.Flags = unix.SECCOMP_ADDFD_FLAG_SETFD
		a.Newfd = uint32(target)
	}
	if cloexec {
		a.NewfdFlags = unix.O_CLOEXEC
	}
	g.co.pin(int(g.n.Pid), g.tgid)
	return g.l.Addfd(&a)
}

// Run starts the guest and serves it until it exits; it returns the exit
// status kbox should report (128+N for a signal).
func Run(cfg Config) (int, error) {
	if err := checkHostKernel(); err != nil {
		return 0, err
	}
	pre := cfg.Pre
	if pre == nil {
		pre = Prespawn(cfg.NoNamespaces)
	}
	var status int
	err := pre.serve(func() error {
		var err error
		status, err = run(cfg, pre)
		return err
	})
	return status, err
}

// run starts the guest that pre began and serves it, on the thread that
// started it (Prespawned.serve).
func run(cfg Config, pre *Prespawned) (int, error) {
	eng := cfg.Engine
	phase := cfg.Phase
	if phase == nil {
		phase = func(string) {}
	}
	// Serving switches this thread's LKL credentials to the guests'
	// (dispatch/cred.go): it goes back to kbox's own root before the
	// thread can run anything else.
	defer lkl.UseCred(nil)
	cmd, parent, bpair0 := pre.cmd, pre.parent, pre.binder
	defer os.RemoveAll(pre.stage)
	defer parent.Close()
	tier := &execTier{stage: pre.progs, firstExec: func() { phase("exec") }}
	eng.Tier = tier
	// kbox's settings first, where the start-up's getenv finds them
	// before any of the guest's own (it removes them all).
	env := []string{"KBOX_GUEST_NOFILE=" + strconv.Itoa(eng.Opt.VirtualFDs), "KBOX_GUEST_EXEC=" + cfg.Path}
	args := cfg.Argv
	if cfg.Session != nil {
		env, args = []string{env[0], "KBOX_GUEST_SESSION=1"}, []string{"kbox-spawner"}
	}
	env = append(env, cfg.Env...)
	pid := cmd.Process.Pid
	defer killGuests(pid)
	if pre.tty {
		defer restoreForeground()
	}
	ns, binderPid, err := readNamespaces(parent)
	if err != nil {
		unix.Close(bpair0)
		cmd.Process.Kill()
		cmd.Wait()
		return 0, err
	}
	eng.Binder = binderPid
	binder := unixsock.NewBinder(bpair0)
	eng.Sockets = unixsock.New(binder, ns&NSNet != 0)
	defer eng.Stop() // when nothing else stopped it
	eng.IPCNamespace = ns&NSIPC != 0
	if cfg.Verbose {
		reportNamespaces(ns, cfg.NoNamespaces)
	}
	pol := tierpolicy.Seccomp(uint32(eng.Opt.VirtualFDs), ns&NSIPC != 0)
	if eng.Net != nil {
		tierpolicy.WithNet(pol)
	}
	if eng.Opt.Policy.SeesForks() {
		tierpolicy.NotifyForks(pol)
	}
	prog, err := pol.Assemble()
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, fmt.Errorf("seccomp filter: %w", err)
	}
	if err := sendStart(parent, args, env); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, err
	}
	listener, guestPid, err := handshake(parent, prog)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, err
	}
	defer listener.Close()
	phase("spawn")
	// Parked FIFO opens and socket calls still waiting in goroutines are
	// answered through the listener: the engine stops first.
	defer eng.Stop()
	// Kernels with sync wake-up (6.6+) also end a blocked Recv with ENOENT
	// once no task uses the filter: the serve loop can then call Recv
	// directly, without a poll per notification.
	syncWake := listener.SetSyncWakeup()
	if syncWake != nil && cfg.Debug {
		fmt.Fprintf(os.Stderr, "kbox: %v\n", syncWake)
	}
	// pid is the keeper (guestinit.c), which relays the exit status;
	// guestPid is the guest under it.
	if cfg.Session != nil {
		eng.BeginSession(guestPid, cfg.WorkDir)
	} else {
		eng.Begin(guestPid, pid, cfg.WorkDir)
	}
	if _, err := parent.Write([]byte{'G'}); err != nil {
		return 0, fmt.Errorf("start guest: %w", err)
	}
	if cfg.Session != nil {
		cfg.Session.attach(parent, guestPid)
		defer cfg.Session.Close()
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			if cfg.Session != nil {
				cfg.Session.Close() // a session ends as a whole
				continue
			}
			// The guest's own process group (guestinit.c), and the
			// keeper's, which ignores them.
			unix.Kill(-guestPid, s.(unix.Signal))
			unix.Kill(-pid, s.(unix.Signal))
		}
	}()

	done := make(chan unix.WaitStatus, 1)
	go func() {
		ws := waitExit(pid)
		if syncWake == nil {
			// The main guest is gone: end every other guest process
			// too; the blocked Recv then fails once none is left.
			killGuests(pid)
		}
		done <- ws
	}()
	var ws unix.WaitStatus
	exited := false
	serve(listener, eng, tier, cfg.Session, guestPid, syncWake == nil, func() bool {
		select {
		case ws = <-done:
			exited = true
		default:
		}
		return exited
	})
	if !exited {
		ws = <-done
	}
	phase("run")
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}

// readNamespaces reads the guest start-up's first message: 'N', the
// namespaces it made and the socket binder's pid (0: none).
func readNamespaces(sock *os.File) (Namespaces, int, error) {
	var hello [9]byte
	if _, err := io.ReadFull(sock, hello[:]); err != nil || hello[0] != 'N' {
		return 0, 0, errors.New("guest start-up failed before making its namespaces")
	}
	return Namespaces(binary.NativeEndian.Uint32(hello[1:])), int(binary.NativeEndian.Uint32(hello[5:])), nil
}

// reportNamespaces says under -v what the guest got: its own network and
// IPC namespaces (in a user namespace of its own when kbox is not root),
// or none, and what that takes away.
func reportNamespaces(ns Namespaces, off bool) {
	why := "unshare refused; user namespaces disabled?"
	if off {
		why = "KBOX_NAMESPACES=off"
	}
	switch {
	case ns == 0:
		fmt.Fprintf(os.Stderr, "kbox: warning: no private network and IPC namespaces for the guest (%s): abstract unix socket names are refused (EPERM), System V IPC and POSIX message queues too (ENOSYS)\n", why)
	case ns&NSUser != 0:
		fmt.Fprintln(os.Stderr, "kbox: guest namespaces: network, IPC, user (its uid and gid mapped to themselves)")
	default:
		fmt.Fprintln(os.Stderr, "kbox: guest namespaces: network, IPC")
	}
	if ns == 0 && os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "kbox: warning: the socket binder cannot chroot: a path socket's address is shown to the guest without its leading slash")
	}
}

func handshake(sock *os.File, prog []bpf.RawInstruction) (*seccomp.Listener, int, error) {
	buf := make([]byte, 4+8*len(prog))
	binary.LittleEndian.PutUint32(buf, uint32(len(prog)))
	for i, ins := range prog {
		o := 4 + 8*i
		binary.LittleEndian.PutUint16(buf[o:], ins.Op)
		buf[o+2], buf[o+3] = ins.Jt, ins.Jf
		binary.LittleEndian.PutUint32(buf[o+4:], ins.K)
	}
	if _, err := sock.Write(buf); err != nil {
		return nil, 0, fmt.Errorf("send filter to guest: %w", err)
	}
	var hello [9]byte // 'L', guest pid, listener fd (u32 each)
	if _, err := io.ReadFull(sock, hello[:]); err != nil || hello[0] != 'L' {
		return nil, 0, errors.New("guest start-up failed before installing the seccomp filter")
	}
	pid := int(binary.LittleEndian.Uint32(hello[1:]))
	lfd := int(binary.LittleEndian.Uint32(hello[5:]))
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("guest start-up: %w", err)
	}
	fd, err := unix.PidfdGetfd(pidfd, lfd, 0)
	unix.Close(pidfd)
	if err != nil {
		return nil, 0, fmt.Errorf("guest sent no seccomp listener: %w", err)
	}
	return seccomp.NewListener(fd), pid, nil
}

// serve answers notifications until the listener hangs up (no guest left)
// or stop reports that the main guest exited.
//
// With recvFirst (kernel 6.6+, see Run) it blocks in Recv, which fails with
// ENOENT once no task uses the filter; a poll then tells that hang-up from
// an interrupted notification. Otherwise it polls before each Recv, since
// an older kernel's Recv blocks forever after the last guest exits.
func serve(l *seccomp.Listener, eng *dispatch.Engine, tier *execTier, spawns *Spawns, guestPid int, recvFirst bool, stop func() bool) {
	var n seccomp.Notif
	var resp seccomp.NotifResp
	g := &guest{l: l, n: &n, co: newColocator(colocationHold, eng.Knows)}
	eng.Pins = g.co
	defer g.co.close()
	parked := false // this thread's P given back to Go's work (procs)
	defer func() {
		if parked {
			procs.Unpark()
		}
	}()
	runtime.LockOSThread() // already (seccomp/sigmask.go); said here for CredSlot's sake
	defer runtime.UnlockOSThread()
	defer seccomp.BlockAsyncSignals()() // no ioctl of this thread is interrupted (seccomp/sigmask.go)
	var req dispatch.Request            // reused: one allocation, not one per notification
	req.CredSlot = lkl.CredSlot()
	var ahead backlog // received before their turn (backlog.go)
	exited := false
	for {
		if !ahead.next(&n) {
			if !recvFirst {
				readable, hup, err := l.Poll(50 * time.Millisecond)
				if err != nil || hup {
					return
				}
				if !exited && stop() {
					// The main guest is gone: end every other guest process too.
					exited = true
					killGuests(guestPid)
				}
				if !readable {
					if exited {
						return
					}
					continue
				}
			}
			if err := l.Recv(&n); err != nil {
				if recvFirst {
					if _, hup, perr := l.Poll(0); perr != nil || hup {
						return
					}
				}
				continue // target gone or interrupted: the kernel re-notifies
			}
		}
		ahead.drain(l)
		if spawns != nil && n.Data.Nr == unix.SYS_GETPPID && n.Data.Args[0] == spawnMagic && giveStdio(spawns, g, &n) {
			continue
		}
		req.Nr, req.Args, req.G, req.P, req.Path = int(n.Data.Nr), n.Data.Args, g, eng.Lookup(int(n.Pid)), ""
		if g.tgid = int(n.Pid); req.P != nil {
			g.tgid = req.P.Tgid
		}
		g.co.touch(int(n.Pid), g.tgid)
		if !parked && req.Nr == unix.SYS_SOCKET && inetFamily(req.Args[0]) {
			// The guest's internet sockets are Go's work (pumps, the
			// user-mode stack), which wants every CPU while this thread
			// waits in the ioctl holding its P: connections per second
			// rose by a fifth. Other guests keep Go's Ps as they are.
			procs.Park()
			parked = true
		}
		var res dispatch.Result
		if req.P == nil || tier.checkExec(&req) {
			res = eng.Serve(&req)
		} else {
			res = dispatch.Result{Disp: dispatch.Denied, Errno: unix.EPERM} // killed: it ran a program kbox did not prepare
		}
		if res.Action == dispatch.Answered || res.Action == dispatch.Deferred {
			continue // the handler's AddFD answered it, or it is answered later
		}
		resp = seccomp.NotifResp{ID: n.ID}
		switch {
		case res.Action == dispatch.Continue:
			resp.Flags = seccomp.FlagContinue
		case res.Errno != 0:
			resp.Error = -int32(res.Errno)
		default:
			resp.Val = res.Val
		}
		l.Send(&resp)
	}
}

// killGuests kills the guest process group and every process left that
// kbox reaped as a subreaper, so that nothing outlives kbox.
func killGuests(pid int) {
	unix.Kill(-pid, unix.SIGKILL)
	for i := 0; i < 50; i++ {
		if !hasChildren() {
			return
		}
		kids := children()
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			unix.Kill(k, unix.SIGKILL)
			var ws unix.WaitStatus
			unix.Wait4(k, &ws, unix.WNOHANG, nil)
		}
		time.Sleep(time.Millisecond)
	}
}

// hasChildren reports whether kbox has a child process, live or dead,
// reaping none: one waitid instead of reading every thread's children
// file (children), which at a run's end, with about 30 threads, took
// milliseconds where system calls are slow (docs/benchmarks.md).
func hasChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WSTOPPED|unix.WCONTINUED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
	return err != unix.ECHILD
}

func children() []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := hostproc.Read("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

func isTTY(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// restoreForeground makes kbox's process group the terminal's foreground
// again after the guest had it.
func restoreForeground() {
	signal.Ignore(unix.SIGTTOU)
	defer signal.Reset(unix.SIGTTOU)
	pgrp := unix.Getpgrp()
	unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, pgrp)
}

// inetFamily reports whether socket(2)'s domain argument is AF_INET or
// AF_INET6.
func inetFamily(domain uint64) bool {
	d := int32(domain)
	return d == unix.AF_INET || d == unix.AF_INET6
}
