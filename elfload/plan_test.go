package elfload

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const testPage = 4096

// badELFs are malformed programs, each with the error Load must give.
func badELFs() []struct {
	name string
	b    []byte
	err  string
} {
	good := defaultTestELF().build()
	withType := func(i int, typ elf.ProgType) []byte {
		c := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(c[64+56*i:], uint32(typ))
		return c
	}
	header := func(off int, v uint16) []byte {
		c := append([]byte(nil), good...)
		binary.LittleEndian.PutUint16(c[off:], v)
		return c
	}
	noLoads := withType(phHeaders, elf.PT_NULL)
	binary.LittleEndian.PutUint32(noLoads[64+56*phCode:], uint32(elf.PT_NULL))
	binary.LittleEndian.PutUint32(noLoads[64+56*phData:], uint32(elf.PT_NULL))
	entryOut := append([]byte(nil), good...)
	binary.LittleEndian.PutUint64(entryOut[24:], 2*tUnit+tDataOff) // in the data segment
	other := elf.EM_AARCH64
	if hostTestMachine() == elf.EM_AARCH64 {
		other = elf.EM_X86_64
	}
	return []struct {
		name string
		b    []byte
		err  string
	}{
		{"zero-length", []byte{}, "empty file"},
		{"truncated header", good[:40], "truncated ELF header"},
		{"truncated program headers", good[:100], "program headers"},
		{"not ELF", []byte(strings.Repeat("not an ELF file, just text. ", 4)), "not an ELF file"},
		{"32-bit", func() []byte { c := append([]byte(nil), good...); c[elf.EI_CLASS] = byte(elf.ELFCLASS32); return c }(), "64-bit"},
		{"relocatable", header(16, uint16(elf.ET_REL)), "not executable"},
		{"wrong machine", header(18, uint16(other)), "ELF machine"},
		{"bad phentsize", header(54, 32), "program headers of 32 bytes"},
		{"no phdrs", header(56, 0), "0 program headers"},
		{"segment outside the file", setPhdr(setPhdr(good, phData, phFilesz, 1<<20), phData, phMemsz, 1<<20), "outside the file"},
		{"offset past the end", setPhdr(good, phCode, phOff, 1<<40), "outside the file"},
		{"offset overflow", setPhdr(setPhdr(setPhdr(good, phCode, phOff, ^uint64(0)-2), phCode, phFilesz, 16), phCode, phMemsz, 16), "outside the file"},
		{"file size above memory size", setPhdr(good, phData, phMemsz, 4), "above its memory size"},
		{"overlapping segments", setPhdr(good, phCode, phVaddr, 0), "overlaps"},
		{"out of order", setPhdr(setPhdr(good, phHeaders, phVaddr, 8*tUnit), phHeaders, phOff, 0), "overlaps the one before"},
		{"absurd size", setPhdr(good, phData, phMemsz, 1<<46), "absurd"},
		{"address overflow", setPhdr(good, phData, phMemsz, ^uint64(0)-tUnit), "absurd"},
		{"misaligned offset", setPhdr(good, phData, phOff, 2*tUnit+tDataOff+1), "page offsets"},
		{"absurd alignment", setPhdr(good, phCode, phAlign, 1<<40), "absurd alignment"},
		{"huge span", setPhdr(setPhdr(good, phData, phVaddr, 1<<41+tDataOff), phData, phOff, 2*tUnit+tDataOff), "absurd image size"},
		{"no PT_LOAD", noLoads, "no loadable segment"},
		{"entry outside text", entryOut, "entry point"},
		{"interp not terminated", func() []byte {
			b := (&testELF{typ: elf.ET_DYN, machine: hostTestMachine(), interp: "/lib/ld.so"}).build()
			return setPhdr(b, phInterp, phFilesz, 4)
		}(), "PT_INTERP"},
	}
}

func TestPlanRefusesBadInput(t *testing.T) {
	m := hostTestMachine()
	for _, c := range badELFs() {
		_, err := plan("prog", bytesReader(c.b), int64(len(c.b)), m, testPage)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			continue
		}
		if !errors.Is(err, unix.ENOEXEC) {
			t.Errorf("%s: %v is not ENOEXEC", c.name, err)
		}
	}
}

func TestPlan(t *testing.T) {
	m := hostTestMachine()
	b := (&testELF{typ: elf.ET_EXEC, machine: m, base: 0x4000000, interp: "/lib/ld.so", execStack: true}).build()
	o, err := plan("prog", bytesReader(b), int64(len(b)), m, testPage)
	if err != nil {
		t.Fatal(err)
	}
	if o.interp != "/lib/ld.so" || !o.execStack || o.typ != elf.ET_EXEC || o.phnum != 5 {
		t.Errorf("plan %+v", o)
	}
	if o.first != 0x4000000 || o.end != pageUp(0x4000000+2*tUnit+tDataOff+uint64(len(tMessage))+tBss, testPage) {
		t.Errorf("span %#x-%#x", o.first, o.end)
	}
	if o.phdr != 0x4000000+64 {
		t.Errorf("phdr %#x", o.phdr)
	}
	if o.align != tUnit {
		t.Errorf("align %#x", o.align)
	}
	if len(o.segs) != 3 || !o.segs[1].exec() || o.segs[2].prot != unix.PROT_READ|unix.PROT_WRITE {
		t.Errorf("segments %+v", o.segs)
	}
}

// FuzzLoad feeds the planner (the part of Load that reads the file) any
// bytes: it never panics, and whatever it accepts is safe to map: every
// segment inside the file, in order, page-congruent, in a bounded span.
func FuzzLoad(f *testing.F) {
	f.Add(defaultTestELF().build()[:0x200])
	f.Add((&testELF{typ: elf.ET_EXEC, machine: hostTestMachine(), base: 0x400000, interp: "/lib/ld.so"}).build()[:0x200])
	f.Add([]byte("\x7fELF"))
	m := hostTestMachine()
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := plan("fuzz", bytesReader(b), int64(len(b)), m, testPage)
		if err != nil {
			if !errors.Is(err, unix.ENOEXEC) {
				t.Fatalf("error %v is not ENOEXEC", err)
			}
			return
		}
		if len(o.segs) == 0 || o.end <= o.first || o.end-o.first > maxSpan {
			t.Fatalf("accepted span %#x-%#x", o.first, o.end)
		}
		prev := uint64(0)
		for i, s := range o.segs {
			if s.off+s.filesz > uint64(len(b)) || s.filesz > s.memsz || s.off%testPage != s.vaddr%testPage {
				t.Fatalf("accepted segment %d %+v", i, s)
			}
			if i > 0 && s.vaddr < prev {
				t.Fatalf("accepted overlapping segment %d", i)
			}
			prev = s.vaddr + s.memsz
		}
	})
}
