//go:build linux && amd64 && cgo

package trap

import (
	"encoding/binary"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Guest signals are emulated. The host's handlers are process-wide and
// belong to kbox (Go's, and core.c's for SIGSYS and the synchronous
// signals), and a guest thread blocks every other signal on the host, so
// that Go's handler never runs on a thread whose FS is the guest's. kbox
// keeps the guest's actions, each thread's mask, alternate stack and
// pending set, and delivers a signal the way the kernel does: it builds
// an rt_sigframe (siginfo, ucontext with the interrupted registers, mask
// and FP state) on the guest's stack and resumes the thread in the
// handler, whose return through its restorer (rt_sigreturn, trapped)
// brings the saved context back. Signals reach the emulation from the
// guest's own kill/tkill/tgkill, from the guest's synchronous faults
// (core.c), and from the host: kbox's Go threads receive what is sent to
// kbox's pid (signal.Notify) and pass it on. A thread that must notice
// a signal while it runs guest code is kicked: kbox sends it signal 64
// (kickSig; not SIGSYS, which the filter's trap could then lose).

// kaction is the kernel's struct sigaction on x86_64.
type kaction struct {
	handler, flags, restorer, mask uint64
}

const (
	sigDfl      = 0
	sigIgn      = 1
	saNodefer   = 0x40000000
	saResethand = 0x80000000
	saOnstack   = 0x08000000
	saRestart   = 0x10000000
	saRestorer  = 0x04000000
	saSiginfo   = 4
	ssOnstack   = 1
	ssDisable   = 2
	ssFlagBits  = -0x80000000 // SS_AUTODISARM
	siUser      = 0
	siTkill     = -6
	minSigStk   = 2048
)

func bit(sig int) uint64 { return 1 << (sig - 1) }

const unblockable = 1<<(int(unix.SIGKILL)-1) | 1<<(int(unix.SIGSTOP)-1)

// sigState is the process-wide part: actions and process-directed pending
// signals. mu also guards every thread's mask and pending set.
type sigState struct {
	mu      sync.Mutex
	act     [65]kaction
	pending uint64
	info    map[int][]byte
	ch      chan os.Signal
	// npend counts the pending bits set, the process's and every
	// thread's (addPending, dropPending, under mu): deliver's look
	// after each syscall takes no lock while it is 0.
	npend atomic.Int32
}

// addPending sets sig in *p, the process's or a thread's pending set;
// mu is held.
func (s *sigState) addPending(p *uint64, sig int) {
	if *p&bit(sig) == 0 {
		*p |= bit(sig)
		s.npend.Add(1)
	}
}

// dropPending clears sig in *p; mu is held.
func (s *sigState) dropPending(p *uint64, sig int) {
	if *p&bit(sig) != 0 {
		*p &^= bit(sig)
		s.npend.Add(-1)
	}
}

// fromHost are the signals that reach kbox's pid from outside (a shell's
// Ctrl-C, kill, the guest's own alarm and timers) and go on to the guest.
// The synchronous ones are core.c's; SIGURG and SIGPROF are Go's own;
// 32 and 33 are glibc's; the highest is kbox's kick (core.h).
var fromHost = func() []os.Signal {
	l := []os.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGALRM,
		unix.SIGTERM, unix.SIGSTKFLT, unix.SIGCONT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGXCPU,
		unix.SIGVTALRM, unix.SIGWINCH, unix.SIGIO, unix.SIGPWR, unix.SIGCHLD}
	for s := 34; s < 64; s++ {
		l = append(l, syscall.Signal(s))
	}
	return l
}()

func (t *tier) startSignals() {
	t.sig.info = map[int][]byte{}
	t.sig.ch = make(chan os.Signal, 16)
	signal.Notify(t.sig.ch, fromHost...)
	go func() {
		for s := range t.sig.ch {
			sig := int(s.(syscall.Signal))
			if sig == int(unix.SIGCHLD) {
				continue // kbox's own children; the guest has none
			}
			t.send(nil, sig, makeInfo(sig, siUser, 0, 0))
		}
	}()
}

func (t *tier) stopSignals() {
	signal.Stop(t.sig.ch)
	close(t.sig.ch)
}

// makeInfo is a siginfo for a signal sent by a process.
func makeInfo(sig, code, pid, uid int) []byte {
	b := make([]byte, 128)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(sig))
	le.PutUint32(b[8:], uint32(int32(code)))
	le.PutUint32(b[16:], uint32(pid))
	le.PutUint32(b[20:], uint32(uid))
	return b
}

