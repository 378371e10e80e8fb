package elfload

import (
	"debug/elf"
	"encoding/binary"
	"runtime"
)

// A hand-made ELF for the tests: three PT_LOADs one layout unit apart
// (64 KiB, any page size divides it): headers (R), code (RX), data (RW)
// with bss; PT_GNU_STACK, optionally PT_INTERP. The data segment starts
// 0x100 into its page and the file holds 0xAA after its file part, to the
// end of that page: a loader that does not zero the tail of bss shows it.
//
// On x86_64 the code is a real program: it writes the data segment's
// message and exits with 42 plus the first byte of bss (42 when bss is
// zero).

const (
	tUnit    = 0x10000
	tDataOff = 0x100
	tBss     = 3 * tUnit // bss beyond the data page, in pages of its own
)

var tMessage = []byte("hello from a hand-made ELF\n")

type testELF struct {
	typ       elf.Type
	machine   elf.Machine
	base      uint64 // address of the headers' segment (0 for ET_DYN)
	interp    string
	execStack bool
}

func hostTestMachine() elf.Machine {
	if runtime.GOARCH == "arm64" {
		return elf.EM_AARCH64
	}
	return elf.EM_X86_64
}

func defaultTestELF() *testELF {
	return &testELF{typ: elf.ET_DYN, machine: hostTestMachine()}
}

// Phdr indexes in build's output.
const (
	phHeaders = iota
	phCode
	phData
	phStack
	phInterp
)

func (t *testELF) build() []byte {
	le := binary.LittleEndian
	nph := 4
	if t.interp != "" {
		nph++
	}
	codeVaddr := t.base + tUnit
	dataVaddr := t.base + 2*tUnit + tDataOff
	code := x86Code(codeVaddr, dataVaddr, uint64(len(tMessage)))
	if t.machine != elf.EM_X86_64 {
		code = []byte{0x1f, 0x20, 0x03, 0xd5} // aarch64 nop: never run
	}
	b := make([]byte, 3*tUnit)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS], b[elf.EI_DATA], b[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1
	le.PutUint16(b[16:], uint16(t.typ))
	le.PutUint16(b[18:], uint16(t.machine))
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[24:], codeVaddr)
	le.PutUint64(b[32:], 64)
	le.PutUint16(b[52:], 64)
	le.PutUint16(b[54:], 56)
	le.PutUint16(b[56:], uint16(nph))
	hdrEnd := uint64(64 + 56*nph)
	interpOff := hdrEnd
	if t.interp != "" {
		copy(b[interpOff:], t.interp)
		hdrEnd += uint64(len(t.interp)) + 1
	}
	ph := func(i int, typ elf.ProgType, flags elf.ProgFlag, off, vaddr, filesz, memsz, align uint64) {
		h := b[64+56*i:]
		le.PutUint32(h, uint32(typ))
		le.PutUint32(h[4:], uint32(flags))
		le.PutUint64(h[8:], off)
		le.PutUint64(h[16:], vaddr)
		le.PutUint64(h[24:], vaddr)
		le.PutUint64(h[32:], filesz)
		le.PutUint64(h[40:], memsz)
		le.PutUint64(h[48:], align)
	}
	ph(phHeaders, elf.PT_LOAD, elf.PF_R, 0, t.base, hdrEnd, hdrEnd, tUnit)
	copy(b[tUnit:], code)
	ph(phCode, elf.PT_LOAD, elf.PF_R|elf.PF_X, tUnit, codeVaddr, uint64(len(code)), uint64(len(code)), tUnit)
	copy(b[2*tUnit+tDataOff:], tMessage)
	for i := 2*tUnit + tDataOff + len(tMessage); i < len(b); i++ {
		b[i] = 0xAA
	}
	ph(phData, elf.PT_LOAD, elf.PF_R|elf.PF_W, 2*tUnit+tDataOff, dataVaddr, uint64(len(tMessage)), uint64(len(tMessage))+tBss, tUnit)
	stackFlags := elf.PF_R | elf.PF_W
	if t.execStack {
		stackFlags |= elf.PF_X
	}
	ph(phStack, elf.PT_GNU_STACK, stackFlags, 0, 0, 0, 0, 16)
	if t.interp != "" {
		ph(phInterp, elf.PT_INTERP, elf.PF_R, interpOff, t.base+interpOff, uint64(len(t.interp))+1, uint64(len(t.interp))+1, 1)
	}
	return b
}

// x86Code: write(1, msg, n); exit_group(42 + *(msg+n)), position-independent.
func x86Code(at, msg, n uint64) []byte {
	rel := func(target, next uint64) []byte {
		return binary.LittleEndian.AppendUint32(nil, uint32(int32(int64(target-at)-int64(next))))
	}
	c := []byte{0xb8, 1, 0, 0, 0}                      // mov eax, 1 (write)
	c = append(c, 0xbf, 1, 0, 0, 0)                    // mov edi, 1
	c = append(c, 0x48, 0x8d, 0x35)                    // lea rsi, [rip+msg]
	c = append(c, rel(msg, 17)...)                     //
	c = append(c, 0xba)                                // mov edx, n
	c = binary.LittleEndian.AppendUint32(c, uint32(n)) //
	c = append(c, 0x0f, 0x05)                          // syscall
	c = append(c, 0x0f, 0xb6, 0x3d)                    // movzx edi, byte [rip+msg+n]
	c = append(c, rel(msg+n, 31)...)                   //
	c = append(c, 0x83, 0xc7, 42)                      // add edi, 42
	c = append(c, 0xb8, 231, 0, 0, 0)                  // mov eax, 231 (exit_group)
	c = append(c, 0x0f, 0x05)                          // syscall
	return c
}

// setPhdr changes field (a byte offset in a program header) of header i.
func setPhdr(b []byte, i, field int, v uint64) []byte {
	c := append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(c[64+56*i+field:], v)
	return c
}

// Program header field offsets.
const (
	phOff    = 8
	phVaddr  = 16
	phFilesz = 32
	phMemsz  = 40
	phAlign  = 48
)
