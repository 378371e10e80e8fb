package rootfs

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/oci"
	"github.com/kbox-project/kbox/scratchfs"
	"golang.org/x/sys/unix"
)

// BuildOptions configure Build.
type BuildOptions struct {
	// Out is the image file to make; it appears only once complete.
	Out string
	// Size is the filesystem's size in bytes; 0 sizes it to the layers'
	// content plus headroom.
	Size int64
	// Log receives a line per step (nil: none).
	Log io.Writer
}

// ErrTooSmall is an image that --size made too small for the layers.
var ErrTooSmall = errors.New("the image is full")

// Build makes an ext4 image file from im's layers, with no root and no
// mke2fs: scratchfs formats an empty filesystem with a journal in a file
// beside Out (a temporary name), the kernel boots on it, and the layers are applied
// through its system calls (ApplyLayer). The image's configuration is kept
// after the filesystem (WriteImageConfig), and the file is renamed to Out
// at the end. On any error nothing is left under Out's name, nor the
// temporary file.
//
// The kernel cannot boot twice in one process: Build is the process's only
// use of it.
func Build(im *oci.Image, opt BuildOptions) (err error) {
	logf := func(format string, a ...any) {
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, format+"\n", a...)
		}
	}
	var total LayerStats
	for _, l := range im.Layers {
		s, err := ScanLayer(l, im.Plain)
		if err != nil {
			return err
		}
		total.Entries += s.Entries
		total.Blocks += s.Blocks
	}
	size := opt.Size
	if size == 0 {
		size = autoSize(total)
		if g, err := scratchfs.NewGeometry(size); err == nil {
			size += int64(g.WithJournal().Journal) * scratchfs.BlockSize // the headroom stays free
		}
	}
	g, err := scratchfs.NewGeometry(size)
	if err != nil {
		return fmt.Errorf("image size %d: %w", size, err)
	}
	// A journal, as mke2fs gives: a writable run killed mid-write leaves
	// an image the next mount recovers.
	g = g.WithJournal()
	logf("kbox: %d layers, %d entries, %d MiB of data: a %d MiB ext4 image", len(im.Layers), total.Entries, total.Blocks*4096>>20, size>>20)
	dir, base := filepath.Split(opt.Out)
	if dir == "" {
		dir = "."
	}
	// The file is made and named under the lock: a signal's
	// RemoveBuildTemp between the two found no name and left the file.
	buildTemp.Lock()
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err == nil {
		buildTemp.path = f.Name()
	}
	buildTemp.Unlock()
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		buildTemp.Lock()
		buildTemp.path = ""
		buildTemp.Unlock()
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := format(f, size, g); err != nil {
		f.Close()
		return err
	}
	f.Close()
	if err := applyAll(tmp, im, logf); err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("%w (%d MiB, %d inodes): give a larger --size: %v", ErrTooSmall, size>>20, g.Inodes, err)
		}
		return err
	}
	f, err = os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if !im.Config.Empty() {
		if err := WriteImageConfig(f, &im.Config); err != nil {
			f.Close()
			return fmt.Errorf("writing the image configuration: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o644&^umask()); err != nil {
		return err
	}
	return os.Rename(tmp, opt.Out)
}

// buildTemp is the temporary file of the Build under way.
var buildTemp struct {
	sync.Mutex
	path string
}

// RemoveBuildTemp removes the temporary file of a Build under way: kbox
// calls it when a signal interrupts an import or a pull.
func RemoveBuildTemp() {
	buildTemp.Lock()
	defer buildTemp.Unlock()
	if buildTemp.path != "" {
		os.Remove(buildTemp.path)
		buildTemp.path = ""
	}
}

// autoSize is the content plus headroom: an eighth more, and 32 MiB, with
// an inode for every 16 KiB (scratchfs's ratio) enough for the entries.
func autoSize(s LayerStats) int64 {
	data := s.Blocks * 4096
	size := data + data/8 + 32<<20
	size = max(size, s.Entries*scratchfs.BytesPerInode*5/4+32<<20)
	size += size / 50 // inode tables, bitmaps
	return (size + 4095) &^ 4095
}

func umask() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return os.FileMode(m)
}

// format writes an empty ext4 filesystem of g to f.
func format(f *os.File, size int64, g scratchfs.Geometry) error {
	if err := f.Truncate(size); err != nil {
		return err
	}
	var p scratchfs.Params
	p.Now = scratchfs.Now()
	p.Label = "kbox-image"
	rand.Read(p.UUID[:])
	rand.Read(p.HashSeed[:])
	p.UUID[6] = p.UUID[6]&0x0F | 0x40
	p.UUID[8] = p.UUID[8]&0x3F | 0x80
	return scratchfs.Format(f, g, p)
}

// applyAll boots the kernel on the image at path and applies the layers.
func applyAll(path string, im *oci.Image, logf func(string, ...any)) (err error) {
	img, err := OpenImage(path, "ext4", 0, false)
	if err != nil {
		return err
	}
	root, err := Setup(img, Options{Profile: ProfileNone, Kernel: lkl.Config{MemMB: 128}})
	if err != nil {
		img.Close()
		return err
	}
	defer func() {
		if cerr := root.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("unmounting the new image: %w", cerr)
		}
	}()
	lkl.Umask(0)
	// scratchfs's format has /tmp and /shm for the guest's scratch disk;
	// an image has what its layers give.
	for _, d := range []string{"/tmp", "/shm"} {
		if err := lkl.Unlink(d, true); err != nil {
			return fmt.Errorf("the new filesystem's %s: %w", d, err)
		}
	}
	for _, l := range im.Layers {
		skipped, err := ApplyLayer(l, im.Plain)
		if err != nil {
			return err
		}
		logf("kbox: applied %s", l.Name)
		if len(skipped) > 0 {
			logf("kbox: warning: %s: skipped %d entries of types an image cannot hold: %s", l.Name, len(skipped), strings.Join(skipped, ", "))
		}
	}
	if wd := im.Config.WorkingDir; strings.HasPrefix(wd, "/") {
		// As a container runtime makes it at start.
		a := &applier{created: map[string]bool{}}
		if err := a.mkdirAll(wd); err != nil {
			return fmt.Errorf("WorkingDir %s: %w", wd, err)
		}
	}
	lkl.Sync()
	return nil
}
