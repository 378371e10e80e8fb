package oci

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Image is an image's layers, bottom first, and its configuration.
type Image struct {
	// Source says where the image came from, for messages.
	Source string
	Config Config
	Layers []*Layer
	// Plain is set for a plain root filesystem tarball: one layer, no
	// configuration, and no whiteouts (its entries are taken as they are).
	Plain bool
	close func() error
}

// Close releases the image's files.
func (im *Image) Close() error {
	if im.close != nil {
		return im.close()
	}
	return nil
}

// Options choose among the images a source holds.
type Options struct {
	// Platform is the platform wanted; with Explicit false it is the
	// host's, and a source with none for it is refused with a hint.
	Platform Platform
	Explicit bool
	// Ref picks one image of a docker save or an OCI layout that holds
	// several, by a name of its (RepoTags; the index's
	// org.opencontainers.image.ref.name).
	Ref string
}

// ChoiceError says that a source holds several images and none was
// chosen, or none of the name asked for: the command line must say.
type ChoiceError struct{ Msg string }

func (e *ChoiceError) Error() string { return e.Msg }

// smallMax bounds a manifest, index or config read into memory.
const smallMax = 8 << 20

// store reads the files of an image layout or a docker save archive.
type store interface {
	open(name string) (io.ReadCloser, int64, error)
	has(name string) bool
	close() error
}

// Open opens a `docker save` tarball, an OCI image layout (a directory or
// a tar of one), either of them compressed, or a plain root filesystem
// tarball (maybe compressed).
func Open(src string, opt Options) (*Image, error) {
	if opt.Platform.OS == "" {
		opt.Platform = HostPlatform()
	}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	var st store
	switch {
	case fi.IsDir():
		st = dirStore(src)
	case fi.Mode().IsRegular():
		ts, plain, err := openTar(src)
		if err != nil {
			return nil, err
		}
		if plain && opt.Ref != "" {
			return nil, &ChoiceError{fmt.Sprintf("%s: a plain root filesystem tarball is one image: --ref %s names none", src, opt.Ref)}
		}
		if plain {
			return plainImage(src, fi.Size()), nil
		}
		st = ts
	default:
		return nil, fmt.Errorf("%s: not a file or directory", src)
	}
	var im *Image
	switch {
	case st.has("manifest.json"):
		im, err = dockerSave(st, opt)
	case st.has("oci-layout"):
		im, err = ociLayout(st, opt)
	case fi.IsDir():
		err = errors.New("a directory holding neither an OCI image layout (oci-layout, index.json) nor a docker save (manifest.json)")
	}
	if err != nil {
		st.close()
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	im.Source, im.close = src, st.close
	return im, nil
}

// plainImage is a root filesystem tarball taken as one layer.
func plainImage(src string, size int64) *Image {
	return &Image{Source: src, Plain: true, Layers: []*Layer{{
		Name: src,
		Size: size,
		open: func() (io.ReadCloser, error) { return os.Open(src) },
	}}}
}

type dirStore string

func (d dirStore) path(name string) string { return filepath.Join(string(d), filepath.FromSlash(name)) }

func (d dirStore) open(name string) (io.ReadCloser, int64, error) {
	if !cleanName(name) {
		return nil, 0, fmt.Errorf("bad file name %q in the image", name)
	}
	// O_NONBLOCK: a FIFO in its place must not hang the open.
	f, err := os.OpenFile(d.path(name), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s: not a regular file", name)
	}
	return f, fi.Size(), nil
}

func (d dirStore) has(name string) bool {
	_, err := os.Stat(d.path(name))
	return err == nil
}

func (dirStore) close() error { return nil }

// cleanName accepts a relative slash path that stays below its root.
func cleanName(name string) bool {
	return name != "" && !path.IsAbs(name) && path.Clean(name) == name && name != ".." && !strings.HasPrefix(name, "../")
}

// tarStore is a tar archive on disk, indexed once.
type tarStore struct {
	f     *os.File
	idx   map[string][2]int64 // offset, size
	links map[string]string   // symlinks (docker save links a shared layer)
}

// openTar indexes a tar file. plain is true for a compressed file, and for
// a tar that is neither a docker save nor an OCI layout: a root
// filesystem.
func openTar(src string) (*tarStore, bool, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, false, err
	}
	head := make([]byte, 4)
	io.ReadFull(f, head)
	if bytes.HasPrefix(head, gzipMagic) || bytes.HasPrefix(head, zstdMagic) {
		f.Close()
		return openCompressed(src)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, false, err
	}
	return indexTar(f, src)
}

