//go:build linux && amd64 && cgo

package trap

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/elfload"
	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procs"
	"github.com/kbox-project/kbox/rewrite"
	"github.com/kbox-project/kbox/seccomp"
	"github.com/kbox-project/kbox/tierpolicy"
	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

var errLayout = errors.New("trap: struct kbox_thread layout differs between C and Go")

// Available reports whether this build has the trap tier.
func Available() bool { return true }

// guestFDs is the guest's fd range [0, guestFDs) when the hard limit on
// open files allows it (newFDSpace): the guest's RLIMIT_NOFILE and the
// engine's virtual fd base, as in the seccomp tier.
const guestFDs = 1024

var (
	// guestStdio keeps the os.Files of fds 1 and 2 alive once kbox writes
	// to copies: the guest's fds are never closed by kbox.
	guestStdio []*os.File

	prepared *fdSpace
	prepErr  error
	prepOnce sync.Once
)

// Prepare reserves the guest's fd range: every free fd below the guest's
// limit gets a placeholder, so that everything kbox opens from now on lands
// above it. Call it first thing, before the kernel boots. It returns the
// guest's fd limit (the engine's virtual fd base).
func Prepare() (int, error) {
	prepOnce.Do(func() {
		var lim unix.Rlimit
		if prepErr = unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); prepErr != nil {
			return
		}
		g := guestFDs
		if lim.Max < 2*guestFDs {
			g = int(lim.Max / 2) // any hard limit: half for the guest
		}
		if prepared, prepErr = newFDSpace(g); prepErr != nil {
			return
		}
		// fds 0-2 are the guest's: it may close or replace them (glibc
		// programs close stdout and stderr at exit). kbox's own messages
		// (--stats, errors at the end of the run) go to copies of them,
		// above the guest's range.
		for _, f := range []**os.File{&os.Stdout, &os.Stderr} {
			if nfd, err := unix.FcntlInt((*f).Fd(), unix.F_DUPFD_CLOEXEC, g); err == nil {
				guestStdio = append(guestStdio, *f) // its finalizer would close the guest's fd
				*f = os.NewFile(uintptr(nfd), (*f).Name())
			}
		}
	})
	if prepErr != nil {
		return 0, fmt.Errorf("trap tier: reserving the guest's fds: %w", prepErr)
	}
	return prepared.g, nil
}

// Release gives back the guest's fd range Prepare reserved (its
// placeholders are closed), when the run goes to the seccomp tier after
// all (auto).
func Release() {
	if prepared == nil {
		return
	}
	prepared.mu.Lock()
	defer prepared.mu.Unlock()
	for fd, f := range prepared.free {
		if f {
			unix.Close(fd)
			prepared.free[fd] = false
		}
	}
}

// brkSize is the address space reserved for a guest's break: LKL's
// memory lies at 1 GiB, and a non-PIE program's break (from about 4 MiB)
// must end below it. musl and glibc fall back to mmap when brk fails.
const brkSize = 256 << 20

// tier is the one trap-tier run of this process (C calls back into it).
type tier struct {
	cfg Config
	eng *dispatch.Engine
	pid int
	fds *fdSpace
	mem regions
	// loaded is the program the guest runs (its regions, its break).
	loaded *elfload.Loaded
	// proc is the guest's process in the engine; firstName is the first
	// program's name, which its first thread takes (warm).
	proc      *dispatch.Proc
	firstName string
	tmu       sync.Mutex
	threads   []atomic.Pointer[thread] // by slot: written under tmu, read without (thread)
	byTid     map[int]*thread
	live      int

	sig sigState
	rw  rwState

	exitOnce sync.Once
	done     chan Exit
	ended    atomic.Bool

	setupErr chan error
	noted    sync.Map // one-time messages
}

var tr *tier

// Kill ends the guest as SIGKILL would (kbox's --timeout): every guest
// thread stops, and Run returns, so kbox writes its files back before it
// exits. A guest's pid is kbox's in this tier: kill(2) of it would end
// kbox at once, with nothing written back.
func Kill() {
	if t := tr; t != nil {
		t.send(nil, int(unix.SIGKILL), nil)
	}
}

