package rootfs

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func superblock(blocks uint32, logBlock uint32, magic uint16) []byte {
	sb := make([]byte, 1024)
	le := binary.LittleEndian
	le.PutUint32(sb[0x0:], 128)
	le.PutUint32(sb[0x4:], blocks)
	le.PutUint32(sb[0x18:], logBlock)
	le.PutUint16(sb[0x38:], magic)
	return sb
}

func TestParseExtSuperblock(t *testing.T) {
	cases := []struct {
		name string
		sb   []byte
		size int64
		want string
	}{
		{"ok", superblock(1024, 2, extMagic), 4 << 20, ""},
		{"no magic", superblock(1024, 2, 0x1234), 4 << 20, "not an ext2/3/4"},
		{"truncated", superblock(1024, 2, extMagic), 1 << 20, "truncated"},
		{"huge block", superblock(1024, 30, extMagic), 4 << 20, "corrupt superblock"},
		{"zero blocks", superblock(0, 2, extMagic), 4 << 20, "zero inodes or blocks"},
		{"short", make([]byte, 10), 4 << 20, "short"},
	}
	for _, c := range cases {
		err := ParseExtSuperblock(c.sb, c.size)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
}

func FuzzParseExtSuperblock(f *testing.F) {
	f.Add(superblock(1024, 2, extMagic), int64(4<<20))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, sb []byte, size int64) {
		ParseExtSuperblock(sb, size) // must never panic
	})
}

func writeImage(t *testing.T, data []byte) string {
	p := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenImageErrors(t *testing.T) {
	good := make([]byte, 4<<20)
	copy(good[1024:], superblock(1024, 2, extMagic))
	p := writeImage(t, good)
	img, err := OpenImage(p, "ext4", 0, false)
	if err != nil {
		t.Fatalf("good image: %v", err)
	}
	// A second read-write open, and a read-only one, are refused while the
	// first holds the image.
	for _, ro := range []bool{false, true} {
		if _, err := OpenImage(p, "ext4", 0, ro); !errors.Is(err, ErrImageBusy) {
			t.Errorf("second open (ro=%v): %v, want ErrImageBusy", ro, err)
		}
	}
	img.Close()
	// Two readers may share it.
	a, err1 := OpenImage(p, "ext4", 0, true)
	b, err2 := OpenImage(p, "ext4", 0, true)
	if err1 != nil || err2 != nil {
		t.Errorf("two readers: %v %v", err1, err2)
	}
	a.Close()
	b.Close()

	if _, err := OpenImage(filepath.Join(t.TempDir(), "none"), "ext4", 0, false); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing image: %v", err)
	}
	if _, err := OpenImage(writeImage(t, []byte("tiny")), "ext4", 0, false); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Errorf("tiny image: %v", err)
	}
	// Another fs type is not checked here; the kernel decides.
	if img, err := OpenImage(writeImage(t, make([]byte, 8192)), "vfat", 0, true); err != nil {
		t.Errorf("vfat image rejected early: %v", err)
	} else {
		img.Close()
	}
}

// TestImageMountOptions: an ext4 image gets kbox's defaults first, so
// that the user's options (-m) come after them and win; other types get
// only the user's.
func TestImageMountOptions(t *testing.T) {
	for _, c := range []struct {
		fstype string
		user   []string
		want   string
	}{
		{"ext4", nil, "no_prefetch_block_bitmaps,noinit_itable,lazytime"},
		{"ext4", []string{"init_itable", "nolazytime"}, "no_prefetch_block_bitmaps,noinit_itable,lazytime,init_itable,nolazytime"},
		{"ext2", []string{"ro"}, "ro"},
		{"vfat", nil, ""},
	} {
		got := strings.Join(imageMountOptions(c.fstype, c.user), ",")
		if got != c.want {
			t.Errorf("%s %q: %q, want %q", c.fstype, c.user, got, c.want)
		}
	}
	// The defaults are not changed by a call's append.
	imageMountOptions("ext4", []string{"x"})
	if strings.Join(ext4Defaults, ",") != "no_prefetch_block_bitmaps,noinit_itable,lazytime" {
		t.Errorf("ext4Defaults changed: %q", ext4Defaults)
	}
}
