package elfload

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mapping is one line of /proc/self/maps.
type mapping struct {
	lo, hi uintptr
	perms  string
	name   string
}

func readMaps(t *testing.T) []mapping {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m mapping
		var off, dev, ino string
		fmt.Sscanf(sc.Text(), "%x-%x %s %s %s %s %s", &m.lo, &m.hi, &m.perms, &off, &dev, &ino, &m.name)
		out = append(out, m)
	}
	return out
}

// findMapping is the mapping holding addr.
func findMapping(maps []mapping, addr uintptr) *mapping {
	for i := range maps {
		if maps[i].lo <= addr && addr < maps[i].hi {
			return &maps[i]
		}
	}
	return nil
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// leakCheck runs f and checks, in /proc/self, that whatever it reserved is
// unmapped after it and that it left no fd or memfd mapping behind.
func leakCheck(t *testing.T, name string, f func()) {
	t.Helper()
	var spans [][2]uintptr
	traceSpan = func(s, e uintptr) { spans = append(spans, [2]uintptr{s, e}) }
	defer func() { traceSpan = nil }()
	fds := openFDs(t)
	before := map[mapping]bool{}
	for _, m := range readMaps(t) {
		before[m] = true
	}
	f()
	maps := readMaps(t)
	// What the loader maps lies inside its reservation; a mapping that
	// reaches beyond it is another thread's (the Go runtime's, placed by
	// the kernel in the range just freed), not a leftover.
	for _, s := range spans {
		for _, m := range maps {
			if m.lo >= s[0] && m.hi <= s[1] {
				t.Errorf("%s: %#x-%#x (%s %s) still mapped in the loader's reservation %#x-%#x", name, m.lo, m.hi, m.perms, m.name, s[0], s[1])
			}
		}
	}
	for _, m := range maps {
		if strings.Contains(m.name, "kbox-elf") && !before[m] {
			t.Errorf("%s: memfd still mapped: %#x-%#x %s", name, m.lo, m.hi, m.name)
		}
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%s: %d fds open after, %d before", name, n, fds)
	}
}

func testSpec(b []byte) *Spec {
	return &Spec{
		Prog: Image{Name: "test-prog", Bytes: b},
		Argv: []string{"test-prog", "arg"}, Envp: []string{"A=1"},
	}
}

func TestLoadRegions(t *testing.T) {
	b := defaultTestELF().build()
	var l *Loaded
	leakCheck(t, "load+unmap", func() {
		var err error
		l, err = Load(testSpec(b))
		if err != nil {
			t.Fatal(err)
		}
		checkLoaded(t, l, b)
		l.Unmap()
		l.Unmap() // twice is harmless
	})
	if got := l.Brk.Set(l.Brk.Start + 4096); got != l.Brk.Start {
		t.Errorf("brk of an unmapped program moved to %#x", got)
	}
}

func checkLoaded(t *testing.T, l *Loaded, b []byte) {
	t.Helper()
	pg := uintptr(os.Getpagesize())
	if l.Base == 0 || l.Base%tUnit != 0 {
		t.Errorf("ET_DYN base %#x not chosen or not aligned to p_align", l.Base)
	}
	if l.Entry != l.Base+tUnit || l.ProgEntry != l.Entry || l.Phdr != l.Base+64 || l.InterpBase != 0 {
		t.Errorf("entry %#x phdr %#x interp %#x for base %#x", l.Entry, l.Phdr, l.InterpBase, l.Base)
	}
	maps := readMaps(t)
	// Every region is mapped with the protection it says.
	for i, r := range l.Regions {
		if i > 0 && r.Start < l.Regions[i-1].End {
			t.Errorf("regions overlap: %+v %+v", l.Regions[i-1], r)
		}
		if r.Start%pg != 0 || r.End%pg != 0 || r.End <= r.Start {
			t.Errorf("region %+v not page-aligned", r)
		}
		for a := r.Start; a < r.End; a += pg {
			m := findMapping(maps, a)
			if m == nil {
				t.Errorf("%v region %#x-%#x: %#x not mapped", r.Kind, r.Start, r.End, a)
				break
			}
			if want := permString(r.Prot); !strings.HasPrefix(m.perms, want) {
				t.Errorf("%v region at %#x mapped %s, want %s", r.Kind, a, m.perms, want)
				break
			}
			a = max(a, m.hi-pg) // on to the next mapping
		}
	}
	kinds := map[RegionKind]int{}
	for _, r := range l.Regions {
		kinds[r.Kind]++
	}
	if kinds[RegionText] != 1 || kinds[RegionSegment] != 2 || kinds[RegionBss] != 1 || kinds[RegionStack] != 1 || kinds[RegionGuard] != 2 || kinds[RegionBrk] != 1 {
		t.Errorf("regions %v", kinds)
	}
	// Text and data come from the file (private), data zeroed after its
	// file part.
	if m := findMapping(maps, l.Entry); m == nil || !strings.Contains(m.name, "/memfd:kbox-e") || m.perms != "r-xp" {
		t.Errorf("text mapped as %+v", m)
	}
	data := l.Base + 2*tUnit + tDataOff
	if got := mem(data, len(tMessage)); !bytes.Equal(got, tMessage) {
		t.Errorf("data segment holds %q", got)
	}
	tail := mem(data+uintptr(len(tMessage)), int(pg-(data+uintptr(len(tMessage)))%pg))
	if bytes.IndexFunc(tail, func(r rune) bool { return r != 0 }) >= 0 {
		t.Errorf("the tail of the data page after its file part is not zero")
	}
	bssEnd := data + uintptr(len(tMessage)) + tBss
	if bytes.IndexFunc(mem((data+pg)&^(pg-1), int(bssEnd-(data+pg)&^(pg-1))), func(r rune) bool { return r != 0 }) >= 0 {
		t.Errorf("bss not zero")
	}
	if l.Brk.Start != (bssEnd+pg-1)&^(pg-1) || l.Brk.Current() != l.Brk.Start || l.Brk.Limit != l.Brk.Start+DefaultBrkSize {
		t.Errorf("brk %#x-%#x, current %#x; bss ends at %#x", l.Brk.Start, l.Brk.Limit, l.Brk.Current(), bssEnd)
	}
	// The stack: argc at SP, 16-byte aligned, inside the stack region.
	if l.SP%16 != 0 {
		t.Errorf("sp %#x", l.SP)
	}
	var stack Region
	for _, r := range l.Regions {
		if r.Kind == RegionStack {
			stack = r
		}
	}
	if l.SP < stack.Start || l.SP >= stack.End || stack.End-stack.Start != DefaultStackSize || stack.Prot != unix.PROT_READ|unix.PROT_WRITE {
		t.Errorf("sp %#x, stack %+v", l.SP, stack)
	}
	img := mem(l.SP, int(stack.End-l.SP))
	argv, envp, aux := readStack(t, img, uint64(l.SP), uint64(stack.End))
	if strings.Join(argv, " ") != "test-prog arg" || strings.Join(envp, " ") != "A=1" {
		t.Errorf("argv %q envp %q", argv, envp)
	}
	if len(aux) != len(l.Auxv) {
		t.Errorf("auxv on the stack %v, Loaded.Auxv %v", aux, l.Auxv)
	}
	for _, e := range aux {
		switch e.typ {
		case atPhdr:
			if e.val != uint64(l.Phdr) || binary.LittleEndian.Uint32(mem(l.Phdr, 4)) != uint32(elf.PT_LOAD) {
				t.Errorf("AT_PHDR %#x does not point to the program headers", e.val)
			}
		case atEntry:
			if e.val != uint64(l.ProgEntry) {
				t.Errorf("AT_ENTRY %#x", e.val)
			}
		case atPhnum:
			if e.val != 4 {
				t.Errorf("AT_PHNUM %d", e.val)
			}
		case atRandom:
			if e.val < uint64(l.SP) || e.val+16 > uint64(stack.End) {
				t.Errorf("AT_RANDOM %#x outside the stack", e.val)
			}
		case atExecfn:
			if s := cString(uintptr(e.val), 100); s != "test-prog" {
				t.Errorf("AT_EXECFN %q", s)
			}
		}
	}
}

func permString(prot int) string {
	s := []byte("---")
	if prot&unix.PROT_READ != 0 {
		s[0] = 'r'
	}
	if prot&unix.PROT_WRITE != 0 {
		s[1] = 'w'
	}
	if prot&unix.PROT_EXEC != 0 {
		s[2] = 'x'
	}
	return string(s)
}

func TestLoadFromSealedMemfd(t *testing.T) {
	b := defaultTestELF().build()
	fd, err := unix.MemfdCreate("kbox-exec:test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, b); err != nil {
		t.Fatal(err)
	}
	unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	off, _ := unix.Seek(fd, 0, 1)
	spec := testSpec(nil)
	spec.Prog = Image{Name: "test-prog", FD: fd}
	l, err := Load(spec)
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, l, b)
	l.Unmap()
	if now, _ := unix.Seek(fd, 0, 1); now != off {
		t.Errorf("the image fd's offset moved from %d to %d", off, now)
	}
}

