package elfload

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"strings"
	"testing"
)

// minimalELF builds a 64-bit ELF header with one PT_INTERP header.
func minimalELF(interp string) []byte {
	b := make([]byte, 256)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS], b[elf.EI_DATA] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB)
	le := binary.LittleEndian
	le.PutUint16(b[16:], uint16(elf.ET_DYN))
	le.PutUint16(b[18:], uint16(elf.EM_X86_64))
	le.PutUint64(b[32:], 64)
	le.PutUint16(b[54:], 56)
	le.PutUint16(b[56:], 1)
	if interp != "" {
		le.PutUint32(b[64:], uint32(elf.PT_INTERP))
		le.PutUint64(b[64+8:], 160)
		le.PutUint64(b[64+32:], uint64(len(interp)+1))
		copy(b[160:], interp)
	}
	return b
}

func TestInspect(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		kind Kind
		err  string
	}{
		{"dynamic", minimalELF("/lib64/ld-linux-x86-64.so.2"), Dynamic, ""},
		{"static", minimalELF(""), Static, ""},
		{"script", []byte("#!/bin/sh -e\necho hi\n"), Script, ""},
		{"script tab", []byte("#! /usr/bin/env\tpython3\n"), Script, ""},
		{"garbage", []byte("hello world, this is not a program at all............................"), 0, "not an executable"},
		{"empty shebang", []byte("#!\n"), 0, "empty"},
		{"truncated elf", minimalELF("/x")[:40], 0, "not an executable"},
		{"wrong machine", func() []byte { b := minimalELF(""); b[18] = 183; return b }(), 0, "machine"},
		{"phdrs outside", func() []byte { b := minimalELF(""); binary.LittleEndian.PutUint64(b[32:], 1<<40); return b }(), 0, "outside"},
	}
	for _, c := range cases {
		info, err := Inspect(c.b, elf.EM_X86_64)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || info.Kind != c.kind {
			t.Errorf("%s: %+v %v", c.name, info, err)
		}
	}
	info, _ := Inspect([]byte("#!/bin/sh -e\n"), elf.EM_X86_64)
	if info.ScriptInterp != "/bin/sh" || info.ScriptArg != "-e" {
		t.Errorf("shebang parsed as %+v", info)
	}
}

func TestPatchInterp(t *testing.T) {
	b := minimalELF("/lib64/ld-linux-x86-64.so.2")
	info, err := Inspect(b, elf.EM_X86_64)
	if err != nil {
		t.Fatal(err)
	}
	if err := PatchInterp(b, info, "/proc/self/fd/5"); err != nil {
		t.Fatal(err)
	}
	again, _ := Inspect(b, elf.EM_X86_64)
	if again.Interp != "/proc/self/fd/5" {
		t.Errorf("patched interp %q", again.Interp)
	}
	if err := PatchInterp(b, info, strings.Repeat("x", 100)); err == nil {
		t.Error("oversized interp accepted")
	}
}

func TestInspectHostBinary(t *testing.T) {
	b, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh")
	}
	if _, err := Inspect(b, elf.EM_X86_64); err != nil && !strings.Contains(err.Error(), "machine") {
		t.Errorf("host /bin/sh: %v", err)
	}
}

func FuzzInspect(f *testing.F) {
	f.Add(minimalELF("/lib/ld.so"))
	f.Add([]byte("#!/bin/sh\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := Inspect(b, elf.EM_X86_64)
		if err == nil && info.Kind == Dynamic {
			if info.InterpOff+info.InterpLen > len(b) {
				t.Fatalf("interp slot outside buffer")
			}
			PatchInterp(b, info, "/proc/self/fd/9")
		}
	})
}