// thread is one guest thread.
type thread struct {
	core
	slot int
	tid  int
	req  dispatch.Request
	g    guest

	// Emulated signal state (signals.go).
	mask, pending uint64
	info          map[int][]byte
	ss            struct {
		sp, size uint64
		flags    int32
	}
	savedMask *uint64 // rt_sigsuspend's mask to restore

	batches []statBatch // the stat table's stack (hint_stat_cgo.go)

	ctid     uint64 // clear_child_tid: zeroed and woken at exit
	setctid  uint64 // CLONE_CHILD_SETTID: the tid written there at start
	setptid  uint64 // CLONE_PARENT_SETTID: the same, in the parent's memory (shared)
	blocking atomic.Int32
	die      atomic.Bool
	wake     chan struct{}
	started  chan struct{}
	lastNr   int
	a        [6]uint64 // the arguments of the call being served (syscall)
	// sysNr is the syscall the thread comes back from, whose result
	// may be a restart code (restart.go); -1 when none.
	sysNr int
}

// Run loads the guest and runs it in the trap tier until it exits.
func Run(cfg Config) (Exit, error) {
	if prepared == nil {
		return Exit{}, errors.New("trap tier: Prepare was not called")
	}
	if err := initCore(); err != nil {
		return Exit{}, &InstallError{fmt.Errorf("trap tier: %w", err)}
	}
	eng := cfg.Engine
	t := &tier{cfg: cfg, eng: eng, pid: os.Getpid(), fds: prepared, byTid: map[int]*thread{},
		done: make(chan Exit, 1), setupErr: make(chan error, 1)}
	t.threads = make([]atomic.Pointer[thread], maxSlots())
	if cfg.Verbose {
		for fd, k := range t.fds.kbox {
			if k {
				fmt.Fprintf(os.Stderr, "kbox: trap tier: fd %d is kbox's, not the guest's\n", fd)
			}
		}
	}
	tr = t
	if cfg.Rewrite {
		if err := t.initRewrite(); err != nil {
			tr = nil
			return Exit{}, &InstallError{err}
		}
		t.hintClocks() // answers prepared ahead at patched sites (hint.c)
		t.statClock()  // and stats (hint_stat.c)
	}
	// Go's template thread must exist before a guest thread can ask Go
	// for a new thread (kboxTrapServe): it is made now, from a thread
	// without the guest's filter.
	runtime.LockOSThread()
	runtime.UnlockOSThread()
	// The shadows' content store and the devpts instance are made on first
	// use; a helper process started from a guest thread would inherit its
	// filter, so they are made now.
	eng.Shadows.Prepare()
	// The socket binder names the guest's unix sockets (a bind to a path
	// was EPERM in these tiers); no keeper forks it here, so kbox starts
	// it itself at the first bind of a path. Abstract names stay refused:
	// the guest has kbox's network namespace, the host's.
	if eng.Sockets == nil {
		start, stop := unixsock.BinderStarter()
		eng.Sockets = unixsock.New(unixsock.NewLazyBinder(start), false)
		defer stop()
	}

	prog, en := eng.ReadProgram(cfg.Path)
	if en != 0 {
		return Exit{}, &ProgramError{Path: cfg.Path, Errno: en}
	}
	defer prog.Close()
	eng.Tier = execTier{}
	eng.GuestFdOpen = t.fds.open
	eng.Shadows.NoDescription = t.fds.placeholder
	eng.Shadows.NoDescriptionBelow = t.fds.g
	eng.Shadows.SharedFiles = true
	// The guest's process is kbox's: no keeper (orphans cannot exist).
	p := eng.Begin(t.pid, 0, cfg.WorkDir)
	eng.SetExe(p, cfg.Path)
	t.proc, t.firstName = p, cfg.Path
	// Built before the guest is mapped: every executable mapping now is
	// kbox's own, trusted by the filter.
	filter, err := t.filter()
	if err != nil {
		return Exit{}, err
	}
	c := p.Cred()
	spec := &elfload.Spec{
		Prog: elfload.Image{Name: cfg.Path, FD: prog.Main},
		Argv: cfg.Argv, Envp: cfg.Env, ExecFn: cfg.Path,
		UID: c.UID, EUID: c.EUID, GID: c.GID, EGID: c.EGID,
		BrkSize: brkSize,
	}
	if prog.Interp >= 0 {
		spec.Interp = &elfload.Image{Name: prog.InterpPath, FD: prog.Interp}
	}
	l, err := elfload.Load(spec)
	if errors.Is(err, unix.EEXIST) {
		// The program's fixed addresses are kbox's own (LKL's memory,
		// the slot table): it cannot run in this process, and nothing
		// of it ran (auto falls through to the seccomp tier).
		eng.Exit(p)
		eng.Tier = nil
		t.rwClose()
		tr = nil
		return Exit{}, &InstallError{fmt.Errorf("%s: %w", cfg.Path, err)}
	}
	if err != nil {
		if cfg.Verbose {
			m, _ := hostproc.Read("/proc/self/maps")
			fmt.Fprintf(os.Stderr, "kbox: maps:\n%s", m)
		}
		return Exit{}, fmt.Errorf("%s: %w", cfg.Path, err)
	}
	t.loaded = l
	if cfg.Phase != nil {
		cfg.Phase("load")
	}
	for _, r := range l.Regions {
		t.mem.add(uint64(r.Start), uint64(r.End))
	}
	live.Store(t)

	t.startSignals()
	defer t.stopSignals()

	th, err := t.newThread()
	if err != nil {
		return Exit{}, err
	}
	th.k.Gregs[regRSP] = uint64(l.SP)
	th.k.Gregs[regRIP] = uint64(l.Entry)
	th.k.Gregs[regEFL] = 0x202
	th.k.FSGuest = 0
	th.resetFPU()
	if err := th.start(filter); err != nil {
		return Exit{}, fmt.Errorf("trap tier: starting the guest thread: %w", err)
	}
	select {
	case err := <-t.setupErr:
		return Exit{}, err
	case ex := <-t.done:
		if cfg.Phase != nil {
			cfg.Phase("run")
		}
		t.stopAll()
		t.fds.closeAll()
		eng.Stop()
		ex.Sites = t.siteStats()
		return ex, nil
	}
}

