//go:build linux

package seccomp

import "golang.org/x/net/bpf"

// Trusted code (Policy.Trusted): the in-process tiers' filter lets kbox's
// own code, which runs on the guest's threads, make any syscall.

// IPRange is [Lo, Hi) of instruction pointers.
type IPRange struct{ Lo, Hi uint64 }

// SplitRanges cuts ranges at every 4 GiB boundary, as Policy.Trusted needs.
func SplitRanges(rs []IPRange) []IPRange {
	var out []IPRange
	for _, r := range rs {
		for lo := r.Lo; lo < r.Hi; {
			hi := min(r.Hi, (lo|0xffffffff)+1)
			if hi == 0 { // the top block
				hi = r.Hi
			}
			out = append(out, IPRange{lo, hi})
			if hi <= lo {
				break
			}
			lo = hi
		}
	}
	return out
}

func (p *Policy) trusted(ip uint64) bool {
	for _, r := range p.Trusted {
		if ip >= r.Lo && ip < r.Hi {
			return true
		}
	}
	return false
}

// emitTrusted returns ALLOW when the instruction pointer lies in one of
// p.Trusted, and falls through otherwise.
func (p *Policy) emitTrusted(a *asm) {
	for _, r := range p.Trusted {
		a.emit(
			bpf.LoadAbsolute{Off: offIP + 4, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(r.Lo >> 32), SkipFalse: 4},
			bpf.LoadAbsolute{Off: offIP, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(r.Lo), SkipFalse: 2},
			bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: uint32(r.Hi - 1), SkipTrue: 1},
			bpf.RetConstant{Val: RetAllow},
		)
	}
}