// defaultAction of a signal: 'i'gnore, 's'top, 'c'ore or 't'erminate.
func defaultAction(sig int) byte {
	switch sig {
	case int(unix.SIGCHLD), int(unix.SIGCONT), int(unix.SIGURG), int(unix.SIGWINCH):
		return 'i'
	case int(unix.SIGSTOP), int(unix.SIGTSTP), int(unix.SIGTTIN), int(unix.SIGTTOU):
		return 's'
	case int(unix.SIGQUIT), int(unix.SIGILL), int(unix.SIGTRAP), int(unix.SIGABRT), int(unix.SIGBUS), int(unix.SIGFPE),
		int(unix.SIGSEGV), int(unix.SIGXCPU), int(unix.SIGXFSZ), int(unix.SIGSYS):
		return 'c'
	}
	return 't'
}

func (t *tier) ignored(sig int) bool {
	a := t.sig.act[sig]
	return a.handler == sigIgn || a.handler == sigDfl && defaultAction(sig) == 'i'
}

// send makes sig pending for thread to (nil: the process) and wakes a
// thread that can take it.
func (t *tier) send(to *thread, sig int, info []byte) {
	switch sig {
	case int(unix.SIGKILL):
		t.finish(Exit{Status: 128 + sig, Signal: sig})
		return
	case int(unix.SIGSTOP):
		unix.Kill(t.pid, unix.SIGSTOP)
		return
	}
	t.sig.mu.Lock()
	if t.ignored(sig) {
		t.sig.mu.Unlock()
		return // discarded when sent, as Linux does
	}
	// A signal already pending is not queued again, and nobody is woken
	// again for it, as in Linux (legacy_queue): the kick that made it
	// pending still brings a thread that can take it into kbox. A kick
	// at every send kept the target of a thread sending in a loop taking
	// kicks instead of running (tests/guest/sigtrap).
	set := &t.sig.pending
	if to != nil {
		set = &to.pending
	}
	if *set&bit(sig) != 0 {
		t.sig.mu.Unlock()
		return
	}
	var wake *thread
	if to != nil {
		t.sig.addPending(&to.pending, sig)
		to.setInfo(sig, info)
		wake = to
	} else {
		t.sig.addPending(&t.sig.pending, sig)
		t.sig.info[sig] = info
	}
	t.sig.mu.Unlock()
	if wake == nil {
		t.each(func(th *thread) {
			if wake == nil && th.blocked(sig) == false {
				wake = th
			}
		})
	}
	if wake != nil {
		wake.poke()
	}
}

func (th *thread) setInfo(sig int, info []byte) {
	if th.info == nil {
		th.info = map[int][]byte{}
	}
	th.info[sig] = info
}

func (th *thread) blocked(sig int) bool {
	tr.sig.mu.Lock()
	defer tr.sig.mu.Unlock()
	return th.mask&bit(sig) != 0
}

// poke wakes th if it waits in kbox (sigsuspend, sigtimedwait) and kicks
// it: in guest code, or blocked in a syscall kbox made for it, it comes
// into kbox and takes the signal.
func (th *thread) poke() {
	select {
	case th.wake <- struct{}{}:
	default:
	}
	th.kick()
}

// deliverable returns the signals th can take now.
func (th *thread) deliverable() uint64 {
	t := tr
	t.sig.mu.Lock()
	defer t.sig.mu.Unlock()
	return (th.pending | t.sig.pending) &^ (th.mask &^ unblockable)
}

// dequeue takes the next signal th can take: synchronous ones first, then
// the lowest number, as Linux does.
func (th *thread) dequeue(set uint64) (int, []byte, bool) {
	t := tr
	t.sig.mu.Lock()
	defer t.sig.mu.Unlock()
	avail := (th.pending | t.sig.pending) & set
	if avail == 0 {
		return 0, nil, false
	}
	sig := 0
	for _, s := range []int{int(unix.SIGSEGV), int(unix.SIGBUS), int(unix.SIGILL), int(unix.SIGTRAP), int(unix.SIGFPE), int(unix.SIGSYS)} {
		if avail&bit(s) != 0 {
			sig = s
			break
		}
	}
	if sig == 0 {
		for s := 1; s <= 64; s++ {
			if avail&bit(s) != 0 {
				sig = s
				break
			}
		}
	}
	var info []byte
	if th.pending&bit(sig) != 0 {
		t.sig.dropPending(&th.pending, sig)
		info = th.info[sig]
	} else {
		t.sig.dropPending(&t.sig.pending, sig)
		info = t.sig.info[sig]
	}
	if info == nil {
		info = makeInfo(sig, siUser, 0, 0)
	}
	return sig, info, true
}

