// Package sessiondir is a live session's directory as seen from outside
// the kbox that serves it (`kbox image --overlay DIR --serve SOCKET`):
// the kept overlay's files, its checkpoints, a rollback to one, the
// session's image saved as a file, and the client side of the session's
// socket. kbox mcp (agent) and `kbox session` (cmd/kbox) share it.
//
// Layout of DIR: DIR/overlay (the blocks the session wrote, at their
// offsets in the image), DIR/dirty (their map), DIR/busy (while a kbox
// has the overlay; left behind by one that was killed),
// DIR/checkpoints/NAME/{overlay,dirty} (a checkpoint, written by the
// session's kbox with the image's file system frozen).
package sessiondir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Files of a session's directory.
const (
	Overlay     = "overlay"
	Dirty       = "dirty"
	Busy        = "busy"
	Checkpoints = "checkpoints"
)

var checkpointName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)

// ErrBadName is the error of a checkpoint name that is not one.
var ErrBadName = errors.New("want letters, digits and . _ + -, at most 64, not starting with a dot")

// CheckName says whether name can name a checkpoint.
func CheckName(name string) error {
	if !checkpointName.MatchString(name) {
		return fmt.Errorf("checkpoint name %q: %w", name, ErrBadName)
	}
	return nil
}

// ErrNoCheckpoint is the error of a checkpoint that is not there.
var ErrNoCheckpoint = errors.New("no checkpoint")

// NewCheckpoint checks name and returns the directory the session's kbox
// is to copy its overlay to (its op checkpoint), which must not exist.
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
	_, err := os.Stat(filepath.Join(dir, Checkpoints, name, Dirty))
	return err == nil
}

// Restore puts a copy of checkpoint name in place of dir's overlay and
// map. No kbox may have the overlay: the session's kernel has ended (or
// was killed: its busy mark goes, the checkpoint being whole).
func Restore(dir, name string) error {
	if !HasCheckpoint(dir, name) {
		return fmt.Errorf("%w %q", ErrNoCheckpoint, name)
	}
	cp := filepath.Join(dir, Checkpoints, name)
	for _, f := range []string{Overlay, Dirty} {
		if err := replaceWithCopy(filepath.Join(cp, f), filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(dir, Busy)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// replaceWithCopy replaces dst with a copy of src (sparse), atomically.
func replaceWithCopy(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	tmp := dst + ".rollback"
	os.Remove(tmp)
	if err := SparseCopy(f, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
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
	var ranges [][2]int64
	bits, err := os.ReadFile(filepath.Join(dir, Dirty))
	switch {
	case err == nil:
		if len(bits) != lkl.COWMapLen(size) {
			return fmt.Errorf("the session's block map has %d bytes, want %d", len(bits), lkl.COWMapLen(size))
		}
		ranges = lkl.DirtyRanges(bits, size)
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if err := SparseCopy(base, out); err != nil {
		return err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if len(ranges) > 0 {
		ov, err := os.Open(filepath.Join(dir, Overlay))
		if err != nil {
			return err
		}
		defer ov.Close()
		if err := CopyRanges(ov, f, ranges); err != nil {
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
