// Package sessiondir is a live session's directory as seen from outside
// the kbox that serves it (`kbox image --overlay DIR --serve SOCKET`):
// the kept overlay's files, its checkpoints, a rollback to one, the
// session's image saved as a file, and the client side of the session's
// socket. kbox mcp (agent) and `kbox session` (cmd/kbox) share it.
//
// The session's disk is the image under a stack of layers (lkl.AddDiskCOW):
// sealed layers, only read, and the top layer, written. Layout of DIR:
// DIR/overlay (the top layer: the blocks the session wrote since its last
// checkpoint, at their offsets in the image), DIR/dirty (their map),
// DIR/busy (while a kbox has the overlay; left behind by one that was
// killed), DIR/chain (the IDs of the sealed layers under the top, bottom
// first, one a line), DIR/layers/ID/{overlay,dirty} (a sealed layer),
// DIR/checkpoints/NAME/chain (a checkpoint: the layers that make its
// disk). A checkpoint seals the top layer (the session's kbox does it, the
// image's file system frozen) and names the chain; a rollback makes a
// checkpoint's chain the session's, under a new empty top; a fork's
// directory gets hard links to the source's sealed layers, which are
// never written again: a layer's files go when no directory links them.
package sessiondir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Files of a session's directory.
const (
	Overlay     = "overlay"
	Dirty       = "dirty"
	Busy        = "busy"
	Checkpoints = "checkpoints"
	Chain       = "chain"
	Layers      = "layers"
)

// Compiled at first use, not in every kbox start-up's package init.
var checkpointName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`) })

// ErrBadName is the error of a checkpoint name that is not one.
var ErrBadName = errors.New("want letters, digits and . _ + -, at most 64, not starting with a dot")

// CheckName says whether name can name a checkpoint.
func CheckName(name string) error {
	if !checkpointName().MatchString(name) {
		return fmt.Errorf("checkpoint name %q: %w", name, ErrBadName)
	}
	return nil
}

// ErrNoCheckpoint is the error of a checkpoint that is not there.
var ErrNoCheckpoint = errors.New("no checkpoint")

// NewCheckpoint checks name and returns the directory the session's kbox
// is to write the checkpoint's chain to (its op checkpoint), which must
// not exist.
func NewCheckpoint(dir, name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	cp := filepath.Join(dir, Checkpoints, name)
	if _, err := os.Lstat(cp); err == nil {
		return "", fmt.Errorf("checkpoint %q: %w", name, os.ErrExist)
	}
	if err := os.MkdirAll(filepath.Dir(cp), 0o700); err != nil {
		return "", err
	}
	return cp, nil
}

// HasCheckpoint says whether dir holds a whole checkpoint name.
func HasCheckpoint(dir, name string) bool {
	if CheckName(name) != nil {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, Checkpoints, name, Chain))
	return err == nil
}

// Restore makes checkpoint name's chain the session's, under a new empty
// top layer, and removes the layers no longer named: nothing is copied.
// No kbox may have the overlay: the session's kernel has ended (or was
// killed: its busy mark goes, the checkpoint being whole).
func Restore(dir, name string) error {
	if !HasCheckpoint(dir, name) {
		return fmt.Errorf("%w %q", ErrNoCheckpoint, name)
	}
	chain, err := ReadChain(filepath.Join(dir, Checkpoints, name))
	if err != nil {
		return err
	}
	if err := WriteChain(dir, chain); err != nil {
		return err
	}
	for _, f := range []string{Overlay, Dirty, Busy} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return Prune(dir)
}

// Broken says whether a kbox on dir's overlay ended without saving its
// map (it was killed): the overlay's newest blocks are not in the map.
func Broken(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, Busy))
	return err == nil
}

// ErrIncomplete is SaveImage's error for a broken overlay.
var ErrIncomplete = errors.New("the session's image is incomplete: a kbox on it was killed")

// SaveImage writes the session's image to out, a new file: a sparse copy
// of base (size bytes) with the overlay's written blocks over it. No kbox
// may have the overlay.
func SaveImage(base *os.File, size int64, dir, out string) error {
	if Broken(dir) {
		return ErrIncomplete
	}
	chain, err := ReadChain(dir)
	if err != nil {
		return err
	}
	var layers []string // bottom first, the top last
	for _, id := range chain {
		layers = append(layers, LayerDir(dir, id))
	}
	layers = append(layers, dir)
	if err := SparseCopy(base, out); err != nil {
		return err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, l := range layers {
		if err := copyLayer(l, size, f); err != nil {
			return err
		}
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	return f.Sync()
}

// Publish renames tmp to out, which must not exist (an error wrapping
// os.ErrExist if it does, tmp left in place), and syncs out's directory:
// out is whole or absent, and of two publishing the same name one fails.
func Publish(tmp, out string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, out, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A filesystem without RENAME_NOREPLACE: a link fails as well
		// when the name exists.
		if err = os.Link(tmp, out); err == nil {
			os.Remove(tmp)
		}
	}
	if errors.Is(err, unix.EEXIST) {
		err = fmt.Errorf("%s: %w", out, os.ErrExist)
	}
	if err != nil {
		return err
	}
	return SyncDir(filepath.Dir(out))
}

// SyncDir syncs a directory (after a rename into it).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// copyLayer writes the blocks of the layer in dir (its overlay and map;
// none if it has no map) to out at their offsets.
func copyLayer(dir string, size int64, out *os.File) error {
	bits, err := ReadMap(dir, size)
	if err != nil || bits == nil {
		return err
	}
	ranges := lkl.DirtyRanges(bits, size)
	if len(ranges) == 0 {
		return nil
	}
	ov, err := os.Open(filepath.Join(dir, Overlay))
	if err != nil {
		return err
	}
	defer ov.Close()
	return CopyRanges(ov, out, ranges)
}

// ReadMap reads the map of the layer in dir, nil if it has none.
func ReadMap(dir string, size int64) ([]byte, error) {
	bits, err := os.ReadFile(filepath.Join(dir, Dirty))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(bits) != lkl.COWMapLen(size) {
		return nil, fmt.Errorf("the block map %s has %d bytes, want %d", filepath.Join(dir, Dirty), len(bits), lkl.COWMapLen(size))
	}
	return bits, nil
}
