package scratchfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestDirs(t *testing.T) {
	t.Setenv("TMPDIR", "/somewhere")
	if got := Dirs(); !reflect.DeepEqual(got, []string{"/somewhere"}) {
		t.Errorf("TMPDIR set: %q", got)
	}
	t.Setenv("TMPDIR", "")
	if got := Dirs(); !reflect.DeepEqual(got, []string{"/var/tmp", "/tmp"}) {
		t.Errorf("TMPDIR empty: %q", got)
	}
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("%s holds %s", dir, e.Name())
	}
}

// TestCreate makes a backing file in the first usable directory: it has no
// name there, has the size asked for, and passes e2fsck.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	b, err := Create([]string{missing, dir}, 64*mib)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	assertEmpty(t, dir)
	if b.Dir != dir || b.Size != 64*mib || b.Geometry.Blocks != 16384 || b.Avail <= 0 {
		t.Errorf("backing in %s, %d bytes (%d free), geometry %+v", b.Dir, b.Size, b.Avail, b.Geometry)
	}
	fi, err := b.File.Stat()
	if err != nil || fi.Size() != 64*mib {
		t.Errorf("file size %v, %v", fi, err)
	}
	link, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", b.File.Fd()))
	if !strings.HasPrefix(link, dir+"/") || !strings.HasSuffix(link, "(deleted)") {
		t.Errorf("the file is %q, want an unnamed file in %s", link, dir)
	}
	if fsck, err := exec.LookPath("e2fsck"); err == nil {
		out, err := exec.Command(fsck, "-fn", fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), b.File.Fd())).CombinedOutput()
		if bad := fsckProblems(string(out)); err != nil || len(bad) > 0 {
			t.Errorf("e2fsck -fn: %v, problems %q\n%s", err, bad, out)
		}
	}
	if err := b.Close(); err != nil || b.File != nil {
		t.Errorf("close: %v", err)
	}
	b.Close() // twice is fine
}

// TestCreateDefaultSize: with no size, half of the directory's free space,
// between 64 MiB and 8 GiB.
func TestCreateDefaultSize(t *testing.T) {
	dir := t.TempDir()
	b, err := Create([]string{dir}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	want := DefaultSize(st.Bavail * uint64(st.Bsize))
	if b.Size < want*99/100 || b.Size > want*101/100 || b.Size%BlockSize != 0 {
		t.Errorf("default size %d, want about %d", b.Size, want)
	}
}

func TestCreateErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if _, err := Create([]string{missing}, 64*mib); err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing directory: %v", err)
	}
	if _, err := Create([]string{dir}, 100); !errors.Is(err, ErrSize) {
		t.Errorf("tiny size: %v", err)
	}
	if _, err := Create(nil, 64*mib); err == nil {
		t.Error("no directories: no error")
	}
	assertEmpty(t, dir)
}

// TestOpenUnlinked: the fallback for filesystems without O_TMPFILE leaves
// no name behind either.
func TestOpenUnlinked(t *testing.T) {
	dir := t.TempDir()
	f, unlinked, err := openUnlinked(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	assertEmpty(t, dir)
	if !unlinked {
		t.Error("unlinked = false")
	}
	if _, err := f.WriteAt([]byte("x"), 1<<20); err != nil {
		t.Error(err)
	}
	if _, _, err := openUnlinked(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing directory: no error")
	}
}
