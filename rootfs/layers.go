package rootfs

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/oci"
	"golang.org/x/sys/unix"
)

// Layers are applied to an image through the kernel, which runs chrooted
// into the image (Setup): every path, and every symlink met on the way to
// one, resolves inside the image's root, and the owners, modes, device
// numbers and extended attributes are set by the kernel's own calls, with
// no host privilege. A tar entry whose ".." would climb above the root is
// refused before anything is written.

// whiteoutPrefix marks a file removed by a layer; opaqueName marks a
// directory whose lower layers' entries are hidden (OCI image spec,
// layer changesets).
const (
	whiteoutPrefix = ".wh."
	opaqueName     = ".wh..wh..opq"
)

// entryPath returns the image path of a tar entry name, or an error when
// its ".." components would climb above the root.
func entryPath(layer, name string) (string, error) {
	depth := 0
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return "", fmt.Errorf("%s: entry %q: its \"..\" leaves the image's root: refused", layer, name)
			}
		default:
			depth++
		}
	}
	return path.Clean("/" + name), nil
}

// LayerStats is what a layer adds at most: the filesystem is sized from
// them before anything is written.
type LayerStats struct {
	Entries int64 // inodes
	Blocks  int64 // 4 KiB blocks of data and directories
}

// ScanLayer reads a layer once without writing anything: it checks the
// tar stream, the entries' paths and the layer's digests, and counts what
// the layer needs. plain is set for a root filesystem tarball, which is
// refused if it is a compressed docker save or OCI layout instead.
func ScanLayer(l *oci.Layer, plain bool) (LayerStats, error) {
	var s LayerStats
	var index, blobs bool
	r, err := l.Open()
	if err != nil {
		return s, err
	}
	defer r.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return s, tarError(l.Name, err)
		}
		p, err := entryPath(l.Name, h.Name)
		if err != nil {
			return s, err
		}
		index = index || p == "/manifest.json" || p == "/oci-layout"
		blobs = blobs || strings.HasPrefix(p, "/blobs/sha256/") || strings.HasSuffix(p, "/layer.tar")
		if h.Typeflag == tar.TypeLink {
			if _, err := entryPath(l.Name, h.Linkname); err != nil {
				return s, err
			}
			continue
		}
		s.Entries++
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
			s.Blocks += (h.Size+4095)/4096 + 1 + h.Size/(128<<20) // data, extent tree
		case tar.TypeDir:
			s.Blocks++
		case tar.TypeSymlink:
			if len(h.Linkname) >= 60 {
				s.Blocks++
			}
		}
		if len(h.PAXRecords) > 0 {
			s.Blocks++ // an xattr block, at most
		}
	}
	if plain && index && blobs {
		return s, fmt.Errorf("%s: a compressed docker save or OCI layout, not a root filesystem: decompress it first (gunzip, zstd -d)", l.Name)
	}
	return s, r.Finish()
}

func tarError(layer string, err error) error {
	var d *oci.DigestError
	if errors.As(err, &d) || strings.HasPrefix(err.Error(), layer) {
		return err
	}
	return fmt.Errorf("%s: corrupt tar stream: %w", layer, err)
}

// applier applies one layer to the mounted image.
type applier struct {
	layer   string
	plain   bool            // a root filesystem tarball: no whiteouts
	created map[string]bool // paths this layer made
	dirs    []dirTime       // directories' times, set once the layer is in
	buf     []byte
	// Skipped lists entries of types kbox does not make.
	skipped []string
}

type dirTime struct {
	path         string
	atime, mtime unix.Timespec
}

// ApplyLayer applies one layer: its entries in order, whiteouts and opaque
// directories taking away what the layers below hold. The kernel must be
// chrooted into the image (Setup). It returns the entries skipped (types
// an image cannot hold, such as sockets).
func ApplyLayer(l *oci.Layer, plain bool) ([]string, error) {
	r, err := l.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	a := &applier{layer: l.Name, plain: plain, created: map[string]bool{}, buf: make([]byte, 256<<10)}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, tarError(l.Name, err)
		}
		if err := a.entry(h, tr); err != nil {
			return nil, err
		}
	}
	for i := len(a.dirs) - 1; i >= 0; i-- {
		d := a.dirs[i]
		if err := lkl.Lutimes(d.path, d.atime, d.mtime); err != nil {
			return nil, fmt.Errorf("%s: times of %s: %w", l.Name, d.path, err)
		}
	}
	return a.skipped, r.Finish()
}

func (a *applier) fail(h *tar.Header, what string, err error) error {
	return fmt.Errorf("%s: entry %q: %s: %w", a.layer, h.Name, what, err)
}

func (a *applier) entry(h *tar.Header, data io.Reader) error {
	p, err := entryPath(a.layer, h.Name)
	if err != nil {
		return err
	}
	switch h.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
	default:
		a.skipped = append(a.skipped, fmt.Sprintf("%s (type %q)", h.Name, h.Typeflag))
		return nil
	}
	dir, base := path.Split(p)
	if !a.plain && strings.HasPrefix(base, whiteoutPrefix) {
		target := dir
		if base != opaqueName {
			target = path.Join(dir, strings.TrimPrefix(base, whiteoutPrefix))
		}
		if err := a.hideLower(target, base == opaqueName); err != nil {
			return a.fail(h, "whiteout", err)
		}
		return nil
	}
	if p != "/" {
		if err := a.mkdirAll(dir); err != nil {
			return a.fail(h, "parent directory", err)
		}
		if err := a.replace(p, h.Typeflag == tar.TypeDir); err != nil {
			return a.fail(h, "replacing what was there", err)
		}
	}
	if err := a.make(p, h, data); err != nil {
		return err
	}
	a.created[p] = true
	if h.Typeflag == tar.TypeLink {
		return nil // the inode's metadata is its first name's
	}
	return a.meta(p, h)
}

