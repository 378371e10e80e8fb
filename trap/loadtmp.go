//go:build linux && amd64 && cgo

package trap

// A minimal ELF loader, to be replaced by elfload.Load (branch loader)
// once it is usable: it maps a program and its interpreter from their
// memfds and builds the initial stack.

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

type loaded struct {
	entry, sp        uint64
	spans            []span // the guest's memory
	brkStart, brkMax uint64
}

type image struct {
	base, entry, phdr uint64
	phnum             int
	end               uint64 // end of the highest segment
}

const stackSize = 8 << 20
const brkReserve = 1 << 30

func mapImage(fd int, spans *[]span) (*image, error) {
	hdr := make([]byte, 64)
	if _, err := unix.Pread(fd, hdr, 0); err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	typ := elf.Type(le.Uint16(hdr[16:]))
	phoff, phnum := le.Uint64(hdr[32:]), int(le.Uint16(hdr[56:]))
	if phnum == 0 || phnum > 128 {
		return nil, errors.New("bad program headers")
	}
	ph := make([]byte, 56*phnum)
	if _, err := unix.Pread(fd, ph, int64(phoff)); err != nil {
		return nil, err
	}
	lo, hi := ^uint64(0), uint64(0)
	var phdr uint64
	for i := 0; i < phnum; i++ {
		p := ph[56*i:]
		switch elf.ProgType(le.Uint32(p)) {
		case elf.PT_LOAD:
			va, memsz := le.Uint64(p[16:]), le.Uint64(p[40:])
			lo, hi = min(lo, pageDown(va)), max(hi, pageUp(va+memsz))
			if le.Uint64(p[8:]) == 0 && phdr == 0 {
				phdr = va + phoff
			}
		case elf.PT_PHDR:
			phdr = le.Uint64(p[16:])
		}
	}
	if hi <= lo {
		return nil, errors.New("no loadable segment")
	}
	var base uint64
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	hint := uintptr(lo)
	if typ == elf.ET_DYN {
		hint = 0
	} else {
		flags |= unix.MAP_FIXED_NOREPLACE
	}
	r, _, e := unix.Syscall6(unix.SYS_MMAP, hint, uintptr(hi-lo), unix.PROT_NONE, uintptr(flags), ^uintptr(0), 0)
	if e != 0 {
		if e == unix.EEXIST {
			return nil, fmt.Errorf("cannot load at %#x: address in use", lo)
		}
		return nil, e
	}
	if typ == elf.ET_DYN {
		base = uint64(r) - lo
	}
	*spans = append(*spans, span{base + lo, base + hi})
	for i := 0; i < phnum; i++ {
		p := ph[56*i:]
		if elf.ProgType(le.Uint32(p)) != elf.PT_LOAD {
			continue
		}
		pf := elf.ProgFlag(le.Uint32(p[4:]))
		off, va, filesz, memsz := le.Uint64(p[8:]), le.Uint64(p[16:]), le.Uint64(p[32:]), le.Uint64(p[40:])
		prot := 0
		if pf&elf.PF_R != 0 {
			prot |= unix.PROT_READ
		}
		if pf&elf.PF_W != 0 {
			prot |= unix.PROT_WRITE
		}
		if pf&elf.PF_X != 0 {
			prot |= unix.PROT_EXEC
		}
		start := base + va
		fileEnd, memEnd := start+filesz, start+memsz
		if filesz > 0 {
			mp := prot
			if memsz > filesz {
				mp |= unix.PROT_WRITE
			}
			_, _, e := unix.Syscall6(unix.SYS_MMAP, uintptr(pageDown(start)), uintptr(pageUp(fileEnd)-pageDown(start)), uintptr(mp),
				unix.MAP_PRIVATE|unix.MAP_FIXED, uintptr(fd), uintptr(pageDown(off)))
			if e != 0 {
				return nil, e
			}
			if memsz > filesz && fileEnd%pageSize != 0 {
				zero := make([]byte, pageUp(fileEnd)-fileEnd)
				copyOut(fileEnd, zero)
			}
			if mp != prot {
				unix.Syscall(unix.SYS_MPROTECT, uintptr(pageDown(start)), uintptr(pageUp(fileEnd)-pageDown(start)), uintptr(prot))
			}
		}
		if a := pageUp(fileEnd); pageUp(memEnd) > a && memsz > filesz {
			if filesz == 0 {
				a = pageDown(start)
			}
			_, _, e := unix.Syscall6(unix.SYS_MMAP, uintptr(a), uintptr(pageUp(memEnd)-a), uintptr(prot),
				unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED, ^uintptr(0), 0)
			if e != 0 {
				return nil, e
			}
		}
	}
	return &image{base: base, entry: base + le.Uint64(hdr[24:]), phdr: base + phdr, phnum: phnum, end: base + hi}, nil
}

