package elfload

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"os"

	"golang.org/x/sys/unix"
)

// Limits of what the planner accepts. Each is far above any real program
// and keeps absurd headers from turning into absurd reservations.
const (
	ehdrSize   = 64
	phdrSize   = 56
	maxPhdrs   = 65536 / phdrSize // the kernel's limit: 64 KiB of headers
	maxInterp  = 4096             // PATH_MAX, as the kernel checks PT_INTERP
	maxAlign   = 1 << 30          // p_align above 1 GiB is refused
	maxSpan    = 1 << 40          // an image spanning more than 1 TiB is refused
	maxUserTop = 1 << 47          // the lowest top of user space of both arches
)

// object is one ELF file, checked and planned for mapping: what Load maps,
// with no address chosen yet.
type object struct {
	name   string
	size   int64 // of the file
	typ    elf.Type
	entry  uint64
	phnum  int
	interp string // PT_INTERP, "" for none
	// phdr is the address (before relocation) of the program headers in
	// memory, found as the kernel finds them: in the PT_LOAD that holds
	// e_phoff in its file part. 0 when no segment does.
	phdr      uint64
	segs      []segment
	first     uint64 // page-aligned lowest address of the image
	end       uint64 // page-aligned end of the highest segment
	align     uint64 // load base alignment for ET_DYN: the page size or the largest p_align
	execStack bool   // PT_GNU_STACK asks for an executable stack
}

// segment is one PT_LOAD with a non-zero memory size.
type segment struct {
	vaddr, memsz, off, filesz uint64
	prot                      int
}

// exec reports whether the segment is mapped executable.
func (s *segment) exec() bool { return s.prot&unix.PROT_EXEC != 0 }

// planError is a format error: the kernel's execve says ENOEXEC.
func planError(name, format string, args ...any) error {
	return &Error{Msg: name + ": " + fmt.Sprintf(format, args...), Errno: unix.ENOEXEC}
}