// make creates the entry's file.
func (a *applier) make(p string, h *tar.Header, data io.Reader) error {
	mode := uint32(h.Mode) & 0o7777
	var err error
	switch h.Typeflag {
	case tar.TypeDir:
		if p != "/" {
			if err = lkl.Mkdir(p, 0o700); errors.Is(err, unix.EEXIST) {
				err = nil // an existing directory is kept, and updated
			}
		}
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		// archive/tar gives a sparse file's holes as zeros.
		return a.writeFile(p, h, data)
	case tar.TypeSymlink:
		err = lkl.Symlink(h.Linkname, p)
	case tar.TypeLink:
		target, terr := entryPath(a.layer, h.Linkname)
		if terr != nil {
			return terr
		}
		err = lkl.Link(target, p)
		if err != nil {
			return a.fail(h, "hard link to "+target, err)
		}
	case tar.TypeChar:
		err = lkl.Mknod(p, unix.S_IFCHR|mode, unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor)))
	case tar.TypeBlock:
		err = lkl.Mknod(p, unix.S_IFBLK|mode, unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor)))
	case tar.TypeFifo:
		err = lkl.Mknod(p, unix.S_IFIFO|mode, 0)
	}
	if err != nil {
		return a.fail(h, "create", err)
	}
	return nil
}

func (a *applier) writeFile(p string, h *tar.Header, data io.Reader) error {
	fd, err := lkl.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return a.fail(h, "create", err)
	}
	var written int64
	for written < h.Size {
		n, rerr := data.Read(a.buf)
		for b := a.buf[:n]; len(b) > 0; {
			m, werr := lkl.Write(fd, b)
			if werr != nil {
				lkl.Close(fd)
				return a.fail(h, "write", werr)
			}
			b = b[m:]
			written += int64(m)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			lkl.Close(fd)
			return tarError(a.layer, rerr)
		}
	}
	if err := lkl.Close(fd); err != nil {
		return a.fail(h, "close", err)
	}
	if written != h.Size {
		return fmt.Errorf("%s: entry %q: truncated: %d of %d bytes", a.layer, h.Name, written, h.Size)
	}
	return nil
}

// meta sets the owner, mode, extended attributes and times the header
// gives: the owner first, since a change of owner clears the set-id bits
// and file capabilities.
func (a *applier) meta(p string, h *tar.Header) error {
	if err := lkl.Lchown(p, uint32(h.Uid), uint32(h.Gid)); err != nil {
		return a.fail(h, "chown", err)
	}
	if h.Typeflag != tar.TypeSymlink {
		if err := lkl.Chmod(p, uint32(h.Mode)&0o7777); err != nil {
			return a.fail(h, "chmod", err)
		}
	}
	for k, v := range h.PAXRecords {
		if name, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
			if err := lkl.Lsetxattr(p, name, []byte(v)); err != nil {
				return a.fail(h, "set extended attribute "+name, err)
			}
		}
	}
	mt := unix.NsecToTimespec(h.ModTime.UnixNano())
	at := mt
	if !h.AccessTime.IsZero() {
		at = unix.NsecToTimespec(h.AccessTime.UnixNano())
	}
	if h.Typeflag == tar.TypeDir {
		a.dirs = append(a.dirs, dirTime{p, at, mt})
		return nil
	}
	if err := lkl.Lutimes(p, at, mt); err != nil {
		return a.fail(h, "set times", err)
	}
	return nil
}

// mkdirAll makes the missing directories of dir (symlinks on the way are
// followed, inside the root), as root with mode 0755.
func (a *applier) mkdirAll(dir string) error {
	if st, err := lkl.Stat(dir, false); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil // the usual case: one lookup
	}
	cur := ""
	for _, c := range strings.Split(strings.Trim(dir, "/"), "/") {
		if c == "" {
			continue
		}
		cur += "/" + c
		st, err := lkl.Stat(cur, false)
		if err == nil {
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return fmt.Errorf("%s: %w", cur, unix.ENOTDIR)
			}
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s: %w", cur, err)
		}
		if err := lkl.Mkdir(cur, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", cur, err)
		}
		a.created[cur] = true
	}
	return nil
}

// replace removes what is at p before an entry is made there, unless both
// are directories: a directory entry then updates the one there.
func (a *applier) replace(p string, isDir bool) error {
	st, err := lkl.Stat(p, true)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if isDir && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil
	}
	return removeAll(p)
}

// hideLower applies a whiteout: what the lower layers hold at p goes (all
// of it with opaque false; with opaque true, p's entries but p itself).
// What this layer made stays, whatever the order of its entries.
func (a *applier) hideLower(p string, opaque bool) error {
	st, err := lkl.Stat(p, true)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if !opaque && !a.created[p] {
		return removeAll(p)
	}
	if !isDir {
		return nil
	}
	names, err := lkl.ReadDir(p)
	if err != nil {
		return err
	}
	for _, n := range names {
		c := path.Join(p, n)
		if a.created[c] {
			if err := a.hideLower(c, true); err != nil {
				return err
			}
			continue
		}
		if err := removeAll(c); err != nil {
			return err
		}
	}
	return nil
}

// removeAll removes p and, for a directory, all below it (symlinks are
// removed, never followed).
func removeAll(p string) error {
	st, err := lkl.Stat(p, true)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return lkl.Unlink(p, false)
	}
	names, err := lkl.ReadDir(p)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeAll(path.Join(p, n)); err != nil {
			return err
		}
	}
	return lkl.Unlink(p, true)
}