// loadTmp maps prog (and interp, -1 for none) and builds the stack.
func loadTmp(prog, interp int, argv, envp []string, execfn string, ids [4]uint32) (*loaded, error) {
	l := &loaded{}
	main, err := mapImage(prog, &l.spans)
	if err != nil {
		return nil, err
	}
	entry, ibase := main.entry, uint64(0)
	if interp >= 0 {
		in, err := mapImage(interp, &l.spans)
		if err != nil {
			return nil, err
		}
		entry, ibase = in.entry, in.base
	}
	// brk: a reservation after the program's end.
	l.brkStart = main.end
	if r, _, e := unix.Syscall6(unix.SYS_MMAP, uintptr(main.end), brkReserve, unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE|unix.MAP_FIXED_NOREPLACE, ^uintptr(0), 0); e == 0 {
		l.brkMax = uint64(r) + brkReserve
		l.spans = append(l.spans, span{uint64(r), l.brkMax})
	} else {
		l.brkMax = main.end
	}
	r, _, e := unix.Syscall6(unix.SYS_MMAP, 0, stackSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_STACK, ^uintptr(0), 0)
	if e != 0 {
		return nil, e
	}
	lo := uint64(r)
	l.spans = append(l.spans, span{lo, lo + stackSize})
	top := lo + stackSize
	put := func(b []byte) uint64 {
		top -= uint64(len(b))
		copyOut(top, b)
		return top
	}
	str := func(s string) uint64 { return put(append([]byte(s), 0)) }
	var rnd [16]byte
	unix.Getrandom(rnd[:], 0)
	random := put(rnd[:])
	platform := str("x86_64")
	execAddr := str(execfn)
	var argp, envpp []uint64
	for _, a := range argv {
		argp = append(argp, str(a))
	}
	for _, e := range envp {
		envpp = append(envpp, str(e))
	}
	aux := [][2]uint64{
		{unix.AT_PHDR, main.phdr}, {unix.AT_PHENT, 56}, {unix.AT_PHNUM, uint64(main.phnum)},
		{unix.AT_PAGESZ, pageSize}, {unix.AT_BASE, ibase}, {unix.AT_FLAGS, 0}, {unix.AT_ENTRY, main.entry},
		{unix.AT_UID, uint64(ids[0])}, {unix.AT_EUID, uint64(ids[1])}, {unix.AT_GID, uint64(ids[2])}, {unix.AT_EGID, uint64(ids[3])},
		{unix.AT_SECURE, 0}, {unix.AT_RANDOM, random}, {unix.AT_EXECFN, execAddr}, {unix.AT_PLATFORM, platform},
		{unix.AT_HWCAP, auxval(unix.AT_HWCAP)}, {unix.AT_HWCAP2, auxval(unix.AT_HWCAP2)}, {unix.AT_CLKTCK, 100},
		{unix.AT_SYSINFO_EHDR, auxval(unix.AT_SYSINFO_EHDR)}, {51 /* AT_MINSIGSTKSZ */, max(auxval(51), 2048)},
		{unix.AT_NULL, 0},
	}
	words := 1 + len(argp) + 1 + len(envpp) + 1 + 2*len(aux)
	top = (top - uint64(8*words)) &^ 15
	sp := top
	w := func(v uint64) {
		copyOut(top, bytesOf(&v))
		top += 8
	}
	w(uint64(len(argp)))
	for _, a := range argp {
		w(a)
	}
	w(0)
	for _, e := range envpp {
		w(e)
	}
	w(0)
	for _, a := range aux {
		w(a[0])
		w(a[1])
	}
	l.entry, l.sp = entry, sp
	return l, nil
}
