package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func tarOf(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))})
		tw.Write([]byte(data))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readLayer reads a layer's tar to the end and verifies it.
func readLayer(l *Layer) ([]string, error) {
	r, err := l.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var names []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return names, err
		}
		names = append(names, h.Name)
	}
	return names, r.Finish()
}

// TestDockerSaveBlobs reads a docker save of Docker 25's layout (layers
// under blobs/sha256/), and finds a layer changed after the fact.
func TestDockerSaveBlobs(t *testing.T) {
	layer := tarOf(t, map[string]string{"hello": "world"})
	cfg, _ := json.Marshal(map[string]any{"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Cmd": []string{"/hello"}, "User": "1:2"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{sum(layer)}}})
	lname := "blobs/sha256/" + strings.TrimPrefix(sum(layer), "sha256:")
	cname := "blobs/sha256/" + strings.TrimPrefix(sum(cfg), "sha256:")
	mf, _ := json.Marshal([]map[string]any{{"Config": cname, "Layers": []string{lname}}})
	save := filepath.Join(t.TempDir(), "save.tar")
	os.WriteFile(save, tarOf(t, map[string]string{lname: string(layer), cname: string(cfg), "manifest.json": string(mf)}), 0o644)
	im, err := Open(save, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if im.Plain || len(im.Layers) != 1 || im.Config.User != "1:2" || len(im.Config.Cmd) != 1 {
		t.Fatalf("image %+v", im)
	}
	if names, err := readLayer(im.Layers[0]); err != nil || len(names) != 1 || names[0] != "hello" {
		t.Errorf("layer: %q %v", names, err)
	}
	// The same archive with the layer's bytes changed (same length).
	bad := bytes.Replace(layer, []byte("world"), []byte("WORLD"), 1)
	os.WriteFile(save, tarOf(t, map[string]string{lname: string(bad), cname: string(cfg), "manifest.json": string(mf)}), 0o644)
	im2, err := Open(save, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer im2.Close()
	var de *DigestError
	if _, err := readLayer(im2.Layers[0]); !errors.As(err, &de) {
		t.Errorf("changed layer: %v, want a digest mismatch", err)
	}
	// Another platform only.
	if _, err := Open(save, Options{Platform: Platform{OS: "linux", Architecture: "s390x"}, Explicit: true}); err == nil || !strings.Contains(err.Error(), "not linux/s390x") {
		t.Errorf("other platform: %v", err)
	}
}

// TestLayerTruncated: a gzip layer cut short says so.
func TestLayerTruncated(t *testing.T) {
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write(tarOf(t, map[string]string{"a": strings.Repeat("x", 100000)}))
	z.Close()
	b := buf.Bytes()[:buf.Len()/2]
	l := &Layer{Name: "layer 1", Size: -1, open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }}
	if _, err := readLayer(l); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated gzip: %v", err)
	}
	// An announced size that the blob does not have.
	whole := buf.Bytes()
	l = &Layer{Name: "layer 1", Size: int64(len(whole)) + 1, open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(whole)), nil }}
	if _, err := readLayer(l); err == nil || !strings.Contains(err.Error(), "were announced") {
		t.Errorf("size mismatch: %v", err)
	}
}

// TestDockerSaveLinkedLayer: older docker saves link a layer that two
// images' histories share (ID2/layer.tar -> ../ID1/layer.tar).
func TestDockerSaveLinkedLayer(t *testing.T) {
	layer := tarOf(t, map[string]string{"f": "shared"})
	cfg, _ := json.Marshal(map[string]any{"architecture": runtime.GOARCH, "os": "linux",
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{sum(layer), sum(layer)}}})
	mf, _ := json.Marshal([]map[string]any{{"Config": "c.json", "Layers": []string{"a/layer.tar", "b/layer.tar"}}})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, b []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))})
		tw.Write(b)
	}
	add("a/layer.tar", layer)
	tw.WriteHeader(&tar.Header{Name: "b/layer.tar", Typeflag: tar.TypeSymlink, Linkname: "../a/layer.tar"})
	add("c.json", cfg)
	add("manifest.json", mf)
	tw.Close()
	save := filepath.Join(t.TempDir(), "save.tar")
	os.WriteFile(save, buf.Bytes(), 0o644)
	im, err := Open(save, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	for _, l := range im.Layers {
		if names, err := readLayer(l); err != nil || len(names) != 1 {
			t.Errorf("%s: %q %v", l.Name, names, err)
		}
	}
}

// TestLayoutFIFO: a FIFO where a layout's blob should be is refused, not
// waited on.
func TestLayoutFIFO(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "index.json"), 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO index.json: %v", err)
	}
}
