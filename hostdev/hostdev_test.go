package hostdev

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestShown(t *testing.T) {
	var file unix.Stat_t
	if err := unix.Stat(os.Args[0], &file); err != nil {
		t.Fatal(err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	var pipe unix.Stat_t
	if err := unix.Fstat(p[0], &pipe); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		dev      uint64
		want     uint64
		anything bool // only that it is no device of LKL's
	}{
		{"a virtio disk", unix.Mkdev(254, 0), unix.Mkdev(2302, 0), false},
		{"a disk partition", unix.Mkdev(8, 1), unix.Mkdev(2056, 1), false},
		{"a high major flips back", unix.Mkdev(2302, 0), unix.Mkdev(254, 0), false},
		{"a pipe keeps its device", pipe.Dev, pipe.Dev, false},
		{"a host file's device", file.Dev, 0, true},
	} {
		got := Shown(c.dev)
		switch {
		case c.anything && (unix.Major(got) < hostMajorFlip || got == c.dev):
			t.Errorf("%s: %d:%d shown as %d:%d", c.name, unix.Major(c.dev), unix.Minor(c.dev), unix.Major(got), unix.Minor(got))
		case !c.anything && got != c.want:
			t.Errorf("%s: %d:%d shown as %d:%d, want %d:%d", c.name, unix.Major(c.dev), unix.Minor(c.dev),
				unix.Major(got), unix.Minor(got), unix.Major(c.want), unix.Minor(c.want))
		}
	}
	sx := unix.Statx_t{Dev_major: 254, Dev_minor: 16}
	Statx(&sx)
	st := unix.Stat_t{Dev: unix.Mkdev(254, 16)}
	Stat(&st)
	if sx.Dev_major != 2302 || sx.Dev_minor != 16 || st.Dev != unix.Mkdev(sx.Dev_major, sx.Dev_minor) {
		t.Errorf("statx %d:%d, stat %d:%d: want 2302:16 in both", sx.Dev_major, sx.Dev_minor, unix.Major(st.Dev), unix.Minor(st.Dev))
	}
}

func TestShownAllocates(t *testing.T) {
	Shown(0) // the first call finds the internal devices
	if n := testing.AllocsPerRun(100, func() { Shown(unix.Mkdev(254, 0)) }); n != 0 {
		t.Errorf("Shown allocates %v times", n)
	}
}
