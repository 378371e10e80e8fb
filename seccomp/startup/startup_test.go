package startup

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProgram: the embedded program is in a memfd sealed against every
// change, Command runs it as fd 5 (it closes that fd and, run without
// kbox's environment, says what it is and exits 2), and without it
// Command runs kbox itself, by its path.
func TestProgram(t *testing.T) {
	if Size() == 0 {
		self, _ := os.Executable()
		c := &exec.Cmd{ExtraFiles: []*os.File{nil, nil}}
		if Command(c) || c.Path != self || len(c.ExtraFiles) != 2 {
			t.Fatalf("without the program: Command ran %q with %d extra files", c.Path, len(c.ExtraFiles))
		}
		t.Skip("SKIP: built without the start-up program (make builds it with musl-gcc)")
	}
	p := Program()
	if p == nil {
		t.Fatal("Program: nil with the program embedded")
	}
	seals, err := unix.FcntlInt(p.Fd(), unix.F_GET_SEALS, 0)
	want := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if err != nil || seals&want != want {
		t.Errorf("seals %#x (%v), want %#x", seals, err, want)
	}
	if _, err := unix.Pwrite(int(p.Fd()), []byte{0}, 0); err == nil {
		t.Error("the program's memfd took a write")
	}
	if st, err := p.Stat(); err != nil || st.Size() != int64(Size()) {
		t.Errorf("memfd size %v (%v), want %d", st, err, Size())
	}

	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	c := &exec.Cmd{Args: []string{"kbox-guest"}, ExtraFiles: []*os.File{null, null}}
	if !Command(c) || c.Path != "/proc/self/fd/5" || len(c.ExtraFiles) != 3 {
		t.Fatalf("Command ran %q with %d extra files", c.Path, len(c.ExtraFiles))
	}
	var stderr strings.Builder
	c.Stderr = &stderr
	err = c.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "start-up program") {
		t.Errorf("the program run alone: %v, stderr %q; want exit status 2 and what it is", err, stderr.String())
	}

	self, _ := os.Executable()
	c = &exec.Cmd{ExtraFiles: []*os.File{null}}
	if Command(c) || c.Path != self {
		t.Errorf("with one extra file, Command ran %q: the program's fd would not be 5", c.Path)
	}
}

func TestNative(t *testing.T) {
	header := func(machine elf.Machine) []byte {
		h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT), Ehsize: 64}
		copy(h.Ident[:], elf.ELFMAG)
		h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
		var b bytes.Buffer
		binary.Write(&b, binary.LittleEndian, &h)
		return b.Bytes()
	}
	mine, other := elf.EM_X86_64, elf.EM_AARCH64
	if runtime.GOARCH == "arm64" {
		mine, other = other, mine
	}
	for _, c := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"this machine's", header(mine), runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"},
		{"another machine's", header(other), false},
		{"empty", nil, false},
		{"short", header(mine)[:16], false},
		{"not ELF", append([]byte("#!/bin/sh\n"), make([]byte, 60)...), false},
	} {
		if got := native(c.b); got != c.want {
			t.Errorf("%s: native = %v, want %v", c.name, got, c.want)
		}
	}
}
