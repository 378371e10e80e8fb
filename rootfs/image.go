// Package rootfs prepares the guest's root filesystem: it opens and checks
// an image file, locks it against a second writer, attaches it to LKL,
// mounts it, chroots the kernel into it and makes the recommended mounts.
// build.sh beside this file builds the image itself (`make rootfs`).
package rootfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// Image is an open, locked image file.
type Image struct {
	Path     string
	File     *os.File
	ReadOnly bool
	Size     int64
}

// ImageError is a problem with the image file itself, with a message meant
// for the user.
type ImageError struct {
	Path string
	Msg  string
	Err  error
}

func (e *ImageError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("image %s: %s: %v", e.Path, e.Msg, e.Err)
	}
	return fmt.Sprintf("image %s: %s", e.Path, e.Msg)
}

func (e *ImageError) Unwrap() error { return e.Err }

// ErrImageBusy reports an image already held by another kbox.
var ErrImageBusy = errors.New("image in use")

// ext4Defaults are kbox's mount options for an ext4 image, before the
// user's (-m), which may undo them (a later option wins).
//
// The first two spare the run ext4's background thread (ext4lazyinit, a
// host thread in LKL): it reads every group's block bitmap ahead of need,
// and on a read-write mount zeroes the inode tables mke2fs left
// uninitialised, writing to the image a guest never asked to change.
// Without them the allocator reads a bitmap when it first needs it, and
// the tables stay as mke2fs made them (ext4 knows which are
// uninitialised).
//
// lazytime keeps an inode's new times in memory until something else
// changes the inode, an fsync, or the unmount at the run's end writes
// them: a stat sees them at once. Every first read of a file since its
// change dirties its inode for the access time (relatime, shadowfd's
// propagateAtime), which would otherwise go through ext4's journal.
var ext4Defaults = []string{"no_prefetch_block_bitmaps", "noinit_itable", "lazytime"}

// imageMountOptions are the options the image is mounted with: kbox's
// defaults for its filesystem type, then the user's.
func imageMountOptions(fstype string, user []string) []string {
	if fstype != "ext4" {
		return user
	}
	return append(slices.Clip(ext4Defaults), user...)
}

// extFamily reports whether fstype is checked with the ext2/3/4 superblock.
func extFamily(fstype string) bool {
	return fstype == "ext4" || fstype == "ext3" || fstype == "ext2"
}

// OpenImage opens path for use as a root filesystem of type fstype on
// partition part (0: whole disk). A read-write open takes an exclusive lock
// and a read-only one a shared lock, so one image never has two writers (nor
// a reader beside a writer).
func OpenImage(path, fstype string, part int, readOnly bool) (*Image, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, &ImageError{Path: path, Msg: "no such file (build one with `make rootfs`)"}
	case err != nil:
		return nil, &ImageError{Path: path, Msg: "cannot stat", Err: err}
	case fi.IsDir():
		return nil, &ImageError{Path: path, Msg: "is a directory, not an image file"}
	case !fi.Mode().IsRegular() && fi.Mode()&os.ModeDevice == 0:
		return nil, &ImageError{Path: path, Msg: "is not a regular file or block device"}
	}
	flags := os.O_RDWR
	if readOnly {
		flags = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, os.ErrPermission) && !readOnly {
			return nil, &ImageError{Path: path, Msg: "cannot open read-write (use --read-only to mount it read-only)", Err: unix.EACCES}
		}
		if errors.Is(err, unix.EROFS) && !readOnly {
			return nil, &ImageError{Path: path, Msg: "is on a read-only file system (use --read-only, or --ephemeral to write to a copy-on-write layer)", Err: unix.EROFS}
		}
		return nil, &ImageError{Path: path, Msg: "cannot open", Err: err}
	}
	img := &Image{Path: path, File: f, ReadOnly: readOnly, Size: fi.Size()}
	if err := img.lock(); err != nil {
		f.Close()
		return nil, err
	}
	if part == 0 && extFamily(fstype) {
		if err := checkExtSuperblock(f, img.Size); err != nil {
			f.Close()
			return nil, &ImageError{Path: path, Msg: err.Error()}
		}
	}
	return img, nil
}

func (img *Image) lock() error {
	how := unix.LOCK_EX
	if img.ReadOnly {
		how = unix.LOCK_SH
	}
	err := unix.Flock(int(img.File.Fd()), how|unix.LOCK_NB)
	if err == unix.EWOULDBLOCK {
		return &ImageError{Path: img.Path, Msg: "already opened read-write by another kbox; refusing, so that two kernels never write one image at once", Err: ErrImageBusy}
	}
	if err != nil {
		return &ImageError{Path: img.Path, Msg: "cannot lock", Err: err}
	}
	return nil
}

// Close releases the lock and the file.
func (img *Image) Close() error {
	if img == nil || img.File == nil {
		return nil
	}
	err := img.File.Close()
	img.File = nil
	return err
}

// Fd returns the image's host file descriptor.
func (img *Image) Fd() int { return int(img.File.Fd()) }

const (
	extSuperOffset   = 1024
	extMagic         = 0xEF53
	extIncompat64Bit = 0x80
	// extIncompatRecover is EXT3_FEATURE_INCOMPAT_RECOVER (needs_recovery).
	extIncompatRecover = 0x4
)

// checkExtSuperblock reads the primary ext2/3/4 superblock and rejects files
// that are not ext images or are shorter than the filesystem they describe,
// before the kernel ever sees them.
func checkExtSuperblock(r io.ReaderAt, size int64) error {
	var sb [1024]byte
	n, err := r.ReadAt(sb[:], extSuperOffset)
	if n < len(sb) {
		if err == nil || err == io.EOF {
			return fmt.Errorf("too small to hold an ext4 filesystem (%d bytes)", size)
		}
		return fmt.Errorf("cannot read superblock: %v", err)
	}
	return ParseExtSuperblock(sb[:], size)
}

// ParseExtSuperblock validates a 1024-byte ext superblock against the size
// of the image holding it.
func ParseExtSuperblock(sb []byte, size int64) error {
	if len(sb) < 1024 {
		return errors.New("short superblock")
	}
	le := binary.LittleEndian
	if le.Uint16(sb[0x38:]) != extMagic {
		return errors.New("not an ext2/3/4 filesystem (no superblock magic); check the file or pass -t with its type")
	}
	inodes := le.Uint32(sb[0x0:])
	blocks := uint64(le.Uint32(sb[0x4:]))
	logBlock := le.Uint32(sb[0x18:])
	if le.Uint32(sb[0x60:])&extIncompat64Bit != 0 {
		blocks |= uint64(le.Uint32(sb[0x150:])) << 32
	}
	if logBlock > 6 {
		return fmt.Errorf("corrupt superblock: block size 2^(10+%d)", logBlock)
	}
	if inodes == 0 || blocks == 0 {
		return errors.New("corrupt superblock: zero inodes or blocks")
	}
	blockSize := uint64(1024) << logBlock
	need := blocks * blockSize
	if need/blockSize != blocks || need > uint64(size) && size > 0 {
		return fmt.Errorf("truncated: the filesystem needs %d bytes but the file has %d", need, size)
	}
	return nil
}