// openCompressed opens a compressed tarball: a docker save or an OCI
// layout when its archive holds manifest.json or oci-layout (`docker save
// IMAGE | gzip`), decompressed into an unnamed temporary file of the cache
// directory's (or the temporary directory's) to be read at random;
// otherwise a root filesystem tarball (plain).
func openCompressed(src string) (*tarStore, bool, error) {
	if !holdsImage(src) {
		return nil, true, nil
	}
	lr, err := (&Layer{Name: src, Size: -1, open: func() (io.ReadCloser, error) { return os.Open(src) }}).Open()
	if err != nil {
		return nil, false, err
	}
	defer lr.Close()
	dir, err := DefaultCacheDir()
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		dir = ""
	}
	f, err := os.CreateTemp(dir, ".import-*.tar")
	if err != nil {
		return nil, false, err
	}
	os.Remove(f.Name()) // unnamed: gone with the last fd, whatever happens
	if _, err := io.Copy(f, lr); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("%s: decompressing: %w", src, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, false, err
	}
	return indexTar(f, src)
}

// holdsImage reads the compressed tarball src through and reports whether
// its archive has a manifest.json or an oci-layout at its top.
func holdsImage(src string) bool {
	lr, err := (&Layer{Name: src, Size: -1, open: func() (io.ReadCloser, error) { return os.Open(src) }}).Open()
	if err != nil {
		return false
	}
	defer lr.Close()
	tr := tar.NewReader(lr)
	for {
		h, err := tr.Next()
		if err != nil {
			return false
		}
		if n := path.Clean(strings.TrimPrefix(h.Name, "./")); h.Typeflag == tar.TypeReg && (n == "manifest.json" || n == "oci-layout") {
			return true
		}
	}
}

// indexTar indexes the regular files and links of the tar archive f: a
// docker save or an OCI layout, else (plain) a root filesystem, f closed.
func indexTar(f *os.File, src string) (*tarStore, bool, error) {
	ts := &tarStore{f: f, idx: map[string][2]int64{}, links: map[string]string{}}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, false, fmt.Errorf("%s: not a tar archive, or a corrupt one: %w", src, err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink {
			target := h.Linkname
			if h.Typeflag == tar.TypeSymlink {
				target = path.Join(path.Dir(name), target)
			}
			ts.links[name] = path.Clean(strings.TrimPrefix(target, "./"))
			continue
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		off, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			f.Close()
			return nil, false, err
		}
		ts.idx[name] = [2]int64{off, h.Size}
	}
	_, dsave := ts.idx["manifest.json"]
	_, layout := ts.idx["oci-layout"]
	if !dsave && !layout {
		f.Close()
		return nil, true, nil
	}
	return ts, false, nil
}

// resolve follows the archive's links from name to a file it holds.
func (t *tarStore) resolve(name string) (string, bool) {
	for i := 0; i < 8; i++ {
		if _, ok := t.idx[name]; ok {
			return name, true
		}
		next, ok := t.links[name]
		if !ok {
			return "", false
		}
		name = next
	}
	return "", false
}

func (t *tarStore) open(name string) (io.ReadCloser, int64, error) {
	r, ok := t.resolve(name)
	if !ok {
		return nil, 0, fmt.Errorf("%s: no such file in the archive", name)
	}
	e := t.idx[r]
	return io.NopCloser(io.NewSectionReader(t.f, e[0], e[1])), e[1], nil
}

