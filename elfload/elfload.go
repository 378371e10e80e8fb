// Package elfload inspects, prepares and loads guest executables.
//
// Inspecting (elfload.go): ELF header checks, PT_INTERP lookup and
// in-place patching, and shebang parsing, for the seccomp tier's exec.
//
// Loading (load.go), for the in-process tiers: Load maps a program, and a
// dynamic program's interpreter, into kbox's own process and builds its
// initial stack, as the kernel's execve would; a thread kbox creates in C
// then starts it at Loaded.Entry with its stack pointer at Loaded.SP.
//
//	l, err := elfload.Load(&elfload.Spec{
//		Prog:   elfload.Image{Name: "ls", FD: prog.Main},     // dispatch.ReadProgram's memfds
//		Interp: &elfload.Image{Name: "ld.so", FD: prog.Interp}, // nil for a static program
//		Argv:   argv, Envp: envp, ExecFn: path,
//		UID: uid, EUID: euid, GID: gid, EGID: egid,
//	})
//	...
//	l.Brk.Set(addr)   // the guest's brk(2)
//	l.Regions         // the guest's memory, for its mmap/munmap/mprotect checks
//	l.Unmap()         // exec replaced it, or it never started
//
// The steps:
//   - plan.go reads and checks the ELF headers (ET_EXEC and ET_DYN,
//     x86_64 and aarch64, segments inside the file, in order, not
//     overlapping, of sane sizes and alignments, the entry in code) and
//     plans the mapping. Bad input is an *Error carrying the errno execve
//     would give; nothing is mapped before the plan is complete.
//   - load.go maps. An ET_DYN object's base is the kernel's choice: one
//     PROT_NONE reservation of its span (aligned to its largest p_align)
//     with a NULL hint, segments mapped inside with MAP_FIXED. An ET_EXEC
//     object's span is reserved at its own addresses with
//     MAP_FIXED_NOREPLACE, and an address in use (kbox, Go's heap, LKL) is
//     the error "cannot load NAME at 0x...: address in use" (in the
//     break's room after it, the break gets less room instead). Segments
//     honour p_offset, p_vaddr, p_filesz, p_memsz, p_align and p_flags;
//     the tail of a segment's last file page is zeroed and its bss mapped
//     anonymous. PT_TLS is libc's business.
//   - Every segment, code too, is mapped MAP_PRIVATE from the image (the
//     sealed memfd the exec cache shares): the pages are the cache's
//     until written. The rewrite tier gives a text it patches a writable
//     alias of its own when a site there turns hot (trap/rewrite.go).
//   - The stack (stack.go) is laid out as create_elf_tables lays it
//     (argc, argv, envp, auxv, then AT_RANDOM's bytes, the platform
//     string and the argument strings up to 8 bytes below the top), without
//     the kernel's random offset, in a DefaultStackSize mapping between
//     PROT_NONE guards. PT_GNU_STACK with PF_X makes it executable, as on
//     Linux.
//   - auxv (auxv.go) is kbox's own auxv with the program's entries put in:
//     the machine's (AT_HWCAP*, AT_PAGESZ, AT_CLKTCK, AT_MINSIGSTKSZ, the
//     rseq sizes, AT_PLATFORM) are what the kernel gave kbox, and
//     AT_SYSINFO_EHDR is kbox's vDSO, so the guest's clock_gettime stays
//     native; AT_PHDR, AT_PHNUM, AT_BASE, AT_ENTRY, the ids, AT_SECURE,
//     AT_RANDOM and AT_EXECFN are the program's.
//   - brk.go: the program break is emulated in a reservation right after
//     the program's last segment (Brk).
//
// unsafe is in unsafe.go only (writing the stack, zeroing bss tails); the
// package has no cgo. internal/nativerun starts a loaded program with no
// interception, for tests, and internal/loadrun is a command around it.
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
