package sessiondir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Sealed layers and chains (the package comment: the layout).

// Compiled at first use, not in every kbox start-up's package init.
var layerID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{16}$`) })

// NewLayerID names a new sealed layer: unique across sessions, since a
// fork links its source's layers under the same names.
func NewLayerID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// LayerDir is the directory of sealed layer id in session dir.
func LayerDir(dir, id string) string { return filepath.Join(dir, Layers, id) }

// ReadChain reads DIR/chain (dir a session's or a checkpoint's): the
// sealed layers' IDs, bottom first; none if there is no chain file.
func ReadChain(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, Chain))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ids := strings.Fields(string(b))
	for _, id := range ids {
		if !layerID().MatchString(id) {
			return nil, fmt.Errorf("%s: %q is not a layer", filepath.Join(dir, Chain), id)
		}
	}
	return ids, nil
}

// WriteChain replaces DIR/chain with ids, atomically.
func WriteChain(dir string, ids []string) error {
	tmp := filepath.Join(dir, Chain+".tmp")
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(id + "\n")
	}
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, Chain))
}

// LinkLayers gives session directory dst hard links to the layers its
// chain names, from session directory src: a fork shares its source's
// sealed layers, which neither writes.
func LinkLayers(src, dst string) error {
	ids, err := ReadChain(dst)
	if err != nil {
		return err
	}
	for _, id := range ids {
		to := LayerDir(dst, id)
		if err := os.MkdirAll(to, 0o700); err != nil {
			return err
		}
		for _, f := range []string{Overlay, Dirty} {
			if err := os.Link(filepath.Join(LayerDir(src, id), f), filepath.Join(to, f)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Prune removes the sealed layers of session dir that neither its chain
// nor any of its checkpoints names (a rollback's newer state, a seal left
// by a killed kbox). No kbox may be sealing a layer meanwhile.
func Prune(dir string) error {
	keep := map[string]bool{}
	chains := []string{dir}
	cps, err := os.ReadDir(filepath.Join(dir, Checkpoints))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, cp := range cps {
		chains = append(chains, filepath.Join(dir, Checkpoints, cp.Name()))
	}
	for _, c := range chains {
		ids, err := ReadChain(c)
		if err != nil {
			return err
		}
		for _, id := range ids {
			keep[id] = true
		}
	}
	layers, err := os.ReadDir(filepath.Join(dir, Layers))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, l := range layers {
		if !keep[l.Name()] {
			if err := os.RemoveAll(filepath.Join(dir, Layers, l.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// Seal makes session dir's top layer (DIR/overlay, with the map bits) the
// sealed layer id on top of chain, and returns the new chain; DIR/overlay
// and DIR/dirty are then gone (the caller makes the new top). Nothing is
// copied: the top's file is renamed, and an open fd of it stays valid.
// The layer is not synced: it is whole for any kbox after this one, but
// not through a crash of the host.
func Seal(dir, id string, bits []byte, chain []string) ([]string, error) {
	to := LayerDir(dir, id)
	if err := os.MkdirAll(to, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(to, Dirty), bits, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(filepath.Join(dir, Overlay), filepath.Join(to, Overlay)); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(dir, Dirty)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	chain = append(chain[:len(chain):len(chain)], id)
	if err := WriteChain(dir, chain); err != nil {
		return nil, err
	}
	return chain, nil
}

// WriteCheckpoint makes cp, a new directory, with chain as its chain:
// the chain file last, so a checkpoint is whole or absent (HasCheckpoint).
func WriteCheckpoint(cp string, chain []string) error {
	if err := os.Mkdir(cp, 0o700); err != nil {
		return err
	}
	if err := WriteChain(cp, chain); err != nil {
		return err
	}
	return nil
}

// openRO opens a sealed layer's file for reading.
func openRO(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
}

// OpenLayer opens sealed layer id of session dir: its overlay (only
// read) and its map.
func OpenLayer(dir, id string, size int64) (*os.File, []byte, error) {
	ld := LayerDir(dir, id)
	bits, err := ReadMap(ld, size)
	if err != nil {
		return nil, nil, err
	}
	if bits == nil {
		return nil, nil, fmt.Errorf("layer %s has no map", ld)
	}
	f, err := openRO(filepath.Join(ld, Overlay))
	if err != nil {
		return nil, nil, err
	}
	return f, bits, nil
}
