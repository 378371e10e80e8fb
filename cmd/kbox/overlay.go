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
// layer of --ephemeral, kept in DIR across kbox processes, over the
// sealed layers DIR/chain names (package sessiondir: the layout).
// DIR/overlay holds the written blocks at their offsets, DIR/dirty their
// map, saved once the kernel has halted. DIR/busy exists while a kbox has
// the overlay: a kbox that finds it refuses the overlay, since the one
// before ended without saving the map (it was killed) and the overlay's
// newest blocks are not in the map. A checkpoint seals the top layer
// (seal) and the kbox goes on over a new empty one.

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
	dir    string
	base   *os.File // shared-locked
	file   *os.File
	dirty  *lkl.COWMap
	size   int64
	broken bool          // a seal failed half-way: the directory and the disk differ
	chain  []string      // the sealed layers' IDs, bottom first
	sealed []*os.File    // their overlays, only read
	maps   []*lkl.COWMap // the maps they were opened with
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
	if k.chain, err = sessiondir.ReadChain(dir); err != nil {
		return fail(err)
	}
	for _, id := range k.chain {
		f, bits, err := sessiondir.OpenLayer(dir, id, k.size)
		if err != nil {
			return fail(err)
		}
		m := lkl.NewCOWMap(k.size)
		k.sealed, k.maps = append(k.sealed, f), append(k.maps, m)
		if err := m.Load(bits); err != nil {
			return fail(err)
		}
	}
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

func (k *keptOverlay) layer() *rootfs.Overlay {
	o := &rootfs.Overlay{File: k.file, Dirty: k.dirty}
	for i, f := range k.sealed {
		o.Sealed = append(o.Sealed, lkl.COWLayer{FD: int(f.Fd()), Map: k.maps[i]})
	}
	return o
}

// save writes the map beside the overlay and clears the busy mark; the
// kernel must have halted. Whatever the kernel did before it halted, the
// overlay and the map then make a crash-consistent disk.
func (k *keptOverlay) save() error {
	if k.broken {
		// The busy mark stays: only a rollback opens it again.
		return errors.New("a checkpoint failed half-way: roll back to a checkpoint")
	}
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
	for _, f := range k.sealed {
		f.Close()
	}
	for _, m := range k.maps {
		m.Free()
	}
	k.sealed, k.maps = nil, nil
	if k.base != nil {
		k.base.Close()
		k.base = nil
	}
}

// seal makes the top layer a sealed one and puts a new empty top on
// disk, the kernel's copy-on-write disk over k; it returns the chain of
// sealed layers, which is the disk as it is now. Nothing is copied. A top
// with no block written is not sealed: the chain is the disk already. The
// kernel must write nothing meanwhile (the caller freezes the file
// system).
func (k *keptOverlay) seal(disk lkl.Disk) ([]string, error) {
	if k.dirty.Empty() {
		return k.chain, nil
	}
	id := sessiondir.NewLayerID()
	// From here a failure leaves the directory and the disk apart: the
	// session is then lost until a rollback (the busy mark stays).
	chain, err := sessiondir.Seal(k.dir, id, k.dirty.Bytes(), k.chain)
	if err != nil {
		k.broken = true
		return nil, err
	}
	over, err := os.OpenFile(filepath.Join(k.dir, overlayData), os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		k.broken = true
		return nil, err
	}
	dirty := lkl.NewCOWMap(k.size)
	if err := disk.PushCOW(int(over.Fd()), dirty); err != nil {
		k.broken = true
		over.Close()
		dirty.Free()
		return nil, err
	}
	// The old top is only read now; its map goes (the disk's index
	// has its blocks).
	k.sealed = append(k.sealed, k.file)
	k.dirty.Free()
	k.file, k.dirty, k.chain = over, dirty, chain
	return chain, nil
}
