package scratchfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// The expected figures are worked out by hand from the layout: a group
// with a superblock copy has 1 superblock block + GDTBlocks + 2 bitmaps +
// the inode table; group 0 also holds 7 directory blocks.
func TestGeometry(t *testing.T) {
	cases := []struct {
		name                        string
		size                        int64
		blocks, groups, ipg, itb    uint32
		gdt, freeBlocks, freeInodes uint32
	}{
		{"1MiB", 1 * mib, 256, 1, 64, 4, 1, 256 - 8 - 7, 64 - 13},
		{"64MiB", 64 * mib, 16384, 1, 4096, 256, 1, 16384 - 260 - 7, 4096 - 13},
		// Groups 0, 1, 3, 5, 7 have copies (516 blocks of metadata), 2, 4, 6 not (514).
		{"1GiB", 1 * gib, 262144, 8, 8192, 512, 1, 262144 - 5*516 - 3*514 - 7, 65536 - 13},
		// Copies in 0, 1, 3, 5, 7, 9, 25, 27, 49.
		{"8GiB", 8 * gib, 2097152, 64, 8192, 512, 1, 2097152 - 9*516 - 55*514 - 7, 524288 - 13},
		// 51201 blocks: a full group and a tail of 18433; 12800 inodes over 2 groups.
		{"odd 200MiB+5000", 200*mib + 5000, 51201, 2, 6400, 400, 1, (32768 - 404 - 7) + (18433 - 404), 12800 - 13},
		// A tail of 100 blocks cannot hold its 458 blocks of metadata: dropped.
		{"tail dropped", 1*gib + 100*BlockSize, 262144, 8, 7296, 456, 1, 262144 - 5*460 - 3*458 - 7, 8*7296 - 13},
		// 160 groups: the descriptors take 2 blocks.
		{"5GiB", 5 * gib, 1310720, 40, 8192, 512, 1, 1310720 - 8*516 - 32*514 - 7, 40*8192 - 13},
		{"20GiB", 20 * gib, 5242880, 160, 8192, 512, 2, 5242880 - 11*517 - 149*514 - 7, 160*8192 - 13},
	}
	for _, c := range cases {
		g, err := NewGeometry(c.size)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		want := Geometry{Blocks: c.blocks, Groups: c.groups, InodesPerGroup: c.ipg, Inodes: c.ipg * c.groups,
			InodeTableBlocks: c.itb, GDTBlocks: c.gdt, FreeBlocks: c.freeBlocks, FreeInodes: c.freeInodes,
			Overhead: c.blocks - c.freeBlocks - 7}
		if g != want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, g, want)
		}
	}
}

func TestGeometryRefused(t *testing.T) {
	for _, size := range []int64{0, -1, 512 * kib, MinSize - 1, MaxSize + 1, 1 << 62} {
		if g, err := NewGeometry(size); !errors.Is(err, ErrSize) {
			t.Errorf("NewGeometry(%d) = %+v, %v; want ErrSize", size, g, err)
		}
	}
}

func TestHasSuper(t *testing.T) {
	var got []uint32
	for i := uint32(0); i < 400; i++ {
		if HasSuper(i) {
			got = append(got, i)
		}
	}
	want := []uint32{0, 1, 3, 5, 7, 9, 25, 27, 49, 81, 125, 243, 343}
	if len(got) != len(want) {
		t.Fatalf("groups with copies %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("groups with copies %v, want %v", got, want)
		}
	}
}

func TestDefaultSize(t *testing.T) {
	cases := []struct {
		avail uint64
		want  int64
	}{
		{0, DefaultMin},
		{100 * mib, DefaultMin},
		{1 * gib, 512 * mib},
		{3*gib + 12345, (3*gib + 12345) / 2 &^ (BlockSize - 1)},
		{16 * gib, 8 * gib},
		{1 << 50, 8 * gib},
	}
	for _, c := range cases {
		if got := DefaultSize(c.avail); got != c.want {
			t.Errorf("DefaultSize(%d) = %d, want %d", c.avail, got, c.want)
		}
	}
}