func TestLoadWithInterpreter(t *testing.T) {
	prog := (&testELF{typ: elf.ET_DYN, machine: hostTestMachine(), interp: "/lib/ld-test.so"}).build()
	ld := defaultTestELF().build()
	spec := testSpec(prog)
	spec.Interp = &Image{Name: "ld-test.so", Bytes: ld}
	leakCheck(t, "interp", func() {
		l, err := Load(spec)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unmap()
		if l.InterpBase == 0 || l.InterpBase == l.Base || l.Entry != l.InterpBase+tUnit || l.ProgEntry != l.Base+tUnit {
			t.Errorf("base %#x interp base %#x entry %#x", l.Base, l.InterpBase, l.Entry)
		}
		var base uint64
		for _, e := range l.Auxv {
			if e[0] == atBase {
				base = e[1]
			}
		}
		if base != uint64(l.InterpBase) {
			t.Errorf("AT_BASE %#x, interpreter at %#x", base, l.InterpBase)
		}
		n := 0
		for _, r := range l.Regions {
			if r.Interp {
				n++
				if r.Start < l.InterpBase || r.Kind == RegionBrk || r.Kind == RegionStack {
					t.Errorf("interpreter region %+v", r)
				}
			}
		}
		if n == 0 {
			t.Errorf("no interpreter regions")
		}
	})
}

