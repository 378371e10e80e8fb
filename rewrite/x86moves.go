package rewrite

import (
	"encoding/binary"
	"errors"
)

// Extended sites: `mov $nr,%eax`, then up to X86MaxMoves register moves
// (compilers schedule the argument set-up there: musl's stat and open
// sites, `mov %rdx,%r10`), then `syscall`. The patch is the same 7 bytes
// at the mov; the moves are copied into the stub after the stub's own
// `mov $nr,%eax`, in their order, so the registers the program sees after
// the call are the ones it would have seen. A move is displaced only when
// it is position-independent and touches registers only (no memory, no
// flags): a register-to-register mov (89, 8B, movsxd 63 with REX.W), or a
// mov of an immediate (B8+r, C7 /0), never into %rax (the number) or %rsp.
//
// Safety (docs/tiers.md, Rewrite tier): the patch changes site ... site+6
// only. The instruction starts there are the mov (site) and the first
// move (site+5): a move is at least 2 bytes long, so the next start is at
// site+7 or later, whose bytes are never changed. A thread stopped at
// site+5 (it ran the mov) takes SIGILL on the 06 byte; kbox then carries
// out the moves on its saved registers (X86Move.Apply) and the syscall
// with its own %rax, and resumes it after the syscall. A thread stopped
// at a later move, or at the syscall, runs the original bytes: the
// syscall traps as an unpatched one does.

// X86MaxMoves and X86MaxMoveBytes bound the moves of an extended site
// (the stub has room for them: X86StubSize).
const (
	X86MaxMoves     = 4
	X86MaxMoveBytes = 24
)

// MoveKind is what a displaced move does.
type MoveKind uint8

const (
	MoveReg  MoveKind = iota + 1 // Dst = Src (32-bit: zero-extended)
	MoveSext                     // Dst = sign-extended low 32 bits of Src
	MoveImm                      // Dst = Imm
)

// X86Move is one displaced instruction of an extended site. Registers
// are x86 numbers: 0 rax, 1 rcx, 2 rdx, 3 rbx, 4 rsp, 5 rbp, 6 rsi,
// 7 rdi, 8-15 r8-r15.
type X86Move struct {
	Bytes    []byte
	Kind     MoveKind
	Dst, Src int
	Wide     bool   // a 64-bit destination; else the upper half is cleared
	Imm      uint64 // MoveImm's value, already extended
}

// ErrMoves says an extended site's moves exceed what the stub holds.
var ErrMoves = errors.New("the moves between mov and syscall do not fit the stub")

// decodeMove decodes one displaceable move at the start of b.
func decodeMove(b []byte) (m X86Move, ok bool) {
	i := 0
	var rex byte
	if len(b) > 0 && b[0]&0xF0 == 0x40 {
		rex, i = b[0], 1
	}
	if i >= len(b) {
		return m, false
	}
	w := rex&8 != 0
	r, x := int(rex>>2&1)<<3, int(rex&1)<<3
	op := b[i]
	i++
	switch {
	case op == 0x89 || op == 0x8B || op == 0x63 && w:
		if i >= len(b) || b[i]>>6 != 3 {
			return m, false // a memory operand
		}
		reg, rm := int(b[i]>>3&7)|r, int(b[i]&7)|x
		i++
		m.Kind, m.Dst, m.Src = MoveReg, rm, reg
		if op != 0x89 {
			m.Dst, m.Src = reg, rm
		}
		if op == 0x63 {
			m.Kind = MoveSext
		}
	case op >= 0xB8 && op <= 0xBF:
		m.Kind, m.Dst, m.Src = MoveImm, int(op-0xB8)|x, -1
		if w {
			if i+8 > len(b) {
				return m, false
			}
			m.Imm = binary.LittleEndian.Uint64(b[i:])
			i += 8
		} else {
			if i+4 > len(b) {
				return m, false
			}
			m.Imm = uint64(binary.LittleEndian.Uint32(b[i:]))
			i += 4
		}
	case op == 0xC7:
		if i+5 > len(b) || b[i]>>6 != 3 || b[i]>>3&7 != 0 {
			return m, false
		}
		m.Kind, m.Dst, m.Src = MoveImm, int(b[i]&7)|x, -1
		v := binary.LittleEndian.Uint32(b[i+1:])
		m.Imm = uint64(v)
		if w {
			m.Imm = uint64(int64(int32(v)))
		}
		i += 5
	default:
		return m, false
	}
	if m.Dst == 0 || m.Dst == 4 {
		return m, false // %rax holds the number; %rsp
	}
	m.Wide = w
	m.Bytes = b[:i:i]
	return m, true
}

// decodeMoves decodes b as moves only, to its last byte.
func decodeMoves(b []byte) ([]X86Move, bool) {
	var ms []X86Move
	for len(b) > 0 {
		m, ok := decodeMove(b)
		if !ok || len(ms) == X86MaxMoves {
			return nil, false
		}
		ms = append(ms, m)
		b = b[len(m.Bytes):]
	}
	return ms, true
}

// Apply carries the move out on a thread's saved registers.
func (m X86Move) Apply(get func(reg int) uint64, set func(reg int, v uint64)) {
	var v uint64
	switch m.Kind {
	case MoveReg:
		v = get(m.Src)
		if !m.Wide {
			v = uint64(uint32(v))
		}
	case MoveSext:
		v = uint64(int64(int32(get(m.Src))))
	case MoveImm:
		v = m.Imm
	}
	set(m.Dst, v)
}

// withMoves is a stub for an extended site: `mov $nr,%eax`, the moves,
// then the stub's own code (which may set %eax again: an answer).
func withMoves(nr uint32, moves []X86Move, code []byte) []byte {
	if len(moves) == 0 {
		return code
	}
	b := []byte{0xB8}
	b = binary.LittleEndian.AppendUint32(b, nr)
	for _, m := range moves {
		b = append(b, m.Bytes...)
	}
	return append(b, code...)
}

// X86StubFor is the stub of a site with moves (none: the plain stubs).
func X86StubFor(nr uint32, moves []X86Move, code []byte) []byte {
	return withMoves(nr, moves, code)
}