func (t *tarStore) has(name string) bool { _, ok := t.resolve(name); return ok }
func (t *tarStore) close() error         { return t.f.Close() }

func readSmall(st store, name string) ([]byte, error) {
	r, size, err := st.open(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if size > smallMax {
		return nil, fmt.Errorf("%s: %d bytes, too large for a manifest or config", name, size)
	}
	return io.ReadAll(bufio.NewReader(r))
}

// dockerSave reads `docker save`'s manifest.json.
func dockerSave(st store, opt Options) (*Image, error) {
	b, err := readSmall(st, "manifest.json")
	if err != nil {
		return nil, err
	}
	var ms []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(b, &ms); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	if len(ms) == 0 {
		return nil, errors.New("manifest.json lists no image")
	}
	m := ms[0]
	if len(ms) > 1 || opt.Ref != "" {
		var have []string
		var picked []int
		for i, m := range ms {
			tags := m.RepoTags
			if len(tags) == 0 {
				tags = []string{"(untagged " + m.Config + ")"}
			}
			have = append(have, tags...)
			for _, tag := range m.RepoTags {
				if opt.Ref != "" && sameRef(opt.Ref, tag, false) {
					picked = append(picked, i)
					break
				}
			}
		}
		switch {
		case opt.Ref == "":
			return nil, &ChoiceError{fmt.Sprintf("the docker save holds %d images: %s; choose one with --ref", len(ms), strings.Join(have, ", "))}
		case len(picked) == 0:
			return nil, &ChoiceError{fmt.Sprintf("no image %s in the docker save; it holds %s", opt.Ref, strings.Join(have, ", "))}
		case len(picked) > 1:
			return nil, &ChoiceError{fmt.Sprintf("%d images of the docker save are tagged %s", len(picked), opt.Ref)}
		}
		m = ms[picked[0]]
	}
	raw, err := readSmall(st, m.Config)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if d, ok := blobDigest(m.Config); ok {
		if err := verifyBlob(descriptor{Digest: d}, raw, "config "+m.Config); err != nil {
			return nil, err
		}
	}
	c, err := parseImageConfig(raw)
	if err != nil {
		return nil, err
	}
	if err := checkPlatform(c, opt.Platform, opt.Explicit); err != nil {
		return nil, err
	}
	if len(c.RootFS.DiffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("the config lists %d layers, manifest.json %d", len(c.RootFS.DiffIDs), len(m.Layers))
	}
	im := &Image{Config: c.Config}
	for i, name := range m.Layers {
		if !st.has(name) {
			return nil, fmt.Errorf("layer %s: no such file", name)
		}
		l := &Layer{Name: fmt.Sprintf("layer %d of %d (%s)", i+1, len(m.Layers), name), DiffID: c.RootFS.DiffIDs[i], Size: -1}
		if d, ok := blobDigest(name); ok {
			l.Digest = d
		}
		l.open = func() (io.ReadCloser, error) {
			r, _, err := st.open(name)
			return r, err
		}
		im.Layers = append(im.Layers, l)
	}
	return im, nil
}

// blobDigest is the digest a blobs/sha256/HEX name gives its content.
func blobDigest(name string) (string, bool) {
	hex, ok := strings.CutPrefix(name, "blobs/sha256/")
	d := "sha256:" + hex
	return d, ok && checkDigest(d) == nil
}

// ociLayout reads an OCI image layout's index.json.
func ociLayout(st store, opt Options) (*Image, error) {
	top, err := readSmall(st, "index.json")
	if err != nil {
		return nil, err
	}
	if top, err = chooseNamed(top, opt.Ref); err != nil {
		return nil, err
	}
	get := func(d descriptor) ([]byte, error) {
		if err := checkDigest(d.Digest); err != nil {
			return nil, err
		}
		name := "blobs/sha256/" + strings.TrimPrefix(d.Digest, "sha256:")
		b, err := readSmall(st, name)
		if err != nil {
			return nil, err
		}
		return b, verifyBlob(d, b, name)
	}
	r, err := resolve(top, get, opt.Platform, opt.Explicit)
	if err != nil {
		return nil, err
	}
	im := &Image{Config: r.config.Config}
	im.Layers = layersOf(r, func(d descriptor) func() (io.ReadCloser, error) {
		return func() (io.ReadCloser, error) {
			rc, _, err := st.open("blobs/sha256/" + strings.TrimPrefix(d.Digest, "sha256:"))
			return rc, err
		}
	})
	return im, nil
}

// Annotations that name an image of an index: the OCI one (often the tag
// alone), and the full reference containerd and docker save write.
const (
	annotRefName    = "org.opencontainers.image.ref.name"
	annotContainerd = "io.containerd.image.name"
)

// chooseNamed narrows an OCI layout's index to the image named ref, or,
// with ref empty, refuses an index whose entries name several images.
// Entries of one name (one image for several platforms) stay for the
// platform to choose among.
func chooseNamed(top []byte, ref string) ([]byte, error) {
	var idx struct {
		MediaType string           `json:"mediaType"`
		Manifests []map[string]any `json:"manifests"`
	}
	var m manifest
	if json.Unmarshal(top, &m) != nil || !m.isIndex() || json.Unmarshal(top, &idx) != nil {
		return top, nil // resolve says what is wrong
	}
	var names []string
	seen := map[string]bool{}
	var keep []map[string]any
	for i, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "unknown" {
			continue // attestations
		}
		name := d.Annotations[annotContainerd]
		if name == "" {
			name = d.Annotations[annotRefName]
		}
		shown := name
		if shown == "" {
			shown = "(unnamed " + shortDigest(d.Digest) + ")"
		}
		if !seen[shown] {
			seen[shown] = true
			names = append(names, shown)
		}
		if ref != "" && (sameRef(ref, d.Annotations[annotContainerd], false) || sameRef(ref, d.Annotations[annotRefName], true)) {
			keep = append(keep, idx.Manifests[i])
		}
	}
	switch {
	case ref == "" && len(names) > 1 && len(seen) != countUnnamed(names):
		return nil, &ChoiceError{fmt.Sprintf("the OCI layout holds %d images: %s; choose one with --ref", len(names), strings.Join(names, ", "))}
	case ref == "":
		return top, nil
	case len(keep) == 0:
		return nil, &ChoiceError{fmt.Sprintf("no image %s in the OCI layout; it holds %s", ref, strings.Join(names, ", "))}
	}
	b, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": MediaOCIIndex, "manifests": keep})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// countUnnamed counts the unnamed entries of names: an index of unnamed
// entries alone is one image for several platforms, not a choice of images.
func countUnnamed(names []string) int {
	n := 0
	for _, s := range names {
		if strings.HasPrefix(s, "(unnamed ") {
			n++
		}
	}
	return n
}

// sameRef reports whether name names the image want asks for: the same
// string, the same reference once both are in full (alpine:3.20 is
// docker.io/library/alpine:3.20), or, with tagOnly and a name that is a
// bare tag (an OCI ref.name often is), the same tag.
func sameRef(want, name string, tagOnly bool) bool {
	if name == "" {
		return false
	}
	if want == name {
		return true
	}
	wr, err := ParseRef(want)
	if err != nil {
		return false
	}
	if tagOnly && tagRE().MatchString(name) && !strings.Contains(name, ":") {
		return wr.Tag == name && wr.Digest == ""
	}
	nr, err := ParseRef(name)
	return err == nil && wr.Registry == nr.Registry && wr.Repo == nr.Repo && wr.Tag == nr.Tag && (wr.Digest == "" || wr.Digest == nr.Digest)
}
