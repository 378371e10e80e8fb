package rewrite

import "encoding/binary"

// A fast length decoder for the site checks' sweeps (checkSite), which
// decode up to 1.3 KB around every site checked: x86asm decodes an
// instruction in about 130 ns, walking its whole decoder table, where
// the sweeps need only each instruction's length and, for a direct
// branch, its target. fastLen knows the common instructions of
// compiled code, without legacy prefixes other than one 66 and with at
// most one REX right before the opcode; for anything else (VEX, EVEX, x87,
// other prefixes, the 0F 38 and 0F 3A maps, rare or invalid opcodes,
// an instruction cut short by the end of the bytes) it says so and the
// sweep asks x86asm. TestX86FastLen checks it against x86asm on every
// opcode, prefix, ModRM and SIB base it claims.

// Operand layouts of the opcodes fastLen knows: the low bits of an entry
// of x86One or x86Two.
const (
	xUnknown   = iota // not in the fast subset: x86asm decides
	xNone             // the opcode alone
	xModRM            // ModRM, then SIB and displacement as it says
	xModRMImm8        // and an 8-bit immediate
	xModRMImmZ        // and a 16-bit immediate with 66 (no REX.W), else 32
	xImm8             // an 8-bit immediate
	xImm16            // a 16-bit immediate
	xImmZ             // a 16-bit immediate with 66 (no REX.W), else 32
	xImmV             // B8-BF: 64 bits with REX.W, 16 with 66, else 32
	xRel8             // a direct branch with an 8-bit displacement
	xRel32            // a direct branch with a 32-bit displacement (not with 66)
	xGrp3             // F6/F7: ModRM, an immediate for /0 (test); /1 is not valid
)

// Flags of an entry beside its layout.
const (
	xReg0     = 1 << 4 // valid only with ModRM.reg 0 (C6, C7, 8F, 0F 1F)
	xReg01    = 1 << 5 // valid only with ModRM.reg 0 or 1 (FE)
	xMemOnly  = 1 << 6 // ModRM.mod 3 is not valid (lea)
	xGrp5Rule = 1 << 7 // FF: /7 is not valid, /3 and /5 need memory
	xNoReg6   = 1 << 8 // ModRM.reg 6 is not valid (the shifts' group)
	xNoRexW   = 1 << 9 // not with REX.W (0F 1F: x86asm refuses it)
	xLayout   = 0xF
)

// x86One and x86Two are the layouts of the one-byte opcodes and of those
// after 0F.
var x86One, x86Two [256]uint16

func init() {
	set := func(t *[256]uint16, v uint16, ops ...int) {
		for _, o := range ops {
			t[o] = v
		}
	}
	span := func(t *[256]uint16, v uint16, lo, hi int) {
		for o := lo; o <= hi; o++ {
			t[o] = v
		}
	}
	o := &x86One
	for base := 0x00; base <= 0x38; base += 8 { // add, or, adc, sbb, and, sub, xor, cmp
		span(o, xModRM, base, base+3)
		o[base+4] = xImm8
		o[base+5] = xImmZ
	}
	span(o, xNone, 0x50, 0x5F) // push, pop
	o[0x63] = xModRM           // movsxd
	o[0x68] = xImmZ
	o[0x69] = xModRMImmZ
	o[0x6A] = xImm8
	o[0x6B] = xModRMImm8
	span(o, xRel8, 0x70, 0x7F)
	set(o, xModRMImm8, 0x80, 0x83)
	set(o, xModRMImm8|xNoReg6, 0xC0, 0xC1) // shifts
	o[0x81] = xModRMImmZ
	span(o, xModRM, 0x84, 0x8B) // test, xchg, mov
	o[0x8D] = xModRM | xMemOnly // lea
	o[0x8F] = xModRM | xReg0    // pop r/m
	span(o, xNone, 0x90, 0x99)  // nop, xchg, cwde, cdq
	set(o, xNone, 0x9C, 0x9D, 0xA4, 0xA5, 0xA6, 0xA7, 0xAA, 0xAB, 0xAC, 0xAD, 0xAE, 0xAF)
	o[0xA8] = xImm8
	o[0xA9] = xImmZ
	span(o, xImm8, 0xB0, 0xB7)
	span(o, xImmV, 0xB8, 0xBF)
	o[0xC2] = xImm16
	set(o, xNone, 0xC3, 0xC9, 0xCC, 0xF4, 0xF5, 0xF8, 0xF9, 0xFC, 0xFD)
	o[0xC6] = xModRMImm8 | xReg0
	o[0xC7] = xModRMImmZ | xReg0
	span(o, xModRM|xNoReg6, 0xD0, 0xD3) // shifts
	o[0xCD] = xImm8
	set(o, xRel8, 0xE0, 0xE1, 0xE2, 0xE3, 0xEB) // loop*, jrcxz, jmp
	set(o, xRel32, 0xE8, 0xE9)
	set(o, xGrp3, 0xF6, 0xF7)
	o[0xFE] = xModRM | xReg01
	o[0xFF] = xModRM | xGrp5Rule

	t := &x86Two
	set(t, xNone, 0x05, 0x0B, 0x31, 0xA2) // syscall, ud2, rdtsc, cpuid
	t[0x1F] = xModRM | xReg0 | xNoRexW    // nop r/m
	span(t, xModRM, 0x40, 0x4F)           // cmovcc
	span(t, xRel32, 0x80, 0x8F)           // jcc
	span(t, xModRM, 0x90, 0x9F)           // setcc
	set(t, xModRM, 0xA3, 0xA5, 0xAB, 0xAD, 0xAF, 0xB0, 0xB1, 0xB3, 0xB6, 0xB7, 0xBB, 0xBC, 0xBD, 0xBE, 0xBF, 0xC0, 0xC1)
	set(t, xModRMImm8, 0xA4, 0xAC)
	span(t, xNone, 0xC8, 0xCF) // bswap
	// SSE2 moves and integer operations of string and memory functions.
	set(t, xModRM, 0x10, 0x11, 0x28, 0x29, 0x57, 0x60, 0x61, 0x62, 0x68, 0x69, 0x6A, 0x6E, 0x6F,
		0x74, 0x75, 0x76, 0x7E, 0x7F, 0xD4, 0xDA, 0xDB, 0xDE, 0xDF, 0xEB, 0xEF, 0xF8, 0xF9, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE)
	t[0x70] = xModRMImm8 // pshufd
}

