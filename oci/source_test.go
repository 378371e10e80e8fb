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

// TestSameRef: how --ref matches an image's names.
func TestSameRef(t *testing.T) {
	for _, c := range []struct {
		want, name string
		tagOnly    bool
		same       bool
	}{
		{"alpine:3.20", "alpine:3.20", false, true},
		{"alpine:3.20", "docker.io/library/alpine:3.20", false, true},
		{"docker.io/library/alpine:3.20", "alpine:3.20", false, true},
		{"alpine", "alpine:latest", false, true},
		{"alpine:3.20", "alpine:3.19", false, false},
		{"alpine:3.20", "busybox:3.20", false, false},
		{"reg.example:5000/a/b:v1", "reg.example:5000/a/b:v1", false, true},
		{"reg.example:5000/a/b:v1", "a/b:v1", false, false},
		{"alpine:3.20", "3.20", true, true},
		{"alpine:3.20", "3.20", false, false},
		{"3.20", "3.20", true, true},
		{"alpine:3.20", "", true, false},
		{"Bad Ref", "x:1", false, false},
	} {
		if got := sameRef(c.want, c.name, c.tagOnly); got != c.same {
			t.Errorf("sameRef(%q, %q, %v) = %v, want %v", c.want, c.name, c.tagOnly, got, c.same)
		}
	}
}

// TestChooseNamed: an OCI index naming several images needs a --ref; one
// image's entries for several platforms do not.
func TestChooseNamed(t *testing.T) {
	entry := func(digit, name, arch string) string {
		s := `{"mediaType":"` + MediaOCIManifest + `","digest":"sha256:` + strings.Repeat(digit, 64) + `","size":1`
		if arch != "" {
			s += `,"platform":{"os":"linux","architecture":"` + arch + `"}`
		}
		if name != "" {
			s += `,"annotations":{"` + annotRefName + `":"` + name + `"}`
		}
		return s + "}"
	}
	index := func(es ...string) []byte {
		return []byte(`{"schemaVersion":2,"mediaType":"` + MediaOCIIndex + `","manifests":[` + strings.Join(es, ",") + `]}`)
	}
	two := index(entry("a", "a:1", ""), entry("b", "b:2", ""))
	platforms := index(entry("a", "", "amd64"), entry("b", "", "arm64"))
	for _, c := range []struct {
		name, ref string
		top       []byte
		err       string
		digests   []string // the entries kept
	}{
		{"several, no ref", "", two, "holds 2 images: a:1, b:2; choose one with --ref", nil},
		{"several, ref", "b:2", two, "", []string{"b"}},
		{"several, ref by tag alone", "x/b:2", index(entry("a", "1", ""), entry("b", "2", "")), "", []string{"b"}},
		{"several, ref missing", "c:3", two, "no image c:3 in the OCI layout; it holds a:1, b:2", nil},
		{"one name, two platforms", "", index(entry("a", "a:1", "amd64"), entry("b", "a:1", "arm64")), "", []string{"a", "b"}},
		{"one name, two platforms, ref", "a:1", index(entry("a", "a:1", "amd64"), entry("b", "a:1", "arm64")), "", []string{"a", "b"}},
		{"unnamed platforms", "", platforms, "", []string{"a", "b"}},
		{"unnamed, ref", "a:1", platforms, "no image a:1", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := chooseNamed(c.top, c.ref)
			if c.err != "" {
				var ce *ChoiceError
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &ce) {
					t.Fatalf("err %v, want a ChoiceError with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var m manifest
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range m.Manifests {
				got = append(got, d.Digest[len("sha256:"):][:1])
			}
			if strings.Join(got, ",") != strings.Join(c.digests, ",") {
				t.Errorf("kept %v, want %v", got, c.digests)
			}
		})
	}
}

// TestSchema1: a schema 1 manifest is refused by its media type or its
// schemaVersion, anything else passes.
func TestSchema1(t *testing.T) {
	v1 := []byte(`{"schemaVersion":1,"name":"x","tag":"1","fsLayers":[]}`)
	for _, c := range []struct {
		mediaType string
		body      []byte
		refused   bool
	}{
		{MediaDockerV1JWS, v1, true},
		{MediaDockerV1 + "; charset=utf-8", []byte(`{}`), true},
		{"application/json", v1, true},
		{MediaOCIManifest, []byte(`{"schemaVersion":2}`), false},
		{"", []byte(`not json`), false},
	} {
		err := checkSchema1(c.mediaType, c.body)
		if (err != nil) != c.refused || err != nil && !strings.Contains(err.Error(), "deprecated Docker schema 1") {
			t.Errorf("%s %s: %v, refused want %v", c.mediaType, c.body, err, c.refused)
		}
	}
	if _, err := resolve(v1, nil, HostPlatform(), false); !errors.Is(err, errSchema1) {
		t.Errorf("resolve of a schema 1 manifest: %v", err)
	}
}