// TestFormatFsck formats sparse files and checks each with `e2fsck -fn`
// (read-only, forced full check), then that the formatter wrote only a
// little: the file stays sparse.
func TestFormatFsck(t *testing.T) {
	fsck, err := exec.LookPath("e2fsck")
	if err != nil {
		if fsck, err = exec.LookPath("/usr/sbin/e2fsck"); err != nil {
			t.Skip("SKIP (needs e2fsck from e2fsprogs): cannot check the formatter's output")
		}
	}
	dir := t.TempDir()
	type fs struct {
		size    int64
		journal bool
	}
	var sizes []fs
	for _, size := range []int64{1 * mib, 64 * mib, 1 * gib, 8 * gib, 200*mib + 5000, 1*gib + 100*BlockSize, 20 * gib} {
		sizes = append(sizes, fs{size, false})
	}
	for _, size := range []int64{1 * mib, 16 * mib, 64 * mib, 1*gib + 100*BlockSize, 20 * gib} {
		sizes = append(sizes, fs{size, true})
	}
	for _, c := range sizes {
		size := c.size
		f, err := os.Create(filepath.Join(dir, "fs"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		g, err := NewGeometry(size)
		if err != nil {
			t.Fatal(err)
		}
		if c.journal {
			g = g.WithJournal()
			if size >= 8*mib && g.Journal == 0 {
				t.Errorf("size %d: no journal", size)
			}
		}
		p := Params{Now: Now(), Label: "kbox-test"}
		copy(p.UUID[:], "0123456789abcdef")
		copy(p.HashSeed[:], "fedcba9876543210")
		if err := Format(f, g, p); err != nil {
			t.Fatal(err)
		}
		f.Close()
		out, err := exec.Command(fsck, "-fn", f.Name()).CombinedOutput()
		if bad := fsckProblems(string(out)); err != nil || len(bad) > 0 {
			t.Errorf("size %d, journal %d: e2fsck -fn: %v, problems %q\n%s", size, g.Journal, err, bad, out)
			continue
		}
		if g.Journal > 0 {
			info, _ := exec.Command("dumpe2fs", "-h", f.Name()).CombinedOutput()
			if want := fmt.Sprintf("Total journal blocks:     %d\n", g.Journal); !strings.Contains(string(info), "has_journal") || !strings.Contains(string(info), want) {
				t.Errorf("size %d: dumpe2fs does not show a %d-block journal:\n%s", size, g.Journal, info)
			}
		}
		want := fmt.Sprintf(": 13/%d files (0.0%% non-contiguous), %d/%d blocks", g.Inodes, g.Blocks-g.FreeBlocks, g.Blocks)
		if !strings.Contains(string(out), want) {
			t.Errorf("size %d: e2fsck's summary lacks %q:\n%s", size, want, out)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(f.Name(), &st); err != nil {
			t.Fatal(err)
		}
		if written := st.Blocks * 512; written > 1*mib {
			t.Errorf("size %d: %d bytes allocated in the file, want at most 1 MiB (sparse)", size, written)
		}
		os.Remove(f.Name())
	}

	// The check can fail: a wrong descriptor checksum (group 0's, at the
	// end of its 32 bytes in block 1) is an error to e2fsck.
	name := filepath.Join(dir, "bad")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := NewGeometry(64 * mib)
	f.Truncate(64 * mib)
	if err := Format(f, g, Params{Now: Now(), UUID: [16]byte{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0, 0}, BlockSize+0x1E)
	f.Close()
	out, _ := exec.Command(fsck, "-fn", name).CombinedOutput()
	if bad := fsckProblems(string(out)); len(bad) == 0 || !strings.Contains(bad[0], "checksum") {
		t.Errorf("a bad descriptor checksum goes unnoticed: problems %q\n%s", bad, out)
	}
}

// fsckProblems returns the lines of `e2fsck -fn` output other than its
// banner, the five pass headings and the summary. Some problems (a bad
// group 0 descriptor checksum, say) are reported with exit status 0.
func fsckProblems(out string) []string {
	var bad []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "", strings.HasPrefix(l, "e2fsck "), strings.HasPrefix(l, "Pass "),
			strings.Contains(l, " files (") && strings.HasSuffix(l, " blocks"):
		default:
			bad = append(bad, l)
		}
	}
	return bad
}