// deliver sets up a handler frame for every signal th can take now (each
// handler's mask then blocks what it blocks), or takes the default action.
func (th *thread) deliver() {
	t := tr
	defer th.fixRestart(nil) // no handler ran: an interrupted syscall restarts
	// Nothing pending, the common case after a syscall: an atomic look.
	// (A signal sent meanwhile kicks the thread: its next trip sees it.)
	if t.sig.npend.Load() == 0 {
		return
	}
	// Pending, maybe blocked: one look under the lock.
	t.sig.mu.Lock()
	none := (th.pending|t.sig.pending)&^(th.mask&^unblockable) == 0
	t.sig.mu.Unlock()
	if none {
		return
	}
	for i := 0; i < 64; i++ {
		t.sig.mu.Lock()
		set := ^(th.mask &^ unblockable)
		t.sig.mu.Unlock()
		sig, info, ok := th.dequeue(set)
		if !ok {
			return
		}
		t.sig.mu.Lock()
		act := t.sig.act[sig]
		t.sig.mu.Unlock()
		switch {
		case act.handler == sigIgn:
			continue
		case act.handler == sigDfl:
			switch defaultAction(sig) {
			case 'i':
				continue
			case 's':
				unix.Kill(t.pid, unix.SIGSTOP)
				continue
			}
			t.finish(Exit{Status: 128 + sig, Signal: sig})
			return
		}
		th.fixRestart(&act)
		if !th.frame(sig, act, info) {
			// No room for the frame: Linux forces SIGSEGV.
			t.finish(Exit{Status: 128 + int(unix.SIGSEGV), Signal: int(unix.SIGSEGV)})
			return
		}
	}
}

// syncSignal takes a synchronous signal raised in guest code (core.c): a
// fault, SIGPIPE or SIGXFSZ. A fault the guest blocks or ignores kills it,
// as Linux's force_sig does.
func (th *thread) syncSignal(sig int) {
	t := tr
	info := append([]byte(nil), th.k.Si[:]...)
	code := int32(binary.LittleEndian.Uint32(info[8:]))
	forced := code > 0 && sig != int(unix.SIGPIPE) && sig != int(unix.SIGXFSZ)
	t.sig.mu.Lock()
	act := t.sig.act[sig]
	if forced && (act.handler == sigIgn || th.mask&bit(sig) != 0) {
		t.sig.act[sig] = kaction{}
		th.mask &^= bit(sig)
	}
	t.sig.mu.Unlock()
	if sig == int(unix.SIGPIPE) || sig == int(unix.SIGXFSZ) {
		t.send(th, sig, info)
		return
	}
	t.sig.mu.Lock()
	t.sig.addPending(&th.pending, sig)
	th.setInfo(sig, info)
	t.sig.mu.Unlock()
}

// Layout of the kernel's rt_sigframe on x86_64.
const (
	frameUC     = 8         // after pretcode
	ucStack     = 16        // uc_stack in ucontext
	ucMcontext  = 40        // uc_mcontext: gregs, fpstate pointer, reserved
	ucFpstate   = 40 + 23*8 // the fpstate pointer
	ucSigmask   = 40 + 256  // uc_sigmask
	frameInfo   = 8 + 304   // siginfo
	frameSize   = 8 + 304 + 128
	ucFPXstate  = 1 // UC_FP_XSTATE
	ucSigcontSS = 2 // UC_SIGCONTEXT_SS
	fpMagic1    = 0x46505853
	fpMagic2    = 0x46505845
	redZone     = 128
	eflagsUser  = 0x40000 | 0x800 | 0x400 | 0x100 | 0x80 | 0x40 | 0x10 | 0x4 | 0x1 | 0x10000
)

// onAltstack reports whether sp is on th's alternate signal stack.
func (th *thread) onAltstack(sp uint64) bool {
	return th.ss.size != 0 && sp > th.ss.sp && sp-th.ss.sp <= th.ss.size
}

