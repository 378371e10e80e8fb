package loopdev

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLoopInfoOld: the guest's struct loop_info goes to loop_info64 and
// back as Linux converts them (loop_info64_from_old, loop_info64_to_old):
// the fields carried over, the rest zero, EOVERFLOW where a value does not
// fit the old structure.
func TestLoopInfoOld(t *testing.T) {
	ne, l := binary.NativeEndian, oldLoopInfo
	mk := func(number uint32, dev, ino, rdev, off uint64, flags uint32, name string) []byte {
		b := make([]byte, sizeInfo64)
		ne.PutUint32(b[li64Number:], number)
		ne.PutUint64(b[li64Device:], dev)
		ne.PutUint64(b[li64Inode:], ino)
		ne.PutUint64(b[li64Rdevice:], rdev)
		ne.PutUint64(b[li64Offset:], off)
		ne.PutUint32(b[li64Flags:], flags)
		copy(b[li64FileName:], name)
		return b
	}
	for _, c := range []struct {
		name string
		in   []byte
		want unix.Errno
	}{
		{"plain", mk(3, 0x803, 12, 0x700, 4096, 0x0c, "/tmp/disk.img"), 0},
		{"negative offset", mk(0, 1, 2, 3, ^uint64(0)-511, 0, "x"), 0},
		{"offset above int", mk(0, 1, 2, 3, 1<<31, 0, "x"), unix.EOVERFLOW},
		{"offset above 32 bits", mk(0, 1, 2, 3, 1<<33, 0, "x"), unix.EOVERFLOW},
	} {
		old, en := ToOld(c.in)
		if en != c.want {
			t.Errorf("%s: errno %v, want %v", c.name, en, c.want)
			continue
		}
		if en != 0 {
			continue
		}
		if len(old) != l.size {
			t.Errorf("%s: %d bytes, want %d", c.name, len(old), l.size)
		}
		back := FromOld(old)
		// lo_sizelimit, the crypto fields and lo_init are not carried.
		if string(back) != string(c.in) {
			t.Errorf("%s: round trip\n got %x\nwant %x", c.name, back, c.in)
		}
	}
	// A device number above 32 bits fits only where old_dev_t is long.
	_, en := ToOld(mk(0, 1<<40, 2, 3, 0, 0, "x"))
	if want := map[int]unix.Errno{8: 0, 4: unix.EOVERFLOW}[l.devSize]; en != want {
		t.Errorf("device 1<<40: errno %v, want %v (old_dev_t of %d bytes)", en, want, l.devSize)
	}
	// The layout ends where the architecture's struct does: lo_name,
	// lo_encrypt_key[32], lo_init[2] (8-aligned), reserved[4], padding.
	end := (l.name + loNameSize + 32 + 7) &^ 7
	if got := end + 16 + 8; got != l.size {
		t.Errorf("layout: struct size %d, fields end at %d", l.size, got)
	}
}