// TestLoadETExecBreakShrinks: something mapped within the gigabyte after
// an ET_EXEC program leaves its break less room; the program still loads
// (kbox's own mappings there made a static program at 0x400000 fail to
// load now and then).
func TestLoadETExecBreakShrinks(t *testing.T) {
	b := (&testELF{typ: elf.ET_EXEC, machine: hostTestMachine(), base: 0x10000000}).build()
	l, err := Load(testSpec(b))
	if err != nil {
		t.Fatal(err)
	}
	start := l.Brk.Start
	l.Unmap()
	pg := uintptr(os.Getpagesize())
	block := (start + 1<<20 + pg - 1) &^ (pg - 1)
	if _, err := mmap(block, pg, unix.PROT_NONE, reserveFlags|unix.MAP_FIXED_NOREPLACE, -1, 0); err != nil {
		t.Skipf("SKIP: cannot map the blocker at %#x: %v", block, err)
	}
	defer munmap(block, pg)
	l, err = Load(testSpec(b))
	if err != nil {
		t.Fatalf("a mapping 1 MiB after the program: %v", err)
	}
	defer l.Unmap()
	if l.Brk.Start != start || l.Brk.Limit <= start || l.Brk.Limit > block {
		t.Errorf("break [%#x, %#x), want from %#x up to the mapping at %#x", l.Brk.Start, l.Brk.Limit, start, block)
	}
	if got := l.Brk.Set(start + pg); got != start+pg {
		t.Errorf("brk(%#x) = %#x", start+pg, got)
	}
}

func TestLoadETExec(t *testing.T) {
	b := (&testELF{typ: elf.ET_EXEC, machine: hostTestMachine(), base: 0x10000000}).build()
	l, err := Load(testSpec(b))
	if err != nil {
		t.Fatal(err)
	}
	if l.Base != 0 || l.Entry != 0x10000000+tUnit || l.Phdr != 0x10000000+64 {
		t.Errorf("ET_EXEC base %#x entry %#x phdr %#x", l.Base, l.Entry, l.Phdr)
	}
	// A second load of the same addresses finds them in use.
	leakCheck(t, "in use", func() {
		_, err := Load(testSpec(b))
		if err == nil || !strings.Contains(err.Error(), "cannot load test-prog at 0x10000000: address in use") || !errors.Is(err, unix.EEXIST) {
			t.Errorf("second load at the same address: %v", err)
		}
	})
	l.Unmap()
	l, err = Load(testSpec(b))
	if err != nil {
		t.Fatalf("after Unmap the address is free again: %v", err)
	}
	l.Unmap()
}

