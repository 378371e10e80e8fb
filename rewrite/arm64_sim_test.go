package rewrite

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"
)

// arm64Sim runs the few instructions stubs and veneers use, as
// golang.org/x/arch/arm64/arm64asm decodes them: an executable check that
// a patched site, its veneer and its stub give the guest back every
// register the kernel would. Operands come from the decoder's text, so an
// encoding the decoder reads differently from what the encoder meant
// fails here.
type arm64Sim struct {
	X                [31]uint64
	SP, PC           uint64
	NZCV, FPSR, FPCR uint64
	Q                [32][2]uint64

	code    []Arm64Alias      // fetched from the first alias that has the PC
	mem     map[uint64]byte   // data (the stack)
	entry   uint64            // BLR here calls onEntry
	onEntry func(s *arm64Sim) // runs as the dispatch entry
	onSVC   func(s *arm64Sim) // runs at an svc
	trace   []string
}

func (s *arm64Sim) fetch(pc uint64) (uint32, error) {
	for _, a := range s.code {
		if w, err := a.Load32(pc); err == nil {
			return w, nil
		}
	}
	return 0, fmt.Errorf("no code at %#x", pc)
}

func (s *arm64Sim) load(addr uint64, n int) uint64 {
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(s.mem[addr+uint64(i)])
	}
	return v
}

func (s *arm64Sim) store(addr uint64, n int, v uint64) {
	for i := 0; i < n; i++ {
		s.mem[addr+uint64(i)] = byte(v >> (8 * i))
	}
}

// reg reads a general register by the decoder's name (SP and XZR too).
func (s *arm64Sim) reg(name string) uint64 {
	switch name {
	case "SP":
		return s.SP
	case "XZR":
		return 0
	}
	return s.X[s.xnum(name)]
}

func (s *arm64Sim) setReg(name string, v uint64) {
	switch name {
	case "SP":
		s.SP = v
		return
	case "XZR":
		return
	}
	s.X[s.xnum(name)] = v
}

func (s *arm64Sim) xnum(name string) int {
	if !strings.HasPrefix(name, "X") {
		panic("sim: not an X register: " + name)
	}
	n, err := strconv.Atoi(name[1:])
	if err != nil || n > 30 {
		panic("sim: bad register " + name)
	}
	return n
}

// mem parses "[SP]", "[SP,#16]", "[SP,#-16]!", "[SP],#16": the address
// to use and the base's new value.
func (s *arm64Sim) memArg(a string) (addr, wb uint64, hasWB bool) {
	pre := strings.HasSuffix(a, "!")
	a = strings.TrimSuffix(a, "!")
	if i := strings.Index(a, "],#"); i >= 0 {
		base := s.reg(a[1:i])
		off, _ := strconv.ParseInt(a[i+3:], 10, 64)
		return base, base + uint64(off), true
	}
	a = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
	parts := strings.SplitN(a, ",#", 2)
	base := s.reg(parts[0])
	var off int64
	if len(parts) == 2 {
		off, _ = strconv.ParseInt(parts[1], 10, 64)
	}
	return base + uint64(off), base + uint64(off), pre
}

func arm64ImmArg(a arm64asm.Arg) uint64 {
	str := strings.TrimPrefix(a.String(), "#")
	v, err := strconv.ParseUint(str, 0, 64)
	if err != nil {
		panic("sim: immediate " + a.String())
	}
	return v
}

func (s *arm64Sim) sysreg(a arm64asm.Arg) *uint64 {
	switch a.String() {
	case "S3_3_C4_C2_0":
		return &s.NZCV
	case "S3_3_C4_C4_0":
		return &s.FPCR
	case "S3_3_C4_C4_1":
		return &s.FPSR
	}
	panic("sim: system register " + a.String())
}