// frame builds the signal frame for sig on the guest's stack and points
// the thread at the handler.
func (th *thread) frame(sig int, act kaction, info []byte) bool {
	t := tr
	g := &th.k.Gregs
	if act.flags&saRestorer == 0 {
		return false
	}
	sp := g[regRSP] - redZone
	onstack := false
	if act.flags&saOnstack != 0 && th.ss.size != 0 && th.ss.flags&ssDisable == 0 && !th.onAltstack(g[regRSP]) {
		sp = th.ss.sp + th.ss.size
		onstack = true
	}
	fpsize := uint64(len(th.xsave))
	xs := useXstate()
	if xs {
		fpsize += 4 // FP_XSTATE_MAGIC2
	}
	fp := (sp - fpsize) &^ 63
	sp = ((fp - frameSize) &^ 15) - 8
	fpb := make([]byte, fpsize)
	copy(fpb, th.fpArea())
	le := binary.LittleEndian
	if xs {
		// struct _fpx_sw_bytes in the FXSAVE area's software bytes.
		le.PutUint32(fpb[464:], fpMagic1)
		le.PutUint32(fpb[468:], uint32(fpsize))
		le.PutUint64(fpb[472:], xfeatures())
		le.PutUint32(fpb[480:], uint32(len(th.xsave)))
		le.PutUint32(fpb[len(th.xsave):], fpMagic2)
	}
	f := make([]byte, frameSize)
	le.PutUint64(f[0:], act.restorer)
	uc := f[frameUC:]
	flags := uint64(ucSigcontSS)
	if xs {
		flags |= ucFPXstate
	}
	le.PutUint64(uc[0:], flags)
	le.PutUint64(uc[ucStack:], th.ss.sp)
	ssflags := th.ss.flags
	if th.ss.size == 0 {
		ssflags |= ssDisable
	} else if th.onAltstack(g[regRSP]) {
		ssflags |= ssOnstack
	}
	le.PutUint32(uc[ucStack+8:], uint32(ssflags))
	le.PutUint64(uc[ucStack+16:], th.ss.size)
	for i := 0; i < 23; i++ {
		le.PutUint64(uc[ucMcontext+8*i:], g[i])
	}
	le.PutUint64(uc[ucFpstate:], fp)
	t.sig.mu.Lock()
	old := th.mask
	if th.savedMask != nil {
		old = *th.savedMask // rt_sigsuspend: the handler returns to the mask before it
		th.savedMask = nil
	}
	nm := old | act.mask
	if act.flags&saNodefer == 0 {
		nm |= bit(sig)
	}
	th.mask = nm &^ unblockable
	if act.flags&saResethand != 0 {
		t.sig.act[sig] = kaction{}
	}
	t.sig.mu.Unlock()
	le.PutUint64(uc[ucSigmask:], old)
	copy(f[frameInfo:], info)
	if !inUser(sp, int(fp+fpsize-sp)) || !copyOut(fp, fpb) || !copyOut(sp, f) {
		return false
	}
	if onstack && th.ss.flags&ssFlagBits != 0 {
		th.ss.sp, th.ss.size, th.ss.flags = 0, 0, ssDisable // SS_AUTODISARM
	}
	g[regRSP] = sp
	g[regRIP] = act.handler
	g[regRDI] = uint64(sig)
	g[regRSI] = sp + frameInfo
	g[regRDX] = sp + frameUC
	g[regRAX] = 0
	g[regEFL] &^= 0x400 | 0x100 | 0x40000 // DF, TF, AC
	th.resetFPU()
	return true
}

// sigreturn restores the context the guest's handler was given (its frame
// ends at the stack pointer: the handler's ret took the restorer address).
func (th *thread) sigreturn() {
	g := &th.k.Gregs
	ucAddr := g[regRSP]
	var uc [304]byte
	if readMem(ucAddr, uc[:]) != nil {
		tr.finish(Exit{Status: 128 + int(unix.SIGSEGV), Signal: int(unix.SIGSEGV)})
		return
	}
	le := binary.LittleEndian
	flags := g[regEFL]
	for i := 0; i < 23; i++ {
		g[i] = le.Uint64(uc[ucMcontext+8*i:])
	}
	g[regEFL] = flags&^eflagsUser | g[regEFL]&eflagsUser
	if fp := le.Uint64(uc[ucFpstate:]); fp != 0 {
		b := make([]byte, len(th.xsave))
		if readMem(fp, b) != nil {
			tr.finish(Exit{Status: 128 + int(unix.SIGSEGV), Signal: int(unix.SIGSEGV)})
			return
		}
		sanitizeXsave(b)
		copy(th.fpArea(), b)
	} else {
		th.resetFPU()
	}
	tr.sig.mu.Lock()
	th.mask = le.Uint64(uc[ucSigmask:]) &^ unblockable
	tr.sig.mu.Unlock()
	// restore_altstack: as sigaltstack(2) would, errors ignored.
	ssSp, ssFlags, ssSize := le.Uint64(uc[ucStack:]), int32(le.Uint32(uc[ucStack+8:])), le.Uint64(uc[ucStack+16:])
	if !th.onAltstack(g[regRSP]) {
		if ssFlags&ssDisable != 0 {
			th.ss.sp, th.ss.size, th.ss.flags = 0, 0, ssDisable
		} else if ssSize >= minSigStk {
			th.ss.sp, th.ss.size, th.ss.flags = ssSp, ssSize, ssFlags&ssFlagBits
		}
	}
}

