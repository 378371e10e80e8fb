//go:build linux

package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// Program building: a tiny label assembler on top of x/net/bpf.

type label int

type op struct {
	ins    bpf.Instruction // concrete instruction, or nil for a jump/label
	jge    bool            // if A >= val goto target, else fall through
	jeq    bool            // if A == val goto target, else fall through
	ja     bool            // goto target
	val    uint32
	target label
	mark   label // >0: this op is a label marker
	long   bool  // jge or jeq needs a trampoline (distance > 255)
}

type asm struct {
	ops    []op
	labels label
}

func (a *asm) newLabel() label { a.labels++; return a.labels }
func (a *asm) emit(ins ...bpf.Instruction) {
	for _, i := range ins {
		a.ops = append(a.ops, op{ins: i})
	}
}
func (a *asm) setLabel(l label)        { a.ops = append(a.ops, op{mark: l}) }
func (a *asm) jgeTo(v uint32, l label) { a.ops = append(a.ops, op{jge: true, val: v, target: l}) }
func (a *asm) jaTo(l label)            { a.ops = append(a.ops, op{ja: true, target: l}) }
func (a *asm) jeqTo(v uint32, l label) { a.ops = append(a.ops, op{jeq: true, val: v, target: l}) }

func (o *op) size() int {
	switch {
	case o.mark > 0:
		return 0
	case (o.jge || o.jeq) && o.long:
		return 2
	}
	return 1
}

func (a *asm) assemble() ([]bpf.Instruction, error) {
	pos := make([]int, len(a.ops))
	where := make(map[label]int)
	for {
		n := 0
		for i := range a.ops {
			pos[i] = n
			if a.ops[i].mark > 0 {
				where[a.ops[i].mark] = n
			}
			n += a.ops[i].size()
		}
		grew := false
		for i := range a.ops {
			o := &a.ops[i]
			if (o.jge || o.jeq) && !o.long && where[o.target]-(pos[i]+1) > 255 {
				o.long, grew = true, true
			}
		}
		if !grew {
			break
		}
	}
	var out []bpf.Instruction
	for i := range a.ops {
		o := &a.ops[i]
		switch {
		case o.mark > 0:
		case o.ins != nil:
			out = append(out, o.ins)
		case o.ja:
			out = append(out, bpf.Jump{Skip: uint32(where[o.target] - (pos[i] + 1))})
		case o.jge && o.long:
			out = append(out,
				bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: o.val, SkipTrue: 0, SkipFalse: 1},
				bpf.Jump{Skip: uint32(where[o.target] - (pos[i] + 2))})
		case o.jeq && o.long:
			out = append(out,
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: o.val, SkipTrue: 0, SkipFalse: 1},
				bpf.Jump{Skip: uint32(where[o.target] - (pos[i] + 2))})
		case o.jeq:
			d := where[o.target] - (pos[i] + 1)
			if d < 0 {
				return nil, fmt.Errorf("seccomp: backward jump")
			}
			out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: o.val, SkipTrue: uint8(d)})
		case o.jge:
			d := where[o.target] - (pos[i] + 1)
			if d < 0 {
				return nil, fmt.Errorf("seccomp: backward jump")
			}
			out = append(out, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: o.val, SkipTrue: uint8(d)})
		}
	}
	return out, nil
}
