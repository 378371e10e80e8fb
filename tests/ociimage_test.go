//go:build lkl

package tests

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// Container images built by the tests, from layers they write with
// archive/tar: an OCI image layout, a docker save tarball, or blobs to
// push to a registry. testEntry is one tar entry of a layer.
type testEntry struct {
	name     string
	typ      byte
	mode     int64
	uid, gid int
	data     string
	link     string // symlink or hard link target
	major    int64
	minor    int64
	xattrs   map[string]string
	mtime    time.Time
}

// baseTime is the entries' mtime unless they set theirs.
var baseTime = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

func layerTar(t testing.TB, entries []testEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			Linkname: e.link, Devmajor: e.major, Devminor: e.minor, ModTime: e.mtime,
			Format: tar.FormatPAX,
		}
		if h.ModTime.IsZero() {
			h.ModTime = baseTime
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if len(e.xattrs) > 0 {
			h.PAXRecords = map[string]string{}
			for k, v := range e.xattrs {
				h.PAXRecords["SCHILY.xattr."+k] = v
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar %s: %v", e.name, err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte(e.data))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write(b)
	z.Close()
	return buf.Bytes()
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// testImage is an image: its layers (uncompressed tars) and config.
type testImage struct {
	layers [][]byte
	config map[string]any // the config object: Env, Cmd...
	arch   string         // default: the host's
}

type blob struct {
	mediaType string
	data      []byte
}

func (b blob) desc() map[string]any {
	return map[string]any{"mediaType": b.mediaType, "digest": digestOf(b.data), "size": len(b.data)}
}

// blobs returns the image's manifest, config and (gzipped) layer blobs.
func (im testImage) blobs(t testing.TB) (manifest blob, config blob, layers []blob) {
	t.Helper()
	arch := im.arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	var diffIDs []string
	for _, l := range im.layers {
		diffIDs = append(diffIDs, digestOf(l))
		layers = append(layers, blob{"application/vnd.oci.image.layer.v1.tar+gzip", gzipBytes(l)})
	}
	cfg := map[string]any{
		"architecture": arch, "os": "linux",
		"config": im.config,
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	}
	cb, _ := json.Marshal(cfg)
	config = blob{"application/vnd.oci.image.config.v1+json", cb}
	var ld []map[string]any
	for _, l := range layers {
		ld = append(ld, l.desc())
	}
	mb, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": config.desc(), "layers": ld,
	})
	return blob{"application/vnd.oci.image.manifest.v1+json", mb}, config, layers
}

func writeBlob(t testing.TB, dir string, b []byte) {
	t.Helper()
	p := filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(digestOf(b), "sha256:"))
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeOCILayout writes the images as an OCI image layout in dir: one
// image, or an index of several (each with its platform).
func writeOCILayout(t testing.TB, dir string, ims ...testImage) {
	t.Helper()
	var descs []map[string]any
	for _, im := range ims {
		m, c, ls := im.blobs(t)
		writeBlob(t, dir, m.data)
		writeBlob(t, dir, c.data)
		for _, l := range ls {
			writeBlob(t, dir, l.data)
		}
		d := m.desc()
		if len(ims) > 1 {
			arch := im.arch
			if arch == "" {
				arch = runtime.GOARCH
			}
			d["platform"] = map[string]any{"os": "linux", "architecture": arch}
		}
		descs = append(descs, d)
	}
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": descs})
	os.WriteFile(filepath.Join(dir, "index.json"), idx, 0o644)
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
}

// writeDockerSave writes the image as `docker save` does (its older
// layout: ID/layer.tar, uncompressed, and ID.json).
func writeDockerSave(t testing.TB, path string, im testImage) {
	t.Helper()
	_, c, _ := im.blobs(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, b []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b)), ModTime: baseTime})
		tw.Write(b)
	}
	cname := strings.TrimPrefix(digestOf(c.data), "sha256:") + ".json"
	var names []string
	for i, l := range im.layers {
		id := fmt.Sprintf("%064x", i+1)
		tw.WriteHeader(&tar.Header{Name: id + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: baseTime})
		add(id+"/layer.tar", l)
		names = append(names, id+"/layer.tar")
	}
	add(cname, c.data)
	mf, _ := json.Marshal([]map[string]any{{"Config": cname, "RepoTags": []string{"kbox/test:latest"}, "Layers": names}})
	add("manifest.json", mf)
	tw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// busyboxEntries is a layer's worth of a static busybox and its applets,
// with an /etc/passwd and /etc/group naming user app (1000) and group
// staff (50).
func busyboxEntries(t testing.TB) []testEntry {
	t.Helper()
	var bb []byte
	for _, p := range []string{"/usr/bin/busybox", "/bin/busybox"} {
		if b, err := os.ReadFile(p); err == nil {
			bb = b
			break
		}
	}
	if bb == nil {
		t.Skip("SKIP (needs a static busybox on the host): apt-get install busybox-static")
	}
	es := []testEntry{
		{name: "./", typ: tar.TypeDir, mode: 0o755},
		{name: "./bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "./bin/busybox", typ: tar.TypeReg, mode: 0o755, data: string(bb)},
		{name: "./etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "./etc/passwd", typ: tar.TypeReg, mode: 0o644, data: "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n"},
		{name: "./etc/group", typ: tar.TypeReg, mode: 0o644, data: "root:x:0:\nstaff:x:50:\napp:x:1000:\n"},
		{name: "./tmp/", typ: tar.TypeDir, mode: 0o1777},
	}
	applets := []string{"sh", "ls", "cat", "stat", "id", "env", "pwd", "echo", "test", "readlink", "find", "sort", "head"}
	sort.Strings(applets)
	for _, a := range applets {
		es = append(es, testEntry{name: "./bin/" + a, typ: tar.TypeSymlink, mode: 0o777, link: "busybox"})
	}
	return es
}

func (im testImage) archOrHost() string {
	if im.arch != "" {
		return im.arch
	}
	return runtime.GOARCH
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