// run executes from s.PC until it reaches stop, at most limit
// instructions.
func (s *arm64Sim) run(stop uint64, limit int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("at %#x: %v", s.PC, r)
		}
	}()
	for i := 0; i < limit; i++ {
		if s.PC == stop {
			return nil
		}
		w, err := s.fetch(s.PC)
		if err != nil {
			return err
		}
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], w)
		inst, err := arm64asm.Decode(b[:])
		if err != nil {
			return fmt.Errorf("at %#x: %08x does not decode: %v", s.PC, w, err)
		}
		s.trace = append(s.trace, fmt.Sprintf("%#x: %v", s.PC, inst))
		next := s.PC + 4
		args := inst.Args
		switch inst.Op {
		case arm64asm.STP, arm64asm.LDP:
			r1, r2 := args[0].String(), args[1].String()
			addr, wb, hasWB := s.memArg(args[2].String())
			base := strings.TrimPrefix(strings.SplitN(args[2].String(), ",", 2)[0], "[")
			base = strings.TrimSuffix(base, "]")
			if r1[0] == 'Q' {
				q1, _ := strconv.Atoi(r1[1:])
				q2, _ := strconv.Atoi(r2[1:])
				for k, q := range []int{q1, q2} {
					a := addr + uint64(16*k)
					if inst.Op == arm64asm.STP {
						s.store(a, 8, s.Q[q][0])
						s.store(a+8, 8, s.Q[q][1])
					} else {
						s.Q[q][0], s.Q[q][1] = s.load(a, 8), s.load(a+8, 8)
					}
				}
			} else if inst.Op == arm64asm.STP {
				s.store(addr, 8, s.reg(r1))
				s.store(addr+8, 8, s.reg(r2))
			} else {
				v1, v2 := s.load(addr, 8), s.load(addr+8, 8)
				s.setReg(r1, v1)
				s.setReg(r2, v2)
			}
			if hasWB {
				s.setReg(base, wb)
			}
		case arm64asm.STR, arm64asm.LDR:
			r := args[0].String()
			if rel, ok := args[1].(arm64asm.PCRel); ok {
				if inst.Op != arm64asm.LDR {
					panic("sim: str literal")
				}
				addr := s.PC + uint64(rel)
				lo, err1 := s.fetch(addr)
				hi, err2 := s.fetch(addr + 4)
				if err1 != nil || err2 != nil {
					panic("sim: literal outside code")
				}
				s.setReg(r, uint64(hi)<<32|uint64(lo))
				break
			}
			addr, wb, hasWB := s.memArg(args[1].String())
			if hasWB {
				panic("sim: str/ldr writeback")
			}
			_ = wb
			if inst.Op == arm64asm.STR {
				s.store(addr, 8, s.reg(r))
			} else {
				s.setReg(r, s.load(addr, 8))
			}
		case arm64asm.ADD, arm64asm.SUB:
			v := arm64ImmArg(args[2])
			if inst.Op == arm64asm.SUB {
				v = -v
			}
			s.setReg(args[0].String(), s.reg(args[1].String())+v)
		case arm64asm.MOV:
			if _, ok := args[1].(arm64asm.RegSP); !ok {
				panic("sim: mov " + inst.String())
			}
			s.setReg(args[0].String(), s.reg(args[1].String()))
		case arm64asm.MRS:
			s.setReg(args[0].String(), *s.sysreg(args[1]))
		case arm64asm.MSR:
			*s.sysreg(args[0]) = s.reg(args[1].String())
		case arm64asm.B:
			next = s.PC + uint64(args[0].(arm64asm.PCRel))
		case arm64asm.BR:
			next = s.reg(args[0].String())
		case arm64asm.BLR:
			target := s.reg(args[0].String())
			s.X[30] = next
			if target != s.entry {
				panic(fmt.Sprintf("sim: blr to %#x, not the entry", target))
			}
			s.onEntry(s)
			next = s.X[30]
		case arm64asm.CBNZ:
			if s.reg(args[0].String()) != 0 {
				next = s.PC + uint64(args[1].(arm64asm.PCRel))
			}
		case arm64asm.SVC:
			s.onSVC(s)
		default:
			return fmt.Errorf("at %#x: %v is not simulated", s.PC, inst)
		}
		s.PC = next
	}
	return fmt.Errorf("no return to %#x after %d instructions", stop, limit)
}