// filter builds the guest threads' seccomp filter: the seccomp tier's
// policy (its deny list, its native syscalls) with SECCOMP_RET_TRAP for
// what the tier serves, and what runs natively there but must be trapped
// in-process (tierpolicy.InProcess: the table's InProc column), with
// kbox's own code (every executable mapping at this point: kbox, its libc
// and loader, the vDSO) trusted.
func (t *tier) filter() ([]bpf.RawInstruction, error) {
	pol := tierpolicy.InProcess(uint32(t.fds.g), t.eng.Net != nil, t.cfg.Rewrite)
	ranges, err := textRanges()
	if err != nil {
		return nil, err
	}
	if t.rw.on {
		// The rewrite tier's stubs are guest code, not kbox's: a
		// syscall made there must trap.
		ranges = without(ranges, t.rw.stubRX, t.rw.stubRX+rewrite.X86StubBytes)
	}
	pol.Trusted = seccomp.SplitRanges(ranges)
	t.rwTable(pol)
	return pol.Assemble()
}

// without removes [lo, hi) from rs.
func without(rs []seccomp.IPRange, lo, hi uint64) []seccomp.IPRange {
	var out []seccomp.IPRange
	for _, r := range rs {
		if r.Hi <= lo || r.Lo >= hi {
			out = append(out, r)
			continue
		}
		if r.Lo < lo {
			out = append(out, seccomp.IPRange{Lo: r.Lo, Hi: lo})
		}
		if r.Hi > hi {
			out = append(out, seccomp.IPRange{Lo: hi, Hi: r.Hi})
		}
	}
	return out
}

