package rewrite

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Run a patched site for real: on arm64 (here: the arm64 build under
// qemu-aarch64-static, make test-arm64), a routine in a pool sets every
// register to a known value, makes a call at an `svc #0` site that was
// patched before it ever ran, and stores every register afterwards; the
// dispatch entry is machine code too. Nothing here is the real tier: no
// seccomp, no Go dispatch, no concurrent patching.

func arm64MovZ(d int, imm uint16) uint32 { return 0xd2800000 | uint32(imm)<<5 | uint32(d) }

const arm64RET = 0xd65f03c0

// arm64ExecData is the routine's memory: a save area for Go's registers,
// the table of the values the routine loads before the site, the entry's
// record, and a stack of its own.
type arm64ExecData struct {
	mem  []byte
	base uint64
}

const (
	arm64DataSave   = 0    // Go's X28, X29, X30, SP
	arm64DataTable  = 64   // X0..X30 (X28 unused), NZCV at 248, Q0..Q31 at 272
	arm64DataRecord = 1024 // nr, frame X16, frame X17, entry count
	arm64DataSize   = 1 << 16
	arm64DataOut    = arm64DataSize - 1024 // what the routine stores after the site
)

func (d arm64ExecData) u64(off int) uint64 { return binary.LittleEndian.Uint64(d.mem[off:]) }
func (d arm64ExecData) put(off int, v uint64) {
	binary.LittleEndian.PutUint64(d.mem[off:], v)
}

// arm64Routine is the guest code: it returns the site's address too.
func arm64Routine(base uint64, d arm64ExecData) ([]uint32, uint64, error) {
	a := &arm64Asm{base: base}
	const sp = arm64SP
	a.ldrLit(9, d.base+arm64DataSave)
	a.emit(arm64AddSubImm(false, 10, sp, 0)) // mov x10, sp
	a.emit(arm64Pair(false, false, arm64Offset, 28, 29, 9, 0))
	a.emit(arm64Pair(false, false, arm64Offset, 30, 10, 9, 16))
	a.ldrLit(10, d.base+arm64DataSize)
	a.emit(arm64AddSubImm(false, sp, 10, 0)) // mov sp, x10: a stack of our own
	a.ldrLit(30, d.base+arm64DataTable)
	a.emit(arm64LdrStrX(true, 9, 30, 248))
	a.emit(arm64MSR(arm64NZCV, 9))
	for q := 0; q < 32; q += 2 {
		a.emit(arm64Pair(true, true, arm64Offset, q, q+1, 30, 272+16*q))
	}
	for r := 0; r < 28; r += 2 {
		a.emit(arm64Pair(true, false, arm64Offset, r, r+1, 30, 8*r))
	}
	a.emit(arm64LdrStrX(true, 29, 30, 8*29)) // X28 stays Go's g
	a.emit(arm64LdrStrX(true, 30, 30, 8*30))
	site := a.pc()
	a.emit(Arm64SVC0)
	a.emit(arm64AddSubImm(true, sp, sp, 1024))
	for r := 0; r < 30; r += 2 {
		a.emit(arm64Pair(false, false, arm64Offset, r, r+1, sp, 8*r))
	}
	a.emit(arm64LdrStrX(false, 30, sp, 240))
	a.emit(arm64MRS(9, arm64NZCV))
	a.emit(arm64LdrStrX(false, 9, sp, 248))
	a.emit(arm64AddSubImm(false, 9, sp, 1024))
	a.emit(arm64LdrStrX(false, 9, sp, 256))
	for q := 0; q < 32; q += 2 {
		a.emit(arm64Pair(false, true, arm64Offset, q, q+1, sp, 272+16*q))
	}
	a.ldrLit(9, d.base+arm64DataSave)
	a.emit(arm64Pair(true, false, arm64Offset, 28, 29, 9, 0))
	a.emit(arm64Pair(true, false, arm64Offset, 30, 10, 9, 16))
	a.emit(arm64AddSubImm(false, sp, 10, 0))
	a.emit(arm64RET)
	code, err := a.finish()
	return code, site, err
}

// arm64Entry is a dispatch entry: it records X8, X16, X17 from the frame,
// replays getpid (172) and answers anything else with 0x4242, and
// clobbers every register an AAPCS64 function may (and the callee-saved
// ones, but X28, Go's g, which a signal handler needs).
func arm64Entry(base uint64, d arm64ExecData) ([]uint32, error) {
	a := &arm64Asm{base: base}
	a.ldrLit(9, d.base+arm64DataRecord)
	a.emit(arm64LdrStrX(true, 10, 0, 8*8))
	a.emit(arm64LdrStrX(false, 10, 9, 0))
	a.emit(arm64LdrStrX(true, 11, 0, 8*16))
	a.emit(arm64LdrStrX(true, 12, 0, 8*17))
	a.emit(arm64Pair(false, false, arm64Offset, 11, 12, 9, 8))
	a.emit(arm64LdrStrX(true, 11, 9, 24))
	a.emit(arm64AddSubImm(false, 11, 11, 1))
	a.emit(arm64LdrStrX(false, 11, 9, 24))
	a.emit(arm64AddSubImm(true, 11, 10, 172))
	cbnz := len(a.words)
	a.emit(0)
	a.emit(arm64MovZ(13, 1)) // replay
	bToClobber := len(a.words)
	a.emit(0)
	served := a.pc()
	a.emit(arm64MovZ(12, 0x4242))
	a.emit(arm64LdrStrX(false, 12, 0, 0))
	a.emit(arm64MovZ(13, 0))
	clobber := a.pc()
	for q := 0; q < 32; q += 2 {
		a.emit(arm64Pair(true, true, arm64Offset, q, q+1, 9, 64+16*q))
	}
	for r := 1; r <= 27; r++ {
		if r != 13 {
			a.emit(arm64MovZ(r, uint16(0xbad0+r)))
		}
	}
	a.emit(arm64MovZ(29, 0xbad0+29))
	a.emit(arm64MSR(arm64NZCV, 3))
	a.emit(arm64MSR(arm64FPSR, 1))
	a.emit(arm64AddSubImm(false, 0, 13, 0)) // the verdict
	a.emit(arm64RET)
	w, err := arm64CBNZ(11, base+uint64(cbnz)*4, served)
	if err != nil {
		return nil, err
	}
	a.words[cbnz] = w
	if a.words[bToClobber], err = Arm64B(base+uint64(bToClobber)*4, clobber); err != nil {
		return nil, err
	}
	return a.finish()
}

func arm64Write(t *testing.T, p *Arm64Pool, at uint64, code []uint32) {
	t.Helper()
	if err := p.write(at, code); err != nil {
		t.Fatal(err)
	}
}

// arm64MapFar maps a pool more than 128 MiB from addr.
func arm64MapFar(t *testing.T, addr uint64) *Arm64MappedPool {
	t.Helper()
	for _, off := range []uint64{1 << 32, 1 << 33, 1 << 30, 1 << 34} {
		for _, h := range []uint64{addr + off, addr - off} {
			if h > addr && addr > h {
				continue
			}
			if p, err := arm64MapPool(1<<16, []uint64{h &^ (arm64PageSize - 1)}); err == nil {
				return p
			}
		}
	}
	t.Skip("no free address 1 GiB or more from the text")
	return nil
}

func TestArm64ExecPatchedSite(t *testing.T) {
	for _, far := range []bool{false, true} {
		for _, nr := range []uint64{63, 172} {
			t.Run(fmt.Sprintf("far=%v/nr=%d", far, nr), func(t *testing.T) {
				arm64ExecOne(t, far, nr)
			})
		}
	}
}

func arm64ExecOne(t *testing.T, far bool, nr uint64) {
	mem, err := unix.Mmap(-1, 0, arm64DataSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	d := arm64ExecData{mem: mem, base: uint64(uintptr(unsafe.Pointer(&mem[0])))}
	text, err := Arm64MapPool(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer text.Close()
	code, site, err := arm64Routine(text.Base, d)
	if err != nil {
		t.Fatal(err)
	}
	arm64Write(t, text.Arm64Pool, text.Base, code)

	pt := &Arm64Patcher{Text: text.Alias}
	var entryPool *Arm64Pool
	if far {
		stubs := arm64MapFar(t, text.Base)
		defer stubs.Close()
		if Arm64BReaches(site, stubs.Base) {
			t.Fatalf("far pool at %#x in reach of %#x", stubs.Base, site)
		}
		vens, err := Arm64MapPoolNear(text.Base, text.Base+text.Size, 1<<16)
		if err != nil {
			t.Skip(err)
		}
		defer vens.Close()
		vens.Size = 4 * Arm64VeneerSize // too small for a stub: veneers only
		pt.Pools = []*Arm64Pool{stubs.Arm64Pool, vens.Arm64Pool}
		entryPool = stubs.Arm64Pool
	} else {
		near, err := Arm64MapPoolNear(text.Base, text.Base+text.Size, 1<<16)
		if err != nil {
			t.Skip(err)
		}
		defer near.Close()
		pt.Pools = []*Arm64Pool{near.Arm64Pool}
		entryPool = near.Arm64Pool
	}
	// The entry at the end of its pool.
	entryAt := entryPool.Base + entryPool.Size - 1024
	entry, err := arm64Entry(entryAt, d)
	if err != nil {
		t.Fatal(err)
	}
	arm64Write(t, entryPool, entryAt, entry)
	entryPool.Size -= 1024
	pt.Entry = entryAt

	s, err := Arm64CheckSite(text.Rw(), text.Base, site+4, int(nr))
	if err != nil {
		t.Fatal(err)
	}
	pa, err := pt.Patch(s)
	if err != nil {
		t.Fatal(err)
	}
	if (pa.Veneer != 0) != far {
		t.Fatalf("patch %+v, far %v", pa, far)
	}

	// The values before the site.
	for r := 0; r < 31; r++ {
		d.put(arm64DataTable+8*r, 0x0101_0101_0101_0101*uint64(r+1)^0x8000_0000_0000_0000)
	}
	d.put(arm64DataTable+8*8, nr)
	d.put(arm64DataTable+248, 0x6000_0000)
	for i := 0; i < 64; i++ {
		d.put(arm64DataTable+272+8*i, 0xfeed_0000_0000_0000+uint64(i))
	}
	for i := 0; i < 64; i++ { // what the entry clobbers the Q registers with
		d.put(arm64DataRecord+64+8*i, 0xdead_0000_0000_0000+uint64(i))
	}

	fv := &struct{ fn uintptr }{uintptr(text.Base)}
	f := *(*func())(unsafe.Pointer(&fv))
	f()

	if got := d.u64(arm64DataRecord + 24); got != 1 {
		t.Fatalf("the entry ran %d times", got)
	}
	if got := d.u64(arm64DataRecord); got != nr {
		t.Errorf("the entry saw X8 = %d, want %d", got, nr)
	}
	for i, r := range []int{16, 17} {
		if got, want := d.u64(arm64DataRecord+8+8*i), d.u64(arm64DataTable+8*r); got != want {
			t.Errorf("the entry's frame X%d = %#x, want the guest's %#x", r, got, want)
		}
	}
	out := arm64DataOut
	want0 := uint64(0x4242)
	if nr == 172 {
		want0 = uint64(os.Getpid())
	}
	if got := d.u64(out); got != want0 {
		t.Errorf("X0 after the site = %#x, want %#x", got, want0)
	}
	for r := 1; r < 31; r++ {
		want := d.u64(arm64DataTable + 8*r)
		if r == 28 {
			want = d.u64(arm64DataSave)
		}
		if got := d.u64(out + 8*r); got != want {
			t.Errorf("X%d after the site = %#x, want %#x", r, got, want)
		}
	}
	if got := d.u64(out + 248); got != 0x6000_0000 {
		t.Errorf("NZCV after the site = %#x", got)
	}
	if got := d.u64(out + 256); got != d.base+arm64DataSize {
		t.Errorf("SP after the site = %#x, want %#x", got, d.base+arm64DataSize)
	}
	for i := 0; i < 64; i++ {
		if got, want := d.u64(out+272+8*i), d.u64(arm64DataTable+272+8*i); got != want {
			t.Errorf("Q%d (%s half) after the site = %#x, want %#x", i/2, map[int]string{0: "low", 1: "high"}[i%2], got, want)
		}
	}
}