// sanitizeXsave makes an FP state from guest memory safe to load: the
// standard format, only features kbox has, reserved bits clear (what the
// kernel checks at sigreturn).
func sanitizeXsave(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[24:], le.Uint32(b[24:])&0xffff) // MXCSR: no reserved bits
	if len(b) >= 576 {
		le.PutUint64(b[512:], le.Uint64(b[512:])&xfeatures())
		for i := 520; i < 576; i++ {
			b[i] = 0
		}
	}
}

// Signal syscalls (rt_sigaction, rt_sigprocmask, sigaltstack,
// rt_sigpending, rt_sigsuspend, rt_sigtimedwait, rt_sigreturn and the
// kill family), registered in transport.go.

func sysRtSigaction(th *thread, a *[6]uint64) bool {
	t := tr
	sig := int(int32(a[0]))
	if a[3] != 8 || sig < 1 || sig > 64 {
		th.fail(unix.EINVAL)
		return true
	}
	var nb [32]byte
	var na kaction
	if a[1] != 0 {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			th.fail(unix.EINVAL)
			return true
		}
		if readMem(a[1], nb[:]) != nil {
			th.fail(unix.EFAULT)
			return true
		}
		le := binary.LittleEndian
		na = kaction{le.Uint64(nb[0:]), le.Uint64(nb[8:]), le.Uint64(nb[16:]), le.Uint64(nb[24:]) &^ unblockable}
	}
	var all []*thread
	t.each(func(o *thread) { all = append(all, o) })
	t.sig.mu.Lock()
	old := t.sig.act[sig]
	if a[1] != 0 {
		t.sig.act[sig] = na
		if t.ignored(sig) {
			// A pending signal now ignored is discarded.
			t.sig.dropPending(&t.sig.pending, sig)
			for _, o := range all {
				t.sig.dropPending(&o.pending, sig)
			}
		}
	}
	t.sig.mu.Unlock()
	if a[2] != 0 {
		var ob [32]byte
		le := binary.LittleEndian
		le.PutUint64(ob[0:], old.handler)
		le.PutUint64(ob[8:], old.flags)
		le.PutUint64(ob[16:], old.restorer)
		le.PutUint64(ob[24:], old.mask)
		if writeMem(&t.mem, a[2], ob[:]) != nil {
			th.fail(unix.EFAULT)
			return true
		}
	}
	th.ret(0)
	return true
}

func sysRtSigprocmask(th *thread, a *[6]uint64) bool {
	t := tr
	if a[3] != 8 {
		th.fail(unix.EINVAL)
		return true
	}
	var set uint64
	if a[1] != 0 {
		v, err := readU64(a[1])
		if err != nil {
			th.fail(unix.EFAULT)
			return true
		}
		set = v
	}
	t.sig.mu.Lock()
	old := th.mask
	if a[1] != 0 {
		switch a[0] {
		case unix.SIG_BLOCK:
			th.mask |= set
		case unix.SIG_UNBLOCK:
			th.mask &^= set
		case unix.SIG_SETMASK:
			th.mask = set
		default:
			t.sig.mu.Unlock()
			th.fail(unix.EINVAL)
			return true
		}
		th.mask &^= unblockable
	}
	t.sig.mu.Unlock()
	if a[2] != 0 && writeU64(&t.mem, a[2], old) != nil {
		th.fail(unix.EFAULT)
		return true
	}
	th.ret(0)
	return true
}