// textRanges are kbox's executable mappings, from /proc/self/maps.
func textRanges() ([]seccomp.IPRange, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []seccomp.IPRange
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || len(fields[1]) < 3 || fields[1][2] != 'x' {
			continue
		}
		if len(fields) >= 6 && fields[5] == "[vsyscall]" {
			continue
		}
		a, b, _ := strings.Cut(fields[0], "-")
		lo, err1 := strconv.ParseUint(a, 16, 64)
		hi, err2 := strconv.ParseUint(b, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Hi == lo {
			out[n-1].Hi = hi
			continue
		}
		out = append(out, seccomp.IPRange{Lo: lo, Hi: hi})
	}
	if len(out) == 0 {
		return nil, errors.New("trap tier: no executable mapping of kbox's found")
	}
	return out, sc.Err()
}

// newThread takes a free slot.
func (t *tier) newThread() (*thread, error) {
	t.tmu.Lock()
	defer t.tmu.Unlock()
	for i := range t.threads {
		if t.threads[i].Load() != nil || !slotFree(i) {
			continue
		}
		c, ok := newCore(i)
		if !ok {
			return nil, unix.ENOMEM
		}
		th := &thread{core: c, slot: i, wake: make(chan struct{}, 1), started: make(chan struct{}), sysNr: -1}
		th.g.t = th
		t.threads[i].Store(th)
		t.live++
		return th, nil
	}
	return nil, unix.EAGAIN
}

// thread returns the thread of a slot: once per trip into kbox, without
// the lock.
func (t *tier) thread(slot int) *thread { return t.threads[slot].Load() }

func (t *tier) byTID(tid int) *thread {
	t.tmu.Lock()
	defer t.tmu.Unlock()
	return t.byTid[tid]
}

func (t *tier) each(f func(*thread)) {
	t.tmu.Lock()
	list := make([]*thread, 0, len(t.byTid))
	for i := range t.threads {
		if th := t.threads[i].Load(); th != nil && th.tid != 0 {
			list = append(list, th)
		}
	}
	t.tmu.Unlock()
	for _, th := range list {
		f(th)
	}
}

// warm runs once on each new thread, in kbox mode, before its guest code.
func warm(slot int) {
	t := tr
	th := t.thread(slot)
	th.tid = int(th.k.Tid)
	// This thread's record of its LKL credentials: every call it serves
	// is served here (a callback stays on its thread).
	th.req.CredSlot = lkl.CredSlot()
	if t.rw.on {
		th.req.Hints = th // answers prepared ahead (dispatch/hint.go)
	}
	procs.Park() // its guest code holds this thread's P (procs)
	t.tmu.Lock()
	t.byTid[th.tid] = th
	first := t.firstName
	t.firstName = ""
	t.tmu.Unlock()
	if first != "" {
		// The first guest thread stands for the guest's main thread in
		// its /proc (kbox's own main thread is the process's), named
		// after the program as execve names a task; later threads
		// inherit its name from the thread that makes them.
		t.nameMain(th, first)
	}
	if th.setctid != 0 {
		writeU32(&t.mem, th.setctid, uint32(th.tid))
	}
	if th.setptid != 0 {
		writeU32(&t.mem, th.setptid, uint32(th.tid))
	}
	if t.ended.Load() {
		th.k.Action = actExit
	}
	close(th.started)
}

func startFailed(slot int, err unix.Errno) {
	tr.setupErr <- fmt.Errorf("trap tier: installing the seccomp filter: %w", err)
}

// gone runs when a thread has left guest code for good.
func gone(slot int) {
	t := tr
	if th := t.threads[slot].Load(); th != nil {
		t.sig.mu.Lock() // its pending signals go with it
		for sig := 1; sig <= 64; sig++ {
			t.sig.dropPending(&th.pending, sig)
		}
		t.sig.mu.Unlock()
	}
	t.tmu.Lock()
	th := t.threads[slot].Load()
	if th != nil {
		delete(t.byTid, th.tid)
		t.threads[slot].Store(nil)
	}
	t.tmu.Unlock()
	procs.Unpark()
}

