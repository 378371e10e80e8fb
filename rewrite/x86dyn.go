package rewrite

import (
	"encoding/binary"
	"errors"
)

// Sites whose number is in a register (docs/tiers.md, Rewrite tier,
// "Number in a register"). libc's generic entries take the
// number as an argument: musl's __syscall_cp_c (every open, close, read
// and write of a static musl program) and __syscall_cp_asm, glibc's
// syscall(3). Their syscall is preceded by moves only, the last of which
// (the lead) is 5 bytes long: `mov 8(%rsp),%r9`, `mov %r11,8(%rsp)`,
// `mov $imm32,%ecx`. The patch replaces the lead and the first 2 bytes
// after it, exactly as for `mov $nr,%eax`: the lead is copied into the
// stub, a thread that ran it and stops at site+5 takes SIGILL, and the
// moves after it are the extended sites' moves (x86moves.go). %rax, which
// nothing there writes, holds the number.
//
// The stub chooses at run time, without touching the flags (the guest may
// rely on them across a syscall): a number the tier's filter sends to kbox
// whatever its arguments (X86DynTable's byte is 1) enters kbox, as a
// patched `mov $nr,%eax; syscall` does; any other is made by a `syscall`
// in the stub, which the filter judges as it judged the guest's own (the
// stubs are not kbox's code), then returns. The choice needs BMI2's
// shrx (flag-free shift) and jrcxz.

// The dynamic stubs' shared data, at the end of the slot table (the slots
// X86PatchSlots ... X86Slots-1 are not given to sites): the pointer to
// kbox's entry, then one byte per syscall number below X86DynNrs.
const (
	X86DynNrs       = 512
	X86PatchSlots   = X86Slots - 1 - X86DynNrs/8
	X86DynEntrySlot = X86PatchSlots
	X86DynTable     = X86SlotBase + 8*(X86DynEntrySlot+1)
)

// ErrLead says no lead was found for a site whose number is in a
// register.
var ErrLead = errors.New("no mov $nr,%eax, and no 5-byte move before the syscall that leaves %rax alone")

// decodeLead reports whether b starts with a lead: a 5-byte instruction
// that is position-independent, leaves %rax, %rsp and the flags alone and
// may be copied into a stub as it is: `mov $imm32,%r32` (not %eax or
// %esp), `mov disp8(%rsp),%reg` or `mov %reg,disp8(%rsp)` (REX without B
// or X: the base and index stay %rsp and none).
func decodeLead(b []byte) bool {
	if len(b) < 5 {
		return false
	}
	if op := b[0]; op >= 0xB9 && op <= 0xBF && op != 0xBC {
		return true
	}
	rex := b[0]
	if rex&0xF0 != 0x40 || rex&0x3 != 0 {
		return false
	}
	op, modrm, sib := b[1], b[2], b[3]
	if modrm>>6 != 1 || modrm&7 != 4 || sib != 0x24 {
		return false
	}
	reg := int(modrm>>3&7) | int(rex>>2&1)<<3
	switch op {
	case 0x89: // store: any register
		return true
	case 0x8B: // load: not into %rax (the number) or %rsp
		return reg != 0 && reg != 4
	}
	return false
}

// findDynamic finds a site whose number is in a register before the
// syscall at offset end: the nearest lead from which moves only lead to
// it.
func findDynamic(t *X86Text, end int) (X86SiteInfo, error) {
	c := t.Code
	for d := 5; d <= 5+X86MaxMoveBytes; d++ {
		off := end - d
		if off < 0 {
			break
		}
		if !decodeLead(c[off:end]) {
			continue
		}
		moves, ok := decodeMoves(c[off+5 : end])
		if !ok {
			continue
		}
		if err := checkSite(t, off, d+2); err != nil {
			return X86SiteInfo{}, err
		}
		return X86SiteInfo{Site: t.Base + uint64(off), Len: d + 2, Moves: moves, Dynamic: true, Lead: c[off : off+5 : off+5]}, nil
	}
	return X86SiteInfo{}, ErrLead
}

// X86StubDyn is the stub of a site whose number is in a register: the
// lead and the moves, then the choice (above), entering kbox through the
// pointer in X86DynEntrySlot with %rcx = ret, or making the syscall and
// going back to ret.
//
//	lead; moves
//	mov $9,%ecx; shrx %rcx,%rax,%rcx; jrcxz 1f; jmp 2f    number < 512?
//	1: movzbl X86DynTable(%rax),%ecx; jrcxz 2f            kbox's?
//	movabs $ret,%rcx; jmp *X86DynEntrySlot                into kbox
//	2: syscall; jmp *ret (the movabs's immediate)
func X86StubDyn(lead []byte, moves []X86Move, ret uint64) []byte {
	b := append([]byte(nil), lead...)
	for _, m := range moves {
		b = append(b, m.Bytes...)
	}
	b = append(b, 0xB9, 9, 0, 0, 0) // mov $9,%ecx
	b = append(b, 0xC4, 0xE2, 0xF3, 0xF7, 0xC8)
	b = append(b, 0xE3, 0x02) // jrcxz over the jmp
	b = append(b, 0xEB, 7+2+10+7)
	b = append(b, 0x0F, 0xB6, 0x88) // movzbl disp32(%rax),%ecx
	b = binary.LittleEndian.AppendUint32(b, X86DynTable)
	b = append(b, 0xE3, 10+7)
	b = append(b, 0x48, 0xB9)
	imm := len(b)
	b = binary.LittleEndian.AppendUint64(b, ret)
	b = append(b, 0xFF, 0x24, 0x25)
	b = binary.LittleEndian.AppendUint32(b, X86SlotAddr(X86DynEntrySlot))
	b = append(b, 0x0F, 0x05)
	b = append(b, 0xFF, 0x25) // jmp *rel32(%rip): the immediate above
	return binary.LittleEndian.AppendUint32(b, uint32(int32(imm-(len(b)+4))))
}

// X86DynNative is the offset in a dynamic stub of its own `syscall`, for
// lead and move bytes n long.
func X86DynNative(n int) int { return n + 5 + 5 + 2 + 2 + 7 + 2 + 10 + 7 }