func TestLoadExecStack(t *testing.T) {
	l, err := Load(testSpec((&testELF{typ: elf.ET_DYN, machine: hostTestMachine(), execStack: true}).build()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unmap()
	m := findMapping(readMaps(t), l.SP)
	if !l.ExecStack || m == nil || m.perms != "rwxp" {
		t.Errorf("PT_GNU_STACK PF_X: stack %+v", m)
	}
}

func TestLoadRefusesBadInput(t *testing.T) {
	type tc struct {
		name  string
		spec  *Spec
		err   string
		errno unix.Errno
	}
	var cases []tc
	for _, c := range badELFs() {
		cases = append(cases, tc{c.name, testSpec(c.b), c.err, unix.ENOEXEC})
	}
	good := defaultTestELF().build()
	dyn := (&testELF{typ: elf.ET_DYN, machine: hostTestMachine(), interp: "/lib/ld.so"}).build()
	withInterp := func(prog []byte, interp []byte) *Spec {
		s := testSpec(prog)
		s.Interp = &Image{Name: "ld.so", Bytes: interp}
		return s
	}
	big := testSpec(good)
	big.Envp = []string{strings.Repeat("x", 100000), strings.Repeat("y", 100000)}
	big.StackSize = 256 << 10
	hugeBss := testSpec(setPhdr(good, phData, phMemsz, 1<<39))
	cases = append(cases,
		tc{"missing interpreter", testSpec(dyn), "needs its interpreter /lib/ld.so", unix.ENOEXEC},
		tc{"static program given an interpreter", withInterp(good, good), "static program given an interpreter", unix.EINVAL},
		tc{"dynamic interpreter", withInterp(dyn, dyn), "interpreter ld.so is itself dynamic", unix.ELIBBAD},
		tc{"truncated interpreter", withInterp(dyn, good[:50]), "interpreter ld.so: truncated", unix.ELIBBAD},
		tc{"empty interpreter", withInterp(dyn, []byte{}), "interpreter ld.so: empty file", unix.ELIBBAD},
		tc{"arguments too long", big, "argument list too long", unix.E2BIG},
		tc{"NUL in an argument", &Spec{Prog: Image{Name: "p", Bytes: good}, Argv: []string{"a\x00"}}, "NUL", unix.EINVAL},
		tc{"negative stack", &Spec{Prog: Image{Name: "p", Bytes: good}, StackSize: -1}, "stack size", unix.EINVAL},
		tc{"bad fd", &Spec{Prog: Image{Name: "p", FD: 1 << 20}}, "bad file descriptor", unix.EBADF},
		tc{"directory fd", func() *Spec {
			fd, _ := unix.Open("/", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			t.Cleanup(func() { unix.Close(fd) })
			return &Spec{Prog: Image{Name: "p", FD: fd}}
		}(), "not a regular file", unix.EACCES},
	)
	if os.Getenv("KBOX_EMULATED") == "" { // qemu-user takes 15 s to refuse it
		// Fails after the reservation and the text: everything made goes.
		cases = append(cases, tc{"bss too big to map", hugeBss, "bss", unix.ENOMEM})
	}
	if l, err := Load(testSpec(good)); err == nil { // warm up: the host auxv, the first memfd
		l.Unmap()
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			leakCheck(t, c.name, func() {
				l, err := Load(c.spec)
				if err == nil {
					l.Unmap()
					t.Errorf("loaded")
					return
				}
				if !strings.Contains(err.Error(), c.err) || !errors.Is(err, c.errno) {
					t.Errorf("%v, want %q (%v)", err, c.err, c.errno)
				}
			})
		})
	}
}

func TestBrk(t *testing.T) {
	spec := testSpec(defaultTestELF().build())
	spec.BrkSize = 1 << 20
	l, err := Load(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unmap()
	b := l.Brk
	pg := uintptr(os.Getpagesize())
	start := b.Start
	if b.Limit != start+1<<20 {
		t.Fatalf("limit %#x for a 1 MiB reserve from %#x", b.Limit, start)
	}
	perms := func(a uintptr) string {
		if m := findMapping(readMaps(t), a); m != nil {
			return m.perms[:3]
		}
		return "unmapped"
	}
	if perms(start) != "---" {
		t.Errorf("the break's first page is %s before any brk", perms(start))
	}
	steps := []struct {
		set, want uintptr
	}{
		{0, start},               // brk(0) asks
		{start - 1, start},       // below the start: refused
		{b.Limit + 1, start},     // beyond the reserve: refused
		{start + 10, start + 10}, // unaligned, as Linux keeps it
		{start + 3*pg + 5, start + 3*pg + 5},
		{start + pg, start + pg}, // shrink
		{b.Limit, b.Limit},       // the whole reserve
		{start, start},           // back to empty
	}
	for _, s := range steps {
		if got := b.Set(s.set); got != s.want || b.Current() != s.want {
			t.Fatalf("brk(%#x) = %#x, want %#x", s.set, got, s.want)
		}
		if s.set == start+3*pg+5 {
			mem(start, int(3*pg+5))[3*pg] = 7 // the pages are there, writable
			if perms(start+3*pg) != "rw-" || perms(start+4*pg) != "---" {
				t.Errorf("after brk(start+3 pages+5): %s %s", perms(start+3*pg), perms(start+4*pg))
			}
		}
		if s.set == start+pg && perms(start+pg) != "---" {
			t.Errorf("shrunk pages still %s", perms(start+pg))
		}
	}
	b.Set(start + 4*pg)
	if mem(start+3*pg, 1)[0] != 0 {
		t.Errorf("memory given back by brk comes back with its old contents")
	}
}

// BenchmarkLoad: Load and Unmap of a dynamic program and its interpreter
// (the host's /bin/true and ld.so, from sealed memfds): the loader's part
// of an in-process start or exec.
func BenchmarkLoad(b *testing.B) {
	prog, err := os.ReadFile("/bin/true")
	if err != nil {
		b.Skip("SKIP: no /bin/true")
	}
	info, err := Inspect(prog, hostTestMachine())
	if err != nil || info.Kind != Dynamic {
		b.Skipf("SKIP: /bin/true is not a dynamic program here (%v)", err)
	}
	interp, err := os.ReadFile(info.Interp)
	if err != nil {
		b.Skip(err)
	}
	memfd := func(data []byte) int {
		fd, err := unix.MemfdCreate("bench", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			b.Fatal(err)
		}
		if err := pwriteAll(fd, data, 0); err != nil {
			b.Fatal(err)
		}
		unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
		return fd
	}
	pfd, ifd := memfd(prog), memfd(interp)
	defer unix.Close(pfd)
	defer unix.Close(ifd)
	spec := &Spec{
		Prog: Image{Name: "true", FD: pfd}, Interp: &Image{Name: "ld.so", FD: ifd},
		Argv: []string{"true"}, Envp: os.Environ(), ExecFn: "/bin/true",
	}
	for b.Loop() {
		l, err := Load(spec)
		if err != nil {
			b.Fatal(err)
		}
		l.Unmap()
	}
}

// TestBrkConcurrent: guest threads call brk at once (the trap tier serves
// them concurrently); every answer is a break some call set, and the
// pages below the final break are writable.
func TestBrkConcurrent(t *testing.T) {
	spec := testSpec(defaultTestELF().build())
	spec.BrkSize = 4 << 20
	l, err := Load(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unmap()
	b := l.Brk
	done := make(chan bool)
	for g := 0; g < 8; g++ {
		go func(g int) {
			for i := 0; i < 200; i++ {
				want := b.Start + uintptr((g*200+i)%(4<<20))
				if got := b.Set(want); got != want {
					t.Errorf("brk(%#x) = %#x", want, got)
				}
			}
			done <- true
		}(g)
	}
	for g := 0; g < 8; g++ {
		<-done
	}
	cur := b.Current()
	if cur > b.Start {
		clear(mem(b.Start, int(cur-b.Start)))
	}
}

// Release closes the load's memfds and ends its break but unmaps nothing:
// the caller (the trap tier's exec) unmaps the memory it tracks, once; a
// second munmap of a range would take whatever was mapped there since.
func TestReleaseLeavesMappings(t *testing.T) {
	b := defaultTestELF().build()
	fds := openFDs(t)
	l, err := Load(testSpec(b))
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	l.Release() // twice is harmless
	if n := openFDs(t); n != fds {
		t.Errorf("%d fds open after Release, %d before", n, fds)
	}
	if got := l.Brk.Set(l.Brk.Start + 4096); got != l.Brk.Start {
		t.Errorf("brk of a released program moved to %#x", got)
	}
	maps := readMaps(t)
	for _, r := range l.Regions {
		if r.Kind == RegionBrk || r.End <= r.Start {
			continue
		}
		found := false
		for _, m := range maps {
			if m.lo <= r.Start && r.Start < m.hi {
				found = true
			}
		}
		if !found {
			t.Errorf("region %#x-%#x (kind %v) unmapped by Release", r.Start, r.End, r.Kind)
		}
	}
	for _, r := range l.Regions {
		munmap(r.Start, r.End-r.Start)
	}
}