// finish ends the guest (exit_group, the last thread's exit, a fatal
// signal): the first call wins.
func (t *tier) finish(ex Exit) {
	t.exitOnce.Do(func() {
		t.ended.Store(true)
		t.done <- ex
	})
}

// stopAll makes every guest thread leave (a kick; it sees die on its way
// back) and waits a little for them.
func (t *tier) stopAll() {
	t.each(func(th *thread) {
		th.die.Store(true)
		th.kick()
	})
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		t.tmu.Lock()
		n := len(t.byTid)
		t.tmu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// kick interrupts th: kickSig sent by kbox brings it into kbox (core.c),
// where pending signals and die are seen.
func (th *thread) kick() {
	unix.Tgkill(tr.pid, th.tid, kickSig)
}

// serve handles what brought thread slot into kbox.
func serve(slot int) {
	t := tr
	th := t.thread(slot)
	k := th.k
	k.Action = actResume
	th.sysNr = -1
	switch k.Event {
	case evKick:
		th.interruptedNative()
	case evSyscall:
		ip, nr := k.Gregs[regRIP], int(k.Nr)
		th.syscall()
		if t.rw.on && !th.die.Load() {
			t.trapped(th, ip, nr, k.Gregs[regRAX])
		}
	case evPatched:
		th.syscall()
	case evSignal:
		if !th.rwFault(int(k.Signo)) {
			th.syncSignal(int(k.Signo))
		}
	}
	t.unstub(&k.Gregs)
	if !th.die.Load() && !t.ended.Load() {
		th.deliver()
	}
	if th.die.Load() || t.ended.Load() {
		k.Action = actExit
	}
}

// args returns the syscall's arguments from the saved registers.
func (th *thread) args() [6]uint64 {
	g := &th.k.Gregs
	return [6]uint64{g[regRDI], g[regRSI], g[regRDX], g[regR10], g[regR8], g[regR9]}
}

func (th *thread) ret(v int64) { th.k.Gregs[regRAX] = uint64(v) }

func (th *thread) fail(en unix.Errno) { th.ret(-int64(en)) }

func (th *thread) syscall() {
	nr := int(th.k.Nr)
	// The arguments live in the thread, not in this frame: passed by
	// pointer through the transport table, they would move to the heap
	// at every call.
	th.a = th.args()
	a := &th.a
	th.lastNr = nr
	if en := th.checkFDs(nr, a); en != 0 {
		th.fail(en)
		return
	}
	if mayShare(nr, a) {
		sharesBegin()
		th.run(nr, a)
		sharesEnd()
		return
	}
	th.run(nr, a)
}

// run serves syscall nr: the in-process tier's own answer, or the engine's.
func (th *thread) run(nr int, a *[6]uint64) {
	t := tr
	if nr >= 0 && nr < len(transport) && transport[nr] != nil {
		if transport[nr](th, a) {
			return
		}
	}
	th.sysNr = nr // a deferred or continued call may end with a restart code
	r := &th.req
	r.Nr, r.Args, r.G, r.P, r.Path = nr, *a, &th.g, t.eng.Lookup(th.tid), ""
	// Serve: Dispatch, the observatory's hook and the KBOX_DEBUG line.
	// The engine is safe for concurrent calls: guest threads are served
	// in parallel.
	res := t.eng.Serve(r)
	switch res.Action {
	case dispatch.Return:
		if res.Errno != 0 {
			th.fail(res.Errno)
		} else {
			th.ret(res.Val)
		}
	case dispatch.Answered:
		// AddFDReply or the Pending set the return value.
	case dispatch.Deferred:
		th.ret(th.g.waitDeferred())
	case dispatch.Continue:
		th.cont(nr, a)
	}
}

// brk is the guest's break (elfload), or nil.
func (t *tier) brk() *elfload.Brk {
	if t.loaded == nil {
		return nil
	}
	return t.loaded.Brk
}

// note prints msg once per run.
func (t *tier) note(key, msg string) {
	if _, seen := t.noted.LoadOrStore(key, true); !seen {
		fmt.Fprintln(os.Stderr, "kbox: "+msg)
	}
}