func sysSigaltstack(th *thread, a *[6]uint64) bool {
	t := tr
	sp := th.k.Gregs[regRSP]
	on := th.onAltstack(sp)
	var ob [24]byte
	le := binary.LittleEndian
	le.PutUint64(ob[0:], th.ss.sp)
	fl := th.ss.flags
	if th.ss.size == 0 {
		fl |= ssDisable
	} else if on {
		fl |= ssOnstack
	}
	le.PutUint32(ob[8:], uint32(fl))
	le.PutUint64(ob[16:], th.ss.size)
	if a[0] != 0 {
		var nb [24]byte
		if readMem(a[0], nb[:]) != nil {
			th.fail(unix.EFAULT)
			return true
		}
		if on {
			th.fail(unix.EPERM)
			return true
		}
		nsp, nfl, nsz := le.Uint64(nb[0:]), int32(le.Uint32(nb[8:])), le.Uint64(nb[16:])
		mode := nfl &^ ssFlagBits
		switch {
		case mode == ssDisable:
			th.ss.sp, th.ss.size, th.ss.flags = 0, 0, ssDisable
		case mode == 0 || mode == ssOnstack:
			if nsz < minSigStk {
				th.fail(unix.ENOMEM)
				return true
			}
			th.ss.sp, th.ss.size, th.ss.flags = nsp, nsz, nfl&ssFlagBits
		default:
			th.fail(unix.EINVAL)
			return true
		}
	}
	if a[1] != 0 && writeMem(&t.mem, a[1], ob[:]) != nil {
		th.fail(unix.EFAULT)
		return true
	}
	th.ret(0)
	return true
}

func sysRtSigpending(th *thread, a *[6]uint64) bool {
	t := tr
	if a[1] > 8 {
		th.fail(unix.EINVAL)
		return true
	}
	t.sig.mu.Lock()
	p := (th.pending | t.sig.pending) & th.mask
	t.sig.mu.Unlock()
	if writeU64(&t.mem, a[0], p) != nil {
		th.fail(unix.EFAULT)
		return true
	}
	th.ret(0)
	return true
}

func sysRtSigsuspend(th *thread, a *[6]uint64) bool {
	t := tr
	if a[1] != 8 {
		th.fail(unix.EINVAL)
		return true
	}
	m, err := readU64(a[0])
	if err != nil {
		th.fail(unix.EFAULT)
		return true
	}
	t.sig.mu.Lock()
	saved := th.mask
	th.savedMask = &saved
	th.mask = m &^ unblockable
	t.sig.mu.Unlock()
	for th.deliverable() == 0 && !th.die.Load() && !t.ended.Load() {
		<-th.wake
	}
	th.fail(unix.EINTR)
	// deliver (serve) builds the frame with the saved mask; if the
	// signal was ignored after all, the mask is put back here.
	defer func() {
		t.sig.mu.Lock()
		if th.savedMask != nil {
			th.mask, th.savedMask = saved, nil
		}
		t.sig.mu.Unlock()
	}()
	th.deliver()
	return true
}

func sysRtSigtimedwait(th *thread, a *[6]uint64) bool {
	t := tr
	if a[3] != 8 {
		th.fail(unix.EINVAL)
		return true
	}
	set, err := readU64(a[0])
	if err != nil {
		th.fail(unix.EFAULT)
		return true
	}
	set &^= unblockable
	var timeout <-chan time.Time
	if a[2] != 0 {
		var ts [16]byte
		if readMem(a[2], ts[:]) != nil {
			th.fail(unix.EFAULT)
			return true
		}
		le := binary.LittleEndian
		sec, nsec := int64(le.Uint64(ts[0:])), int64(le.Uint64(ts[8:]))
		if sec < 0 || nsec < 0 || nsec >= 1e9 {
			th.fail(unix.EINVAL)
			return true
		}
		timer := time.NewTimer(time.Duration(sec)*time.Second + time.Duration(nsec))
		defer timer.Stop()
		timeout = timer.C
	}
	for !th.die.Load() && !t.ended.Load() {
		if sig, info, ok := th.dequeue(set); ok {
			if a[1] != 0 && writeMem(&t.mem, a[1], info) != nil {
				th.fail(unix.EFAULT)
				return true
			}
			th.ret(int64(sig))
			return true
		}
		if th.deliverable()&^set != 0 {
			th.fail(unix.EINTR) // another signal's handler runs
			return true
		}
		select {
		case <-th.wake:
		case <-timeout:
			th.fail(unix.EAGAIN)
			return true
		}
	}
	th.fail(unix.EINTR)
	return true
}

func sysRtSigreturn(th *thread, a *[6]uint64) bool {
	th.sigreturn()
	return true
}
