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

// overlayBlock is block 1 of the image dir's session saves.
func overlayBlock(t *testing.T, base *os.File, size int64, dir string) byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "img")
	if err := SaveImage(base, size, dir, out); err != nil {
		t.Fatal(err)
	}
	img, _ := os.ReadFile(out)
	return img[lkl.COWBlock]
}

// checkpoint seals dir's top (as the session's kbox does) and records
// the chain as checkpoint name.
func checkpoint(t *testing.T, dir, name string, size int64) {
	t.Helper()
	cp, err := NewCheckpoint(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := ReadChain(dir)
	if err != nil {
		t.Fatal(err)
	}
	bits, _ := ReadMap(dir, size)
	if chain, err = Seal(dir, NewLayerID(), bits, chain); err != nil {
		t.Fatal(err)
	}
	if err := WriteCheckpoint(cp, chain); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreAndSave: checkpoints (as the session's kbox writes them)
// are restored over a newer top, in any order (a tree); a killed kbox's
// busy mark goes; the saved image is the base with the chain's blocks
// over it; a fork's links keep a layer its source dropped.
func TestRestoreAndSave(t *testing.T) {
	dir, base, size := session(t, 'x')
	checkpoint(t, dir, "c1", size)
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
	checkpoint(t, dir, "c2", size)
	writeOverlay(t, dir, size, 'z')
	if got := overlayBlock(t, base, size, dir); got != 'z' {
		t.Errorf("the session's block: %q", got)
	}
	fork := t.TempDir()
	chain, _ := ReadChain(dir)
	WriteChain(fork, chain)
	if err := LinkLayers(dir, fork); err != nil {
		t.Fatal(err)
	}

	os.WriteFile(filepath.Join(dir, Busy), nil, 0o600)
	if err := SaveImage(base, size, dir, filepath.Join(dir, "img")); !errors.Is(err, ErrIncomplete) {
		t.Errorf("SaveImage of a broken overlay: %v", err)
	}
	if err := Restore(dir, "c3"); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Restore of no checkpoint: %v", err)
	}
	for _, c := range []struct {
		name string
		want byte
	}{{"c1", 'x'}, {"c2", 'y'}, {"c1", 'x'}} {
		if err := Restore(dir, c.name); err != nil {
			t.Fatal(err)
		}
		if Broken(dir) {
			t.Errorf("the busy mark outlived the restore")
		}
		if got := overlayBlock(t, base, size, dir); got != c.want {
			t.Errorf("after a rollback to %s: %q, want %q", c.name, got, c.want)
		}
	}
	// A layer no chain names goes; the fork keeps its own links.
	os.RemoveAll(filepath.Join(dir, Checkpoints, "c2"))
	if err := Prune(dir); err != nil {
		t.Fatal(err)
	}
	if l, _ := os.ReadDir(filepath.Join(dir, Layers)); len(l) != 1 {
		t.Errorf("%d layers after the prune, want 1", len(l))
	}
	if got := overlayBlock(t, base, size, fork); got != 'y' {
		t.Errorf("the fork's block: %q", got)
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
