package rewrite

// A64 instruction encoders for the aarch64 rewrite tier: only the few
// instructions the site patch, the veneers and the stubs use. Every
// encoder checks its operands and returns an error instead of emitting a
// word that would mean something else; tests decode every word with
// golang.org/x/arch/arm64/arm64asm and compare the fields.

import (
	"errors"
	"fmt"
)

// Arm64SVC0 is `svc #0`, the Linux system call instruction.
const Arm64SVC0 uint32 = 0xd4000001

// Arm64BRange is the reach of B imm26: a target in
// [from-Arm64BRange, from+Arm64BRange-4] is reachable.
const Arm64BRange = 1 << 27

// ErrArm64Range is returned when a branch or literal target is out of the
// instruction's reach.
var ErrArm64Range = errors.New("rewrite/arm64: target out of range")

// ErrArm64Align is returned for an instruction or literal address that is
// not aligned as A64 requires.
var ErrArm64Align = errors.New("rewrite/arm64: misaligned address")

// A64 general registers by number; 31 is SP or XZR depending on the
// instruction.
const (
	arm64X0  = 0
	arm64X16 = 16
	arm64X17 = 17
	arm64X30 = 30
	arm64SP  = 31
)

// Arm64B encodes `B to` placed at from.
func Arm64B(from, to uint64) (uint32, error) {
	if from%4 != 0 || to%4 != 0 {
		return 0, fmt.Errorf("%w: b from %#x to %#x", ErrArm64Align, from, to)
	}
	off := int64(to - from)
	if !Arm64BReaches(from, to) {
		return 0, fmt.Errorf("%w: b from %#x to %#x (%d bytes)", ErrArm64Range, from, to, off)
	}
	return 0x14000000 | uint32(off>>2)&0x03ffffff, nil
}

// Arm64BReaches reports whether a B at from can reach to (both aligned).
func Arm64BReaches(from, to uint64) bool {
	off := int64(to - from)
	return off >= -Arm64BRange && off <= Arm64BRange-4
}

// Arm64BTarget decodes a B word placed at from and returns its target, or
// false if w is not a B.
func Arm64BTarget(from uint64, w uint32) (uint64, bool) {
	if w&0xfc000000 != 0x14000000 {
		return 0, false
	}
	imm := int64(int32(w<<6) >> 6) // sign-extend imm26
	return from + uint64(imm*4), true
}

// arm64LDRLit encodes `LDR Xt, label` (64-bit literal load) at from.
func arm64LDRLit(t int, from, lit uint64) (uint32, error) {
	if from%4 != 0 || lit%4 != 0 {
		return 0, fmt.Errorf("%w: ldr literal at %#x of %#x", ErrArm64Align, from, lit)
	}
	off := int64(lit - from)
	if off < -(1<<20) || off > (1<<20)-4 {
		return 0, fmt.Errorf("%w: ldr literal at %#x of %#x", ErrArm64Range, from, lit)
	}
	return 0x58000000 | (uint32(off>>2)&0x7ffff)<<5 | uint32(t), nil
}

// arm64CBNZ encodes `CBNZ Xt, to` at from.
func arm64CBNZ(t int, from, to uint64) (uint32, error) {
	off := int64(to - from)
	if from%4 != 0 || to%4 != 0 {
		return 0, ErrArm64Align
	}
	if off < -(1<<20) || off > (1<<20)-4 {
		return 0, ErrArm64Range
	}
	return 0xb5000000 | (uint32(off>>2)&0x7ffff)<<5 | uint32(t), nil
}

func arm64BR(n int) uint32  { return 0xd61f0000 | uint32(n)<<5 }
func arm64BLR(n int) uint32 { return 0xd63f0000 | uint32(n)<<5 }

// arm64BRK is `brk #imm`: padding that is never executed.
func arm64BRK(imm uint16) uint32 { return 0xd4200000 | uint32(imm)<<5 }

// Pair addressing modes of STP/LDP.
const (
	arm64Post   = 0x00800000 // [Xn], #imm
	arm64Offset = 0x01000000 // [Xn, #imm]
	arm64Pre    = 0x01800000 // [Xn, #imm]!
)

// arm64Pair encodes STP/LDP of 64-bit X registers (q false: imm scaled by
// 8, -512..504) or 128-bit Q registers (q true: scaled by 16,
// -1024..1008).
func arm64Pair(load, q bool, mode uint32, t1, t2, n int, imm int) uint32 {
	scale := 8
	base := uint32(0xa8000000)
	if q {
		scale = 16
		base = 0xac000000
	}
	if imm%scale != 0 || imm/scale < -64 || imm/scale > 63 {
		panic(fmt.Sprintf("rewrite/arm64: pair offset %d out of range", imm)) // a bug in this package, never input
	}
	w := base | mode | (uint32(imm/scale)&0x7f)<<15 | uint32(t2)<<10 | uint32(n)<<5 | uint32(t1)
	if load {
		w |= 1 << 22
	}
	return w
}

// arm64LdrStrX encodes `STR/LDR Xt, [Xn, #imm]` (unsigned offset, scaled
// by 8, 0..32760).
func arm64LdrStrX(load bool, t, n int, imm int) uint32 {
	if imm%8 != 0 || imm < 0 || imm/8 > 4095 {
		panic(fmt.Sprintf("rewrite/arm64: str/ldr offset %d out of range", imm))
	}
	w := uint32(0xf9000000) | uint32(imm/8)<<10 | uint32(n)<<5 | uint32(t)
	if load {
		w |= 1 << 22
	}
	return w
}

// arm64AddSubImm encodes `ADD/SUB Xd|SP, Xn|SP, #imm` (imm 0..4095).
func arm64AddSubImm(sub bool, d, n int, imm int) uint32 {
	if imm < 0 || imm > 4095 {
		panic(fmt.Sprintf("rewrite/arm64: add/sub immediate %d out of range", imm))
	}
	w := uint32(0x91000000) | uint32(imm)<<10 | uint32(n)<<5 | uint32(d)
	if sub {
		w |= 1 << 30
	}
	return w
}

// System registers the stub saves, as op0:op1:CRn:CRm:op2 packed the way
// MRS/MSR carry them (bits 19..5).
const (
	arm64NZCV = 3<<14 | 3<<11 | 4<<7 | 2<<3 | 0
	arm64FPCR = 3<<14 | 3<<11 | 4<<7 | 4<<3 | 0
	arm64FPSR = 3<<14 | 3<<11 | 4<<7 | 4<<3 | 1
)

// arm64MRS encodes `MRS Xt, sysreg`; arm64MSR `MSR sysreg, Xt`.
func arm64MRS(t int, sysreg uint32) uint32 {
	return 0xd5200000 | (sysreg&0xffff)<<5 | uint32(t)
}

func arm64MSR(sysreg uint32, t int) uint32 {
	return 0xd5000000 | (sysreg&0xffff)<<5 | uint32(t)
}
