//go:build linux && amd64 && cgo

package trap

/*
#cgo CFLAGS: -fno-stack-protector -O2
#include <stdlib.h>
#include "core.h"
*/
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// fdTableSlots is the fd table early.c grows before the Go runtime's
// threads exist: twice the guest's fds (both arrays' lengths must be
// non-negative).
const fdTableSlots = C.KBOX_FD_TABLE

var (
	_ [fdTableSlots - 2*guestFDs]struct{}
	_ [2*guestFDs - fdTableSlots]struct{}
)

// ktState mirrors struct kbox_thread up to its XSAVE area (core.h);
// checkLayout compares the two.
type ktState struct {
	Gregs                                                      [23]uint64
	FSKbox, FSGuest, KStack                                    uint64
	Event, Nr, Signo, Action, InKbox, Tid, Slot, InstallFilter int32
	Kicked, _                                                  int32
	Filter                                                     uintptr
	Jmp                                                        [5]uintptr
	Si                                                         [128]byte
}

// ucontext gregs indices (glibc's REG_*), the syscall ABI's registers.
const (
	regR8  = 0
	regR9  = 1
	regR10 = 2
	regR11 = 3
	regRDI = 8
	regRSI = 9
	regRDX = 12
	regRAX = 13
	regRCX = 14
	regRSP = 15
	regRIP = 16
	regEFL = 17
)

// kickSig is the signal that kicks a guest thread into kbox (core.h).
const kickSig = unix.Signal(C.KT_KICK_SIG)

const (
	evSyscall = C.KT_SYSCALL
	evKick    = C.KT_KICK
	evSignal  = C.KT_SIGNAL
	evPatched = C.KT_PATCHED
	actResume = C.KT_RESUME
	actExit   = C.KT_EXIT
)

func checkLayout() bool {
	var c C.struct_kbox_thread
	var g ktState
	return unsafe.Offsetof(c.fs_kbox) == unsafe.Offsetof(g.FSKbox) &&
		unsafe.Offsetof(c.event) == unsafe.Offsetof(g.Event) &&
		unsafe.Offsetof(c.install_filter) == unsafe.Offsetof(g.InstallFilter) &&
		unsafe.Offsetof(c.kicked) == unsafe.Offsetof(g.Kicked) &&
		unsafe.Offsetof(c.filter) == unsafe.Offsetof(g.Filter) &&
		unsafe.Offsetof(c.si) == unsafe.Offsetof(g.Si) &&
		unsafe.Offsetof(c.tid) == ktOffTid
}

// core is the C core's per-thread memory.
type core struct {
	c     *C.struct_kbox_thread
	k     *ktState
	xsave []byte
}

var xsaveSize int

func initCore() error {
	if !checkLayout() {
		return errLayout
	}
	if r := C.kbox_trap_init(); r != 0 {
		return unix.Errno(-r)
	}
	xsaveSize = int(C.kbox_trap_xsave_size())
	return nil
}

// newCore prepares slot's memory for a new thread.
func newCore(slot int) (core, bool) {
	c := C.kbox_trap_thread(C.int(slot))
	if c == nil {
		return core{}, false
	}
	return core{c: c, k: (*ktState)(unsafe.Pointer(c)),
		xsave: unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(c), C.KT_OFF_XSAVE)), xsaveSize)}, true
}

func slotFree(slot int) bool { return C.kbox_trap_slot_free(C.int(slot)) != 0 }

func maxSlots() int { return int(C.kbox_trap_slots()) }

func (c core) resetFPU() { C.kbox_trap_reset_fpu(c.c) }

// fpArea returns the thread's XSAVE area holding the guest's FP state: a
// trip that moved the vector registers by hand (fpstate.c) writes them
// into it first. For a thread in kbox mode; what Go writes into the area
// is what the thread resumes with.
func (c core) fpArea() []byte {
	C.kbox_trap_fp_sync(c.c)
	return c.xsave
}

// native makes syscall nr on this guest thread in kbox mode, ended by a
// kick (core.c's kbox_trap_native): ERESTARTSYS when it was waiting,
// ERESTARTNOINTR when the kick came before it was made.
func (c core) native(nr int, a *[6]uint64) (uint64, unix.Errno) {
	r := int64(C.kbox_trap_native(c.c, C.long(nr), C.long(a[0]), C.long(a[1]), C.long(a[2]), C.long(a[3]), C.long(a[4]), C.long(a[5])))
	if r < 0 && r > -4096 {
		return uint64(r), unix.Errno(-r)
	}
	return uint64(r), 0
}

