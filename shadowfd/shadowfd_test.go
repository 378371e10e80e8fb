package shadowfd

import (
	"reflect"
	"testing"

	"github.com/kbox-project/kbox/lkl"

	"golang.org/x/sys/unix"
)

// The pieces of write-back that need no LKL: data extents of a host file
// with holes, the extents within a chunk, chunk sums.

func TestDataExtents(t *testing.T) {
	fd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("no memfd: %v", err)
	}
	defer unix.Close(fd)
	page := make([]byte, 4096)
	for i := range page {
		page[i] = 'x'
	}
	// data at [0,4K), [64K,72K), [1M,1M+4K); size 2M
	for _, off := range []int64{0, 64 << 10, 68 << 10, 1 << 20} {
		if _, err := unix.Pwrite(fd, page, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Ftruncate(fd, 2<<20); err != nil {
		t.Fatal(err)
	}
	got, err := dataExtents(fd, 2<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []extent{{0, 4096}, {64 << 10, 72 << 10}, {1 << 20, 1<<20 + 4096}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("extents %v, want %v", got, want)
	}
	// Cut at the size.
	got, _ = dataExtents(fd, 66<<10, nil)
	if want := []extent{{0, 4096}, {64 << 10, 66 << 10}}; !reflect.DeepEqual(got, want) {
		t.Errorf("extents up to 66K %v, want %v", got, want)
	}
}

func TestWithin(t *testing.T) {
	exts := []extent{{0, 100}, {200, 70000}, {131072, 131073}}
	cases := []struct {
		a, b int64
		want []extent
	}{
		{0, 65536, []extent{{0, 100}, {200, 65536}}},
		{65536, 131072, []extent{{65536, 70000}}},
		{131072, 196608, []extent{{131072, 131073}}},
		{196608, 262144, nil},
	}
	i := 0
	var buf []extent
	for _, c := range cases {
		buf = within(exts, &i, c.a, c.b, buf)
		if len(buf) == 0 && len(c.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(buf, c.want) {
			t.Errorf("within [%d,%d): %v, want %v", c.a, c.b, buf, c.want)
		}
	}
}

func TestChunkSum(t *testing.T) {
	a := make([]byte, 100)
	sum := chunkSum(a, []extent{{0, 100}})
	if sum == holeSum || sum&1 == 0 {
		t.Errorf("a data chunk's sum %#x must not be the hole sum", sum)
	}
	// Zeros written and a hole read alike: the ranges tell them apart.
	if chunkSum(a, []extent{{0, 50}}) == sum {
		t.Error("same data, other data ranges: same sum")
	}
	b := append([]byte(nil), a...)
	b[99] = 1
	if chunkSum(b, []extent{{0, 100}}) == sum {
		t.Error("other data, same sum")
	}
}

// TestWholeChunkSums: fill's sums of a file that is data throughout,
// taken from each whole chunk as it is copied (chunkSum of the chunk with
// its own range), are the sums contentSums reads back from the content,
// zeros included, up to a last short chunk.
func TestWholeChunkSums(t *testing.T) {
	fd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("no memfd: %v", err)
	}
	defer unix.Close(fd)
	size := int64(3*chunkSize + 1234)
	data := make([]byte, size)
	for i := range data[:chunkSize+7] {
		data[i] = byte(i * 7) // the rest stays zeros, written as data
	}
	var want []uint64
	for o := int64(0); o < size; o += chunkSize {
		b := min(o+chunkSize, size)
		if _, err := unix.Pwrite(fd, data[o:b], o); err != nil {
			t.Fatal(err)
		}
		want = append(want, chunkSum(data[o:b], []extent{{o, b}}))
	}
	m := &Manager{}
	got, err := m.contentSums(&Node{content: fd}, size, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sums read back %x, the copy's %x", got, want)
	}
}

func TestTrimSums(t *testing.T) {
	n := &Node{sums: []uint64{1, 2, 3, 4}}
	trimSums(n, 2*chunkSize+10)
	if want := []uint64{1, 2, ^uint64(0)}; !reflect.DeepEqual(n.sums, want) {
		t.Errorf("sums %v, want %v", n.sums, want)
	}
	trimSums(n, chunkSize)
	if want := []uint64{1}; !reflect.DeepEqual(n.sums, want) {
		t.Errorf("sums %v, want %v", n.sums, want)
	}
}

func TestParentDir(t *testing.T) {
	for p, want := range map[string]string{"/a/b": "/a", "/a": "/", "/": "/", "/a/b/c": "/a/b"} {
		if got := parentDir(p); got != want {
			t.Errorf("parentDir(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestHostFlags(t *testing.T) {
	in := unix.O_WRONLY | unix.O_APPEND | unix.O_CREAT | unix.O_TRUNC | unix.O_EXCL | unix.O_CLOEXEC | unix.O_NONBLOCK
	if got, want := hostFlags(in), unix.O_WRONLY|unix.O_APPEND|unix.O_NONBLOCK; got != want {
		t.Errorf("hostFlags %#o, want %#o", got, want)
	}
}

func TestNodeLimits(t *testing.T) {
	for _, c := range []struct {
		hard       uint64
		maxN, keep int64
	}{{0, 256, 128}, {1024, 256, 128}, {4096, 768, 384}, {20000, 4096, 2048}, {1 << 20, 4096, 2048}, {^uint64(0), 4096, 2048}} {
		if m, k := nodeLimits(c.hard); m != c.maxN || k != c.keep {
			t.Errorf("nodeLimits(%d) = %d, %d; want %d, %d", c.hard, m, k, c.maxN, c.keep)
		}
	}
}

func TestRelatimeSkips(t *testing.T) {
	const day = 24 * 60 * 60
	now := unix.Timespec{Sec: 10 * day}
	at := func(a, m, c int64) *lkl.Stat64 {
		return &lkl.Stat64{Atime: a, Mtime: m, Ctime: c}
	}
	for _, c := range []struct {
		name string
		st   *lkl.Stat64
		skip bool
	}{
		{"read since its last change", at(now.Sec-60, now.Sec-120, now.Sec-120), true},
		{"never read since written", at(now.Sec-120, now.Sec-60, now.Sec-60), false},
		{"times equal (a new file)", at(now.Sec-60, now.Sec-60, now.Sec-60), false},
		{"changed (chmod) since read", at(now.Sec-60, now.Sec-120, now.Sec-30), false},
		{"read a day ago", at(now.Sec-day, now.Sec-2*day, now.Sec-2*day), false},
	} {
		if got := relatimeSkips(c.st, now); got != c.skip {
			t.Errorf("%s: relatimeSkips %v, want %v", c.name, got, c.skip)
		}
	}
}
