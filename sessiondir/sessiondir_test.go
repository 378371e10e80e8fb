package sessiondir

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kbox-project/kbox/lkl"
)

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"c1": true, "a.b_c+d-e": true, "9": true,
		"": false, ".x": false, "-x": false, "../x": false, "a/b": false, "a b": false,
		string(bytes.Repeat([]byte("a"), 64)): true, string(bytes.Repeat([]byte("a"), 65)): false,
	} {
		if err := CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

// session makes a session directory over a 64 KiB base of 'b' bytes
// whose overlay has block 1 written with fill.
func session(t *testing.T, fill byte) (dir string, base *os.File, size int64) {
	t.Helper()
	dir = t.TempDir()
	size = 64 << 10
	bp := filepath.Join(dir, "base")
	os.WriteFile(bp, bytes.Repeat([]byte("b"), int(size)), 0o600)
	base, err := os.Open(bp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	writeOverlay(t, dir, size, fill)
	return dir, base, size
}

func writeOverlay(t *testing.T, dir string, size int64, fill byte) {
	t.Helper()
	ov := make([]byte, size)
	copy(ov[lkl.COWBlock:2*lkl.COWBlock], bytes.Repeat([]byte{fill}, lkl.COWBlock))
	bits := make([]byte, lkl.COWMapLen(size))
	bits[0] = 1 << 1
	if err := os.WriteFile(filepath.Join(dir, Overlay), ov, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, Dirty), bits, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreAndSave: a checkpoint (as the session's kbox writes it) is
// restored over a newer overlay, a killed kbox's busy mark goes, and the
// saved image is the base with the checkpoint's block over it.
func TestRestoreAndSave(t *testing.T) {
	dir, base, size := session(t, 'x')
	cp, err := NewCheckpoint(dir, "c1")
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(cp, 0o700)
	for _, f := range []string{Overlay, Dirty} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		os.WriteFile(filepath.Join(cp, f), b, 0o600)
	}
	if _, err := NewCheckpoint(dir, "c1"); !errors.Is(err, os.ErrExist) {
		t.Errorf("NewCheckpoint of an existing name: %v", err)
	}
	if _, err := NewCheckpoint(dir, "../c1"); !errors.Is(err, ErrBadName) {
		t.Errorf("NewCheckpoint of a bad name: %v", err)
	}
	if !HasCheckpoint(dir, "c1") || HasCheckpoint(dir, "c2") || HasCheckpoint(dir, "../"+filepath.Base(dir)) {
		t.Errorf("HasCheckpoint")
	}

	writeOverlay(t, dir, size, 'y') // the session went on
	os.WriteFile(filepath.Join(dir, Busy), nil, 0o600)
	if err := SaveImage(base, size, dir, filepath.Join(dir, "img")); !errors.Is(err, ErrIncomplete) {
		t.Errorf("SaveImage of a broken overlay: %v", err)
	}
	if err := Restore(dir, "c2"); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Restore of no checkpoint: %v", err)
	}
	if err := Restore(dir, "c1"); err != nil {
		t.Fatal(err)
	}
	if Broken(dir) {
		t.Errorf("the busy mark outlived the restore")
	}
	out := filepath.Join(dir, "img")
	if err := SaveImage(base, size, dir, out); err != nil {
		t.Fatal(err)
	}
	img, _ := os.ReadFile(out)
	want := bytes.Repeat([]byte("b"), int(size))
	copy(want[lkl.COWBlock:], bytes.Repeat([]byte("x"), lkl.COWBlock))
	if !bytes.Equal(img, want) {
		t.Errorf("the saved image is not the base with the checkpoint's block")
	}

	// Publish: whole or absent, never over an existing file.
	tmp := filepath.Join(dir, "tmp")
	os.WriteFile(tmp, []byte("new"), 0o600)
	if err := Publish(tmp, out); !errors.Is(err, os.ErrExist) {
		t.Errorf("Publish over an existing file: %v", err)
	}
	if err := Publish(tmp, filepath.Join(dir, "fresh")); err != nil {
		t.Errorf("Publish: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "fresh")); string(b) != "new" {
		t.Errorf("published %q", b)
	}
}