// fastLen decodes the instruction at the start of b when fastLen knows
// it (ok): its length, and for a direct branch (br) its displacement
// from the end of the instruction.
func fastLen(b []byte) (n int, br bool, rel int64, ok bool) {
	i := 0
	opsize := false // 66
	if i < len(b) && b[i] == 0x66 {
		opsize = true
		i++
	}
	rexW := false
	if i < len(b) && b[i]&0xF0 == 0x40 {
		rexW = b[i]&8 != 0
		i++
	}
	if i >= len(b) {
		return 0, false, 0, false
	}
	op := b[i]
	i++
	var kind uint16
	if op == 0x0F {
		if i >= len(b) {
			return 0, false, 0, false
		}
		kind = x86Two[b[i]]
		i++
	} else {
		kind = x86One[op]
	}
	layout := kind & xLayout
	if layout == xUnknown {
		return 0, false, 0, false
	}
	// With 66 the fast subset is the integer and SSE forms whose
	// immediate 66 may shrink; branches and the rest go to x86asm.
	if opsize && (layout == xRel8 || layout == xRel32 || layout == xImm16) {
		return 0, false, 0, false
	}
	immz := 4
	if opsize && !rexW {
		immz = 2
	}
	imm := 0
	switch layout {
	case xModRM, xModRMImm8, xModRMImmZ, xGrp3:
		if i >= len(b) {
			return 0, false, 0, false
		}
		m := b[i]
		mod, reg := m>>6, m>>3&7
		if kind&xReg0 != 0 && reg != 0 || kind&xReg01 != 0 && reg > 1 ||
			kind&xMemOnly != 0 && mod == 3 || kind&xNoReg6 != 0 && reg == 6 ||
			kind&xNoRexW != 0 && rexW || layout == xGrp3 && reg == 1 ||
			kind&xGrp5Rule != 0 && (reg == 7 || (reg == 3 || reg == 5) && mod == 3) {
			return 0, false, 0, false
		}
		i++
		if mod != 3 {
			rm := m & 7
			if rm == 4 { // SIB
				if i >= len(b) {
					return 0, false, 0, false
				}
				if mod == 0 && b[i]&7 == 5 {
					i += 4 // no base: disp32
				}
				i++
			}
			switch {
			case mod == 1:
				i++
			case mod == 2 || mod == 0 && rm == 5: // disp32, or RIP-relative
				i += 4
			}
		}
		switch layout {
		case xModRMImm8:
			imm = 1
		case xModRMImmZ:
			imm = immz
		case xGrp3:
			if reg == 0 {
				imm = 1
				if op == 0xF7 {
					imm = immz
				}
			}
		}
	case xImm8:
		imm = 1
	case xImm16:
		imm = 2
	case xImmZ:
		imm = immz
	case xImmV:
		imm = immz
		if rexW {
			imm = 8
		}
	case xRel8:
		if i+1 > len(b) {
			return 0, false, 0, false
		}
		return i + 1, true, int64(int8(b[i])), true
	case xRel32:
		if i+4 > len(b) {
			return 0, false, 0, false
		}
		return i + 4, true, int64(int32(binary.LittleEndian.Uint32(b[i:]))), true
	}
	n = i + imm
	if n > len(b) {
		return 0, false, 0, false
	}
	return n, false, 0, true
}