// start creates the thread (a pthread); it runs kboxTrapWarm, then guest
// code from c's registers. filter, for the first thread, is installed on
// it (later threads inherit it from the thread that creates them).
func (c core) start(filter []bpf.RawInstruction) error {
	if filter != nil {
		// C memory: the thread reads it after this returns.
		n := len(filter)
		ins := (*C.struct_sock_filter)(C.malloc(C.size_t(n) * C.sizeof_struct_sock_filter))
		prog := (*C.struct_sock_fprog)(C.malloc(C.sizeof_struct_sock_fprog))
		for i, f := range filter {
			p := (*C.struct_sock_filter)(unsafe.Add(unsafe.Pointer(ins), uintptr(i)*C.sizeof_struct_sock_filter))
			p.code, p.jt, p.jf, p.k = C.__u16(f.Op), C.__u8(f.Jt), C.__u8(f.Jf), C.__u32(f.K)
		}
		prog.len, prog.filter = C.ushort(n), ins
		c.c.filter = prog
		c.c.install_filter = 1
	}
	if r := C.kbox_trap_start(c.c); r != 0 {
		return unix.Errno(r)
	}
	return nil
}

// rwEntry is the address patched sites' stubs jump to (core.c).
func rwEntry() uint64 { return uint64(C.kbox_rw_entry_addr()) }

func fsgsbase() bool { return C.kbox_trap_fsgsbase() != 0 }

func useXstate() bool { return C.kbox_trap_use_xsave() != 0 }

func xfeatures() uint64 { return uint64(C.kbox_trap_xcr0()) }

// Die ends kbox with sig, as the guest died of it.
func Die(sig int) { C.kbox_trap_die(C.int(sig)) }

//export kboxTrapWarm
func kboxTrapWarm(c *C.struct_kbox_thread) {
	warm(int(c.slot))
}

//export kboxTrapServe
func kboxTrapServe(c *C.struct_kbox_thread) {
	// A thread Go must start while serving (a new M) is then made by
	// Go's template thread, not cloned from this one: this thread has
	// the guest's filter.
	runtime.LockOSThread()
	serve(int(c.slot))
	runtime.UnlockOSThread()
}

//export kboxTrapFailed
func kboxTrapFailed(c *C.struct_kbox_thread, en C.int) {
	startFailed(int(c.slot), unix.Errno(en))
}

//export kboxTrapGone
func kboxTrapGone(c *C.struct_kbox_thread) {
	gone(int(c.slot))
}

// clockPins pins the engine's counters hint.c reads (hintClocks): a
// package variable, never collected, as the engine lives as long as
// the process.
var clockPins runtime.Pinner

// struct kbox_xhint holds what dispatch.XattrHint does.
var (
	_ [C.KT_HINT_PATH - 1 - dispatch.HintPathMax]struct{}
	_ [dispatch.HintPathMax - (C.KT_HINT_PATH - 1)]struct{}
)

const _ = uint(len(C.struct_kbox_xhint{}.ans)-len(dispatch.XattrHint{}.Ans)) +
	uint(len(dispatch.XattrHint{}.Ans)-len(C.struct_kbox_xhint{}.ans))

// hintClocks gives hint.c the engine's counters a prepared answer holds
// for.
func (t *tier) hintClocks() {
	gen, wb := t.eng.HintClocks()
	clockPins.Pin(gen)
	clockPins.Pin(wb)
	C.kbox_hint_clocks((*C.uint64_t)(unsafe.Pointer(gen)), (*C.uint64_t)(unsafe.Pointer(wb)))
}

// ArmXattr is dispatch.Hints's, for the thread's patched sites: it
// fills the thread's struct kbox_xhint (core.h), which hint.c reads on
// the same thread.
func (th *thread) ArmXattr(h *dispatch.XattrHint) bool {
	x := th.c.xhint
	if x == nil {
		return false
	}
	used := x.on != 0 && x.used != 0
	x.on, x.used = 0, 0
	if h == nil || len(h.Path) >= C.KT_HINT_PATH {
		return used
	}
	x.gen, x.wb = C.uint64_t(h.Gen), C.uint64_t(h.WB)
	for i := range h.Ans {
		for j := range h.Ans[i] {
			x.ans[i][j] = C.int32_t(-int32(h.Ans[i][j]))
		}
	}
	path := unsafe.Slice((*byte)(unsafe.Pointer(&x.path[0])), C.KT_HINT_PATH)
	path[copy(path, h.Path)] = 0
	x.len = C.uint32_t(len(h.Path))
	x.on = 1
	return used
}

// Ahead is dispatch.Hints's: hint.c answers at patched sites only (a
// trapped site's calls are Go's, which counts them to patch it).
func (th *thread) Ahead() bool { return th.k.Event == evPatched }
