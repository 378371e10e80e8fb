package lkl

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestStat64Layout(t *testing.T) {
	var s Stat64
	cases := []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(stat)", unsafe.Sizeof(s), SizeofStat64},
		{"st_dev", unsafe.Offsetof(s.Dev), 0},
		{"st_ino", unsafe.Offsetof(s.Ino), 8},
		{"st_mode", unsafe.Offsetof(s.Mode), 16},
		{"st_nlink", unsafe.Offsetof(s.Nlink), 20},
		{"st_uid", unsafe.Offsetof(s.Uid), 24},
		{"st_gid", unsafe.Offsetof(s.Gid), 28},
		{"st_rdev", unsafe.Offsetof(s.Rdev), 32},
		{"st_size", unsafe.Offsetof(s.Size), 48},
		{"st_blksize", unsafe.Offsetof(s.Blksize), 56},
		{"st_blocks", unsafe.Offsetof(s.Blocks), 64},
		{"st_atime", unsafe.Offsetof(s.Atime), 72},
		{"st_mtime", unsafe.Offsetof(s.Mtime), 88},
		{"st_mtime_nsec", unsafe.Offsetof(s.MtimeNsec), 96},
		{"st_ctime_nsec", unsafe.Offsetof(s.CtimeNsec), 112},
		{"sizeof(statx)", unsafe.Sizeof(unix.Statx_t{}), SizeofStatx},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestStatToHost(t *testing.T) {
	s := Stat64{Dev: 0x801, Ino: 42, Mode: 0o100644, Nlink: 3, Uid: 1000, Gid: 100, Rdev: 7,
		Size: 12345, Blksize: 4096, Blocks: 24, Atime: 1, AtimeNsec: 2, Mtime: 3, MtimeNsec: 4, Ctime: 5, CtimeNsec: 6}
	var h unix.Stat_t
	s.ToHost(&h)
	if h.Dev != 0x801 || h.Ino != 42 || h.Mode != 0o100644 || uint64(h.Nlink) != 3 || h.Uid != 1000 || h.Gid != 100 ||
		h.Rdev != 7 || h.Size != 12345 || int64(h.Blksize) != 4096 || h.Blocks != 24 ||
		h.Atim != (unix.Timespec{Sec: 1, Nsec: 2}) || h.Mtim != (unix.Timespec{Sec: 3, Nsec: 4}) || h.Ctim != (unix.Timespec{Sec: 5, Nsec: 6}) {
		t.Errorf("converted %+v from %+v", h, s)
	}
}

func TestOpenFlagsArm64RoundTrip(t *testing.T) {
	cases := []struct{ arm64, generic uint32 }{
		{0o40000, 0o200000},  // O_DIRECTORY
		{0o100000, 0o400000}, // O_NOFOLLOW
		{0o200000, 0o40000},  // O_DIRECT
		{0o400000, 0o100000}, // O_LARGEFILE
		{0o2 | 0o100 | 0o2000000, 0o2 | 0o100 | 0o2000000}, // O_RDWR|O_CREAT|O_CLOEXEC unchanged
	}
	for _, c := range cases {
		if g := OpenFlagsArm64ToLKL(c.arm64); g != c.generic {
			t.Errorf("arm64 %#o -> %#o, want %#o", c.arm64, g, c.generic)
		}
		if a := OpenFlagsLKLToArm64(c.generic); a != c.arm64 {
			t.Errorf("generic %#o -> %#o, want %#o", c.generic, a, c.arm64)
		}
	}
}

func dirent(ino uint64, typ byte, name string) []byte {
	rec := (direntHeader + len(name) + 1 + 7) &^ 7
	b := make([]byte, rec)
	binary.LittleEndian.PutUint64(b[0:], ino)
	binary.LittleEndian.PutUint64(b[8:], uint64(rec))
	binary.LittleEndian.PutUint16(b[16:], uint16(rec))
	b[18] = typ
	copy(b[direntHeader:], name)
	return b
}

func TestWalkDirents(t *testing.T) {
	buf := append(dirent(2, 4, "."), dirent(11, 8, "hostname")...)
	var got []Dirent
	if err := WalkDirents(buf, func(d Dirent) bool { got = append(got, d); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Name != "hostname" || got[1].Ino != 11 || got[1].Type != 8 {
		t.Errorf("decoded %+v", got)
	}
	for _, bad := range [][]byte{buf[:10], append(dirent(1, 1, "x")[:16], 0xff, 0xff, 0)} {
		if err := WalkDirents(bad, func(Dirent) bool { return true }); err != ErrBadDirent {
			t.Errorf("malformed buffer %x: err %v", bad, err)
		}
	}
}

func FuzzWalkDirents(f *testing.F) {
	f.Add(dirent(2, 4, "etc"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		WalkDirents(b, func(d Dirent) bool {
			if int(d.Reclen) < direntHeader+1 || len(d.Name) > int(d.Reclen)-direntHeader {
				t.Fatalf("bad record accepted: %+v", d)
			}
			total += int(d.Reclen)
			return true
		})
		if total > len(b) {
			t.Fatalf("walked %d bytes of %d", total, len(b))
		}
	})
}

func TestCommandLine(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "mem=32M loglevel=7 stack_depot_disable=on pty.legacy_count=0"},
		{Config{MemMB: 64, Verbose: true}, "mem=64M loglevel=7 stack_depot_disable=on pty.legacy_count=0"},
		{Config{Cmdline: "mem=128M lpj=1"}, "loglevel=7 stack_depot_disable=on pty.legacy_count=0 mem=128M lpj=1"},
		{Config{Cmdline: "loglevel=3"}, "mem=32M stack_depot_disable=on pty.legacy_count=0 loglevel=3"},
		{Config{Cmdline: "pty.legacy_count=4 stack_depot_disable=off"}, "mem=32M loglevel=7 pty.legacy_count=4 stack_depot_disable=off"},
	}
	for _, c := range cases {
		if got := c.cfg.CommandLine(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.cfg, got, c.want)
		}
	}
}

// The arm64 open-flag conversions are inverse bijections: every flag word
// survives the round trip both ways, and the bits outside the four that
// move are left alone.
func FuzzOpenFlagsArm64(f *testing.F) {
	for _, s := range []uint32{0, 0o40000, 0o100000, 0o200000, 0o400000, 0o2000000 | 0o1000, 0xffffffff} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, fl uint32) {
		if got := OpenFlagsLKLToArm64(OpenFlagsArm64ToLKL(fl)); got != fl {
			t.Errorf("arm64 %#o -> LKL -> arm64 %#o", fl, got)
		}
		if got := OpenFlagsArm64ToLKL(OpenFlagsLKLToArm64(fl)); got != fl {
			t.Errorf("LKL %#o -> arm64 -> LKL %#o", fl, got)
		}
		const moved = remapMask | arm64ODirectory | arm64ONofollow | arm64ODirect | arm64OLargefile
		if OpenFlagsArm64ToLKL(fl)&^moved != fl&^moved {
			t.Errorf("%#o: bits outside the remapped ones changed", fl)
		}
	})
}