// plan reads and checks the ELF headers of r (size bytes) for machine and
// a page size of pg, and plans its mapping. Every field it trusts is
// checked here: Load maps only what plan accepted.
func plan(name string, r io.ReaderAt, size int64, machine elf.Machine, pg uint64) (*object, error) {
	if size == 0 {
		return nil, planError(name, "empty file")
	}
	if size < ehdrSize {
		return nil, planError(name, "truncated ELF header (%d bytes)", size)
	}
	var eh [ehdrSize]byte
	if _, err := r.ReadAt(eh[:], 0); err != nil {
		return nil, planError(name, "reading the ELF header: %v", err)
	}
	if !bytes.Equal(eh[:4], []byte(elf.ELFMAG)) {
		return nil, planError(name, "not an ELF file")
	}
	if elf.Class(eh[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(eh[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return nil, planError(name, "unsupported ELF: want 64-bit little-endian")
	}
	le := binary.LittleEndian
	o := &object{name: name, size: size, typ: elf.Type(le.Uint16(eh[16:]))}
	if o.typ != elf.ET_EXEC && o.typ != elf.ET_DYN {
		return nil, planError(name, "ELF type %v is not executable", o.typ)
	}
	if m := elf.Machine(le.Uint16(eh[18:])); m != machine {
		return nil, planError(name, "ELF machine %v, want %v", m, machine)
	}
	o.entry = le.Uint64(eh[24:])
	phoff := le.Uint64(eh[32:])
	phentsize := le.Uint16(eh[54:])
	phnum := int(le.Uint16(eh[56:]))
	if phentsize != phdrSize || phnum == 0 || phnum > maxPhdrs {
		return nil, planError(name, "corrupt ELF: %d program headers of %d bytes", phnum, phentsize)
	}
	phend, carry := bits.Add64(phoff, uint64(phnum)*phdrSize, 0)
	if carry != 0 || phend > uint64(size) {
		return nil, planError(name, "truncated ELF: program headers at %#x-%#x beyond the file's %d bytes", phoff, phend, size)
	}
	o.phnum = phnum
	ph := make([]byte, phnum*phdrSize)
	if _, err := r.ReadAt(ph, int64(phoff)); err != nil {
		return nil, planError(name, "reading the program headers: %v", err)
	}
	o.align = pg
	var prevEnd uint64
	for i := 0; i < phnum; i++ {
		h := ph[i*phdrSize:]
		typ := elf.ProgType(le.Uint32(h))
		flags := elf.ProgFlag(le.Uint32(h[4:]))
		off, vaddr := le.Uint64(h[8:]), le.Uint64(h[16:])
		filesz, memsz, align := le.Uint64(h[32:]), le.Uint64(h[40:]), le.Uint64(h[48:])
		switch typ {
		case elf.PT_INTERP:
			if o.interp != "" {
				return nil, planError(name, "corrupt ELF: two PT_INTERP headers")
			}
			if filesz < 2 || filesz > maxInterp || off > uint64(size) || off+filesz > uint64(size) {
				return nil, planError(name, "corrupt ELF: bad PT_INTERP")
			}
			s := make([]byte, filesz)
			if _, err := r.ReadAt(s, int64(off)); err != nil {
				return nil, planError(name, "reading PT_INTERP: %v", err)
			}
			n := bytes.IndexByte(s, 0)
			if n <= 0 {
				return nil, planError(name, "corrupt ELF: PT_INTERP not NUL-terminated")
			}
			o.interp = string(s[:n])
		case elf.PT_GNU_STACK:
			o.execStack = flags&elf.PF_X != 0
		case elf.PT_LOAD:
			if filesz > memsz {
				return nil, planError(name, "segment %d: file size %#x above its memory size %#x", i, filesz, memsz)
			}
			if fend, c := bits.Add64(off, filesz, 0); c != 0 || fend > uint64(size) {
				return nil, planError(name, "segment %d outside the file: %#x bytes at offset %#x of a %d-byte file", i, filesz, off, size)
			}
			mend, c := bits.Add64(vaddr, memsz, 0)
			if c != 0 || mend > maxUserTop-pg {
				return nil, planError(name, "segment %d: absurd address %#x or size %#x", i, vaddr, memsz)
			}
			if off%pg != vaddr%pg {
				return nil, planError(name, "segment %d: offset %#x and address %#x differ in their page offsets", i, off, vaddr)
			}
			if align > pg && align&(align-1) == 0 {
				if align > maxAlign {
					return nil, planError(name, "segment %d: absurd alignment %#x", i, align)
				}
				if align > o.align {
					o.align = align
				}
			}
			if memsz == 0 {
				continue // maps nothing, as in the kernel
			}
			if len(o.segs) > 0 && vaddr < prevEnd {
				return nil, planError(name, "segment %d at %#x overlaps the one before (ending at %#x) or is out of order", i, vaddr, prevEnd)
			}
			prevEnd = mend
			prot := 0
			if flags&elf.PF_R != 0 {
				prot |= unix.PROT_READ
			}
			if flags&elf.PF_W != 0 {
				prot |= unix.PROT_WRITE
			}
			if flags&elf.PF_X != 0 {
				prot |= unix.PROT_EXEC
			}
			o.segs = append(o.segs, segment{vaddr: vaddr, memsz: memsz, off: off, filesz: filesz, prot: prot})
			if off <= phoff && phoff < off+filesz {
				o.phdr = phoff - off + vaddr
			}
		}
	}
	if len(o.segs) == 0 {
		return nil, planError(name, "no loadable segment")
	}
	o.first = o.segs[0].vaddr &^ (pg - 1)
	o.end = pageUp(o.segs[len(o.segs)-1].vaddr+o.segs[len(o.segs)-1].memsz, pg)
	if o.end-o.first > maxSpan {
		return nil, planError(name, "absurd image size: %#x bytes from %#x", o.end-o.first, o.first)
	}
	entryOK := false
	for i := range o.segs {
		s := &o.segs[i]
		if s.exec() && s.vaddr <= o.entry && o.entry < s.vaddr+s.memsz {
			entryOK = true
		}
	}
	if !entryOK {
		return nil, planError(name, "entry point %#x outside the executable segments", o.entry)
	}
	return o, nil
}

// pageUp rounds x up to a multiple of pg (a power of two).
func pageUp(x, pg uint64) uint64 { return (x + pg - 1) &^ (pg - 1) }

// span is the length of the image's address range.
func (o *object) span() uint64 { return o.end - o.first }

// Check plans the mapping of the whole ELF file b as Load would, without
// mapping anything, and returns the error Load would give (segments that
// overlap, lie outside the file or have absurd sizes, headers outside the
// file, ...): a tier that hands the program to the host kernel checks it
// first, so that the guest gets ENOEXEC where the kernel would kill it
// after the point of no return.
func Check(name string, b []byte, machine elf.Machine) error {
	_, err := plan(name, bytes.NewReader(b), int64(len(b)), machine, uint64(os.Getpagesize()))
	return err
}
