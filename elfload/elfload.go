// Package elfload inspects and prepares guest executables read from the
// image: ELF header checks, PT_INTERP lookup and in-place patching, and
// shebang parsing.
package elfload

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// Kind classifies an executable image.
type Kind int

const (
	// Static is an ELF without PT_INTERP.
	Static Kind = iota + 1
	// Dynamic is an ELF with PT_INTERP.
	Dynamic
	// Script starts with #!.
	Script
)

// ErrNotExecutable reports a file that is neither ELF nor a #! script.
var ErrNotExecutable = errors.New("not an executable (no ELF header or #!)")

// Info describes an executable.
type Info struct {
	Kind Kind
	// Interp is the PT_INTERP path (Dynamic).
	Interp string
	// InterpOff and InterpLen locate the PT_INTERP string in the file,
	// including its NUL padding.
	InterpOff, InterpLen int
	// ScriptInterp and ScriptArg are the #! line's program and optional
	// single argument (Script).
	ScriptInterp, ScriptArg string
}

const maxShebang = 256

// Inspect classifies b, the start (or whole) of an executable. For ELF, b
// must hold the program headers and the PT_INTERP string.
func Inspect(b []byte, machine elf.Machine) (*Info, error) {
	if len(b) >= 2 && b[0] == '#' && b[1] == '!' {
		return parseShebang(b)
	}
	if len(b) < 64 || !bytes.Equal(b[:4], []byte(elf.ELFMAG)) {
		return nil, ErrNotExecutable
	}
	if elf.Class(b[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(b[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return nil, errors.New("unsupported ELF: want 64-bit little-endian")
	}
	le := binary.LittleEndian
	typ := elf.Type(le.Uint16(b[16:]))
	if typ != elf.ET_EXEC && typ != elf.ET_DYN {
		return nil, fmt.Errorf("ELF type %v is not executable", typ)
	}
	if m := elf.Machine(le.Uint16(b[18:])); m != machine {
		return nil, fmt.Errorf("ELF machine %v, want %v", m, machine)
	}
	phoff := le.Uint64(b[32:])
	phentsize := uint64(le.Uint16(b[54:]))
	phnum := uint64(le.Uint16(b[56:]))
	if phentsize != 56 || phnum == 0 || phnum > 128 {
		return nil, fmt.Errorf("corrupt ELF: %d program headers of %d bytes", phnum, phentsize)
	}
	end := phoff + phnum*phentsize
	if phoff > uint64(len(b)) || end > uint64(len(b)) || end < phoff {
		return nil, errors.New("corrupt ELF: program headers outside the file")
	}
	info := &Info{Kind: Static}
	for i := uint64(0); i < phnum; i++ {
		ph := b[phoff+i*phentsize:]
		if elf.ProgType(le.Uint32(ph)) != elf.PT_INTERP {
			continue
		}
		off, size := le.Uint64(ph[8:]), le.Uint64(ph[32:])
		if size < 2 || size > 4096 || off > uint64(len(b)) || off+size > uint64(len(b)) {
			return nil, errors.New("corrupt ELF: bad PT_INTERP")
		}
		s := b[off : off+size]
		n := bytes.IndexByte(s, 0)
		if n <= 0 {
			return nil, errors.New("corrupt ELF: PT_INTERP not NUL-terminated")
		}
		info.Kind, info.Interp = Dynamic, string(s[:n])
		info.InterpOff, info.InterpLen = int(off), int(size)
	}
	return info, nil
}

// PatchInterp rewrites the PT_INTERP string of b (described by info) to
// path, which must fit in the original slot.
func PatchInterp(b []byte, info *Info, path string) error {
	if info.Kind != Dynamic {
		return errors.New("not a dynamic executable")
	}
	if len(path)+1 > info.InterpLen {
		return fmt.Errorf("interpreter path %q does not fit in %d bytes", path, info.InterpLen)
	}
	slot := b[info.InterpOff : info.InterpOff+info.InterpLen]
	copy(slot, path)
	for i := len(path); i < len(slot); i++ {
		slot[i] = 0
	}
	return nil
}

func parseShebang(b []byte) (*Info, error) {
	line := b[2:]
	if n := bytes.IndexByte(line, '\n'); n >= 0 {
		line = line[:n]
	} else if len(b) >= maxShebang {
		return nil, errors.New("#! line too long")
	}
	if len(line) > maxShebang {
		return nil, errors.New("#! line too long")
	}
	line = bytes.Trim(line, " \t\r")
	if len(line) == 0 {
		return nil, errors.New("empty #! line")
	}
	interp, arg, _ := bytes.Cut(line, []byte{' '})
	if n := bytes.IndexByte(interp, '\t'); n >= 0 {
		interp, arg = interp[:n], interp[n+1:]
	}
	return &Info{Kind: Script, ScriptInterp: string(interp), ScriptArg: string(bytes.Trim(arg, " \t"))}, nil
}
