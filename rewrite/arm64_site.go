package rewrite

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/arch/arm64/arm64asm"
)

// ErrArm64NotSite is returned when the reported PC does not follow an
// `svc #0` the tier may patch; the site keeps trapping.
var ErrArm64NotSite = errors.New("rewrite/arm64: not a patchable svc site")

// Arm64Site is a checked site: an `svc #0` the kernel reported.
type Arm64Site struct {
	Addr uint64 // address of the svc (the reported PC - 4)
	// FixedNR is the number a `mov w8|x8, #imm` just before the svc
	// loads, or -1 when the previous instruction is anything else. A hint
	// only: a branch may land on the svc with another X8; the stub serves
	// whatever X8 holds.
	FixedNR int
}

// arm64NeverPatch are calls that take over the thread's registers or
// make a second thread or image: the stub would replay them through the
// site's own svc every time, so patching a site that only makes them
// buys nothing. Numbers are the generic (asm-generic/unistd.h) ones.
var arm64NeverPatch = map[int]string{
	93:  "exit",
	94:  "exit_group",
	139: "rt_sigreturn",
	220: "clone",
	221: "execve",
	281: "execveat",
	435: "clone3",
}

// Arm64CheckSite checks the site of a trapped syscall: code holds guest
// text mapped at base, pc is the PC the kernel reported (the instruction
// after `svc`) and nr the trapped number (X8). It returns the site, or an
// error wrapping ErrArm64NotSite saying why the site must keep trapping.
//
// A64 instructions are all 4 bytes and aligned, so replacing the svc with
// a B changes exactly that instruction: a branch that lands on the svc
// lands on the B (and reaches the stub, which does what the svc did), a
// branch to the next instruction is untouched. Unlike x86_64 there is no
// instruction to fold and no middle of an instruction to land in, so the
// neighbours are not needed for safety. The one before is decoded only to
// tell fixed-number sites (FixedNR) from generic ones.
func Arm64CheckSite(code []byte, base, pc uint64, nr int) (Arm64Site, error) {
	site := pc - 4
	switch {
	case pc%4 != 0:
		return Arm64Site{}, fmt.Errorf("%w: pc %#x is not 4-byte aligned", ErrArm64NotSite, pc)
	case pc < 4 || site < base || site-base > uint64(len(code)) || site-base+4 > uint64(len(code)):
		return Arm64Site{}, fmt.Errorf("%w: pc %#x: site outside the %d bytes at %#x", ErrArm64NotSite, pc, len(code), base)
	}
	off := site - base
	if w := binary.LittleEndian.Uint32(code[off:]); w != Arm64SVC0 {
		return Arm64Site{}, fmt.Errorf("%w: %#08x at %#x is not svc #0", ErrArm64NotSite, w, site)
	}
	s := Arm64Site{Addr: site, FixedNR: -1}
	if off >= 4 {
		s.FixedNR = arm64MovX8(code[off-4 : off])
	}
	if s.FixedNR >= 0 && s.FixedNR != nr {
		// The mov is not what ran before this svc: something branched
		// here. Still a site; the hint is dropped.
		s.FixedNR = -1
	}
	if name, ok := arm64NeverPatch[nr]; ok && s.FixedNR == nr {
		return Arm64Site{}, fmt.Errorf("%w: %#x only makes %s, which always traps", ErrArm64NotSite, site, name)
	}
	return s, nil
}

// arm64MovX8 returns the immediate of `mov w8|x8, #imm` (MOVZ, or ORR
// with the zero register) in b, or -1.
func arm64MovX8(b []byte) int {
	inst, err := arm64asm.Decode(b)
	if err != nil || inst.Op != arm64asm.MOV {
		return -1
	}
	if r, ok := inst.Args[0].(arm64asm.Reg); !ok || (r != arm64asm.W8 && r != arm64asm.X8) {
		return -1
	}
	switch imm := inst.Args[1].(type) {
	case arm64asm.Imm:
		return int(imm.Imm)
	case arm64asm.Imm64:
		if imm.Imm < 1<<16 {
			return int(imm.Imm)
		}
	}
	return -1
}
