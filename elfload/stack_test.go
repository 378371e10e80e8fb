package elfload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// readStack parses an initial stack image the way a libc's entry does.
func readStack(t *testing.T, img []byte, sp, top uint64) (argv, envp []string, aux []auxEntry) {
	t.Helper()
	le := binary.LittleEndian
	word := func(addr uint64) uint64 {
		if addr < sp || addr+8 > top {
			t.Fatalf("word at %#x outside the stack %#x-%#x", addr, sp, top)
		}
		return le.Uint64(img[addr-sp:])
	}
	str := func(addr uint64) string {
		if addr < sp || addr >= top {
			t.Fatalf("string at %#x outside the stack", addr)
		}
		s := img[addr-sp:]
		return string(s[:bytes.IndexByte(s, 0)])
	}
	p := sp
	argc := word(p)
	p += 8
	for i := uint64(0); i < argc; i++ {
		argv = append(argv, str(word(p)))
		p += 8
	}
	if word(p) != 0 {
		t.Fatal("argv not NULL-terminated")
	}
	for p += 8; word(p) != 0; p += 8 {
		envp = append(envp, str(word(p)))
	}
	for p += 8; word(p) != atNull; p += 16 {
		aux = append(aux, auxEntry{word(p), word(p + 8)})
	}
	return argv, envp, aux
}

func TestBuildStack(t *testing.T) {
	const top = 0x7ff000000000
	h := &hostAux{
		entries:  []auxEntry{{atSysinfoEhdr, 0x7f0000001000}, {atHwcap, 0xbeef}, {atPagesz, 4096}, {atPhdr, 1}, {atExecfd, 9}, {atBase, 2}, {atRandom, 3}, {atExecfn, 4}, {atPlatform, 5}},
		platform: "x86_64",
	}
	in := &stackInput{
		argv: []string{"prog", "a b", ""}, envp: []string{"X=1", "EMPTY="}, execfn: "/bin/prog",
		platform: h.platform, size: 1 << 20,
		aux: guestAuxv(h, &auxFacts{phdr: 0x1040, phnum: 7, base: 0x2000, entry: 0x1100, uid: 1, euid: 2, gid: 3, egid: 4, secure: true}),
	}
	copy(in.random[:], "0123456789abcdef")
	if err := checkArgs(in); err != nil {
		t.Fatal(err)
	}
	st, err := buildStack(top, in)
	if err != nil {
		t.Fatal(err)
	}
	if st.sp%16 != 0 || st.sp+uint64(len(st.img)) != top {
		t.Fatalf("sp %#x, %d bytes", st.sp, len(st.img))
	}
	argv, envp, aux := readStack(t, st.img, st.sp, top)
	if strings.Join(argv, "|") != "prog|a b|" || strings.Join(envp, "|") != "X=1|EMPTY=" {
		t.Errorf("argv %q envp %q", argv, envp)
	}
	got := map[uint64]uint64{}
	var order []uint64
	for _, e := range aux {
		got[e.typ] = e.val
		order = append(order, e.typ)
	}
	// kbox's order, its AT_EXECFD dropped, the missing entries appended.
	want := []uint64{atSysinfoEhdr, atHwcap, atPagesz, atPhdr, atBase, atRandom, atExecfn, atPlatform,
		atPhent, atPhnum, atFlags, atEntry, atUID, atEUID, atGID, atEGID, atSecure}
	if len(order) != len(want) {
		t.Fatalf("auxv order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("auxv order %v, want %v", order, want)
		}
	}
	for typ, v := range map[uint64]uint64{atSysinfoEhdr: 0x7f0000001000, atHwcap: 0xbeef, atPhdr: 0x1040, atPhent: 56, atPhnum: 7,
		atBase: 0x2000, atEntry: 0x1100, atUID: 1, atEUID: 2, atGID: 3, atEGID: 4, atSecure: 1, atFlags: 0} {
		if got[typ] != v {
			t.Errorf("aux %d = %#x, want %#x", typ, got[typ], v)
		}
	}
	str := func(addr uint64) string {
		s := st.img[addr-st.sp:]
		return string(s[:bytes.IndexByte(s, 0)])
	}
	if fn := got[atExecfn]; str(fn) != "/bin/prog" || fn+uint64(len("/bin/prog"))+1 != top-8 {
		t.Errorf("AT_EXECFN %#x %q, not 8 bytes below the top", fn, str(fn))
	}
	if p := got[atPlatform]; str(p) != "x86_64" {
		t.Errorf("AT_PLATFORM %q", str(p))
	}
	r := got[atRandom]
	if string(st.img[r-st.sp:r-st.sp+16]) != "0123456789abcdef" || r >= got[atPlatform] {
		t.Errorf("AT_RANDOM at %#x", r)
	}
	// The strings are end to end, argv[0] first, as the kernel copies them.
	le := binary.LittleEndian
	a0 := le.Uint64(st.img[8:])
	if str(a0) != "prog" || !bytes.Equal(st.img[a0-st.sp:got[atExecfn]-st.sp], []byte("prog\x00a b\x00\x00X=1\x00EMPTY=\x00")) {
		t.Errorf("strings not laid out as the kernel lays them")
	}
	// The areas /proc/PID/cmdline and environ read.
	area := func(lo, hi uint64) string { return string(st.img[lo-st.sp : hi-st.sp]) }
	if a := st.args; a[0] != a0 || area(a[0], a[1]) != "prog\x00a b\x00\x00" || a[2] != a[1] ||
		area(a[2], a[3]) != "X=1\x00EMPTY=\x00" || a[3] != got[atExecfn] {
		t.Errorf("argument and environment areas %#x", a)
	}
}

func TestBuildStackEmptyArgv(t *testing.T) {
	in := &stackInput{execfn: "/p", size: 1 << 20, aux: []auxEntry{{atPagesz, 4096}}}
	st, err := buildStack(0x10000000, in)
	if err != nil {
		t.Fatal(err)
	}
	argv, envp, _ := readStack(t, st.img, st.sp, 0x10000000)
	if len(argv) != 1 || argv[0] != "" || len(envp) != 0 {
		t.Errorf("argv %q envp %q, want [\"\"] []", argv, envp)
	}
}

func TestCheckArgs(t *testing.T) {
	cases := []struct {
		name string
		in   stackInput
		err  unix.Errno
	}{
		{"fine", stackInput{argv: []string{"a"}, size: 8 << 20}, 0},
		{"one string too long", stackInput{argv: []string{strings.Repeat("x", maxArgStrlen)}, size: 8 << 20}, unix.E2BIG},
		{"too much in all", stackInput{envp: []string{strings.Repeat("x", 100000), strings.Repeat("y", 100000)}, size: 512 << 10}, unix.E2BIG},
		{"a quarter of a big stack", stackInput{envp: []string{strings.Repeat("x", 100000), strings.Repeat("y", 100000)}, size: 8 << 20}, 0},
		{"NUL", stackInput{argv: []string{"a\x00b"}, size: 8 << 20}, unix.EINVAL},
		{"NUL in execfn", stackInput{execfn: "/bin\x00", size: 8 << 20}, unix.EINVAL},
	}
	for _, c := range cases {
		err := checkArgs(&c.in)
		if c.err == 0 && err != nil || c.err != 0 && !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
}
