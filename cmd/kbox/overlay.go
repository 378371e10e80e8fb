package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
	"github.com/kbox-project/kbox/sessiondir"
	"golang.org/x/sys/unix"
)

// A kept overlay (--overlay DIR; kbox mcp's sessions): the copy-on-write
// layer of --ephemeral, kept in DIR across kbox processes. DIR/overlay
// holds the written blocks at their offsets, DIR/dirty their map, saved
// once the kernel has halted. DIR/busy exists while a kbox has the
// overlay: a kbox that finds it refuses the overlay, since the one before
// ended without saving the map (it was killed) and the overlay's newest
// blocks are not in the map.

// Files of a kept overlay (package sessiondir: its layout).
const (
	overlayData  = sessiondir.Overlay
	overlayDirty = sessiondir.Dirty
	overlayBusy  = sessiondir.Busy
)

// ErrOverlayBroken says a kept overlay was left by a kbox that did not
// finish.
var ErrOverlayBroken = errors.New("an earlier kbox on it did not finish (it was killed): its writes are incomplete")

type keptOverlay struct {
	dir   string
	base  *os.File // shared-locked
	file  *os.File
	dirty *lkl.COWMap
	size  int64
}

// openKeptOverlay opens base (read-only, shared lock) and the overlay in
// dir, creating an empty one.
func openKeptOverlay(dir, base string) (*keptOverlay, error) {
	k := &keptOverlay{dir: dir}
	fail := func(err error) (*keptOverlay, error) {
		k.release()
		return nil, fmt.Errorf("overlay %s: %w", dir, err)
	}
	b, err := os.Open(base)
	if err != nil {
		return fail(err)
	}
	k.base = b
	if err := unix.Flock(int(b.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return fail(fmt.Errorf("%s is open read-write by another kbox: %w", base, err))
	}
	fi, err := b.Stat()
	if err != nil {
		return fail(err)
	}
	k.size = fi.Size()
	busy, err := os.OpenFile(filepath.Join(dir, overlayBusy), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, os.ErrExist) {
		k.base.Close()
		k.base = nil
		return nil, fmt.Errorf("overlay %s: %w", dir, ErrOverlayBroken)
	}
	if err != nil {
		return fail(err)
	}
	busy.Close()
	if k.file, err = os.OpenFile(filepath.Join(dir, overlayData), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600); err != nil {
		return fail(err)
	}
	k.dirty = lkl.NewCOWMap(k.size)
	if bits, err := os.ReadFile(filepath.Join(dir, overlayDirty)); err == nil {
		if err := k.dirty.Load(bits); err != nil {
			return fail(err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	return k, nil
}

func (k *keptOverlay) layer() *rootfs.Overlay { return &rootfs.Overlay{File: k.file, Dirty: k.dirty} }

// save writes the map beside the overlay and clears the busy mark; the
// kernel must have halted. Whatever the kernel did before it halted, the
// overlay and the map then make a crash-consistent disk.
func (k *keptOverlay) save() error {
	if err := k.file.Sync(); err != nil {
		return err
	}
	tmp := filepath.Join(k.dir, overlayDirty+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(k.dirty.Bytes())
	if serr := f.Sync(); err == nil {
		err = serr
	}
	f.Close()
	if err == nil {
		err = os.Rename(tmp, filepath.Join(k.dir, overlayDirty))
	}
	if err == nil {
		err = os.Remove(filepath.Join(k.dir, overlayBusy))
	}
	return err
}

// release frees what is open; the busy mark stays unless save ran.
func (k *keptOverlay) release() {
	if k.file != nil {
		k.file.Close()
		k.file = nil
	}
	k.dirty.Free()
	k.dirty = nil
	if k.base != nil {
		k.base.Close()
		k.base = nil
	}
}

// copyTo writes the overlay as it is now into dir, a new directory of
// the same layout (DIR/overlay with the written blocks, DIR/dirty their
// map): a session's checkpoint or a fork's start. The kernel must write
// nothing meanwhile (the caller freezes the file system).
func (k *keptOverlay) copyTo(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(dir, overlayData), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := out.Truncate(k.size); err != nil {
		return err
	}
	if err := sessiondir.CopyRanges(k.file, out, k.dirty.DirtyRanges()); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, overlayDirty), k.dirty.Bytes(), 0o600); err != nil {
		return err
	}
	return out.Sync()
}
