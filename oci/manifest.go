package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
)

// Media types of manifests and indexes, OCI's and Docker's.
const (
	MediaOCIIndex      = "application/vnd.oci.image.index.v1+json"
	MediaOCIManifest   = "application/vnd.oci.image.manifest.v1+json"
	MediaDockerList    = "application/vnd.docker.distribution.manifest.list.v2+json"
	MediaDockerV2      = "application/vnd.docker.distribution.manifest.v2+json"
	MediaOCIConfig     = "application/vnd.oci.image.config.v1+json"
	MediaDockerConfig  = "application/vnd.docker.container.image.v1+json"
	MediaOCILayerGzip  = "application/vnd.oci.image.layer.v1.tar+gzip"
	MediaDockerLayer   = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	MediaDockerV1      = "application/vnd.docker.distribution.manifest.v1+json"
	MediaDockerV1JWS   = "application/vnd.docker.distribution.manifest.v1+prettyjws"
	manifestAcceptList = MediaOCIIndex + ", " + MediaOCIManifest + ", " + MediaDockerList + ", " + MediaDockerV2
)

// Platform is an image's operating system and CPU.
type Platform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
}

func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// HostPlatform is the platform kbox runs on.
func HostPlatform() Platform {
	p := Platform{OS: "linux", Architecture: runtime.GOARCH}
	if p.Architecture == "arm64" {
		p.Variant = "v8"
	}
	return p
}

// ParsePlatform parses OS/ARCH[/VARIANT], e.g. linux/arm64.
func ParsePlatform(s string) (Platform, error) {
	f := strings.Split(s, "/")
	if len(f) < 2 || len(f) > 3 || f[0] == "" || f[1] == "" {
		return Platform{}, fmt.Errorf("bad platform %q: want OS/ARCH[/VARIANT], e.g. linux/amd64", s)
	}
	p := Platform{OS: f[0], Architecture: f[1]}
	if len(f) == 3 {
		p.Variant = f[2]
	}
	return p, nil
}

// matches reports whether an image for p runs as want asks.
func (p Platform) matches(want Platform) bool {
	if p.OS != want.OS || p.Architecture != want.Architecture {
		return false
	}
	norm := func(v string) string {
		if v == "" && p.Architecture == "arm64" {
			return "v8"
		}
		return v
	}
	return want.Variant == "" || norm(p.Variant) == norm(want.Variant)
}

// descriptor points at a blob (OCI image spec, descriptor).
type descriptor struct {
	MediaType string    `json:"mediaType"`
	Digest    string    `json:"digest"`
	Size      int64     `json:"size"`
	Platform  *Platform `json:"platform,omitempty"`
	// Annotations name the image in an OCI layout's index.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// manifest is an image manifest or an index (a manifest list).
type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
	Manifests     []descriptor `json:"manifests"`
}

func (m *manifest) isIndex() bool {
	return m.MediaType == MediaOCIIndex || m.MediaType == MediaDockerList || m.MediaType == "" && m.Manifests != nil
}

// errSchema1 refuses a Docker schema 1 manifest (no config blob, layers
// listed top first with their history, signed with a JWS).
var errSchema1 = errors.New("the image uses the deprecated Docker schema 1 manifest format, which kbox does not read: re-push it with a current client (docker pull and docker push, or skopeo copy) to get a schema 2 or OCI manifest")

// checkSchema1 refuses a schema 1 manifest, by its media type or its
// schemaVersion.
func checkSchema1(mediaType string, b []byte) error {
	mt, _, _ := strings.Cut(mediaType, ";")
	switch strings.TrimSpace(mt) {
	case MediaDockerV1, MediaDockerV1JWS:
		return errSchema1
	}
	var m struct {
		SchemaVersion int `json:"schemaVersion"`
	}
	if json.Unmarshal(b, &m) == nil && m.SchemaVersion == 1 {
		return errSchema1
	}
	return nil
}

// verifyBlob checks b against the descriptor's digest and size.
func verifyBlob(d descriptor, b []byte, what string) error {
	if err := checkDigest(d.Digest); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	sum := sha256.Sum256(b)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.Digest {
		return &DigestError{What: what, Want: d.Digest, Got: got}
	}
	if d.Size > 0 && int64(len(b)) != d.Size {
		return fmt.Errorf("%s: %d bytes where %d were announced", what, len(b), d.Size)
	}
	return nil
}

// resolved is an image manifest and its config.
type resolved struct {
	manifest *manifest
	config   *imageConfig
	raw      []byte // the config blob
}

// resolve follows an index down to the manifest for the platform (want,
// or the host's when explicit is false) and reads its config. get reads a
// small blob (a manifest or a config) named by a descriptor, verified.
func resolve(top []byte, get func(descriptor) ([]byte, error), want Platform, explicit bool) (*resolved, error) {
	b := top
	for depth := 0; ; depth++ {
		var m manifest
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		if m.SchemaVersion == 1 || m.MediaType == MediaDockerV1 || m.MediaType == MediaDockerV1JWS {
			return nil, errSchema1
		}
		if !m.isIndex() {
			return readConfig(&m, get, want, explicit)
		}
		if depth == 4 {
			return nil, fmt.Errorf("manifest: indexes nested too deep")
		}
		d, err := selectManifest(m.Manifests, want, explicit)
		if err != nil {
			return nil, err
		}
		if b, err = get(d); err != nil {
			return nil, err
		}
	}
}

// selectManifest picks the index entry for the platform.
func selectManifest(ds []descriptor, want Platform, explicit bool) (descriptor, error) {
	var have []string
	var untagged []descriptor
	for _, d := range ds {
		if d.Platform == nil {
			untagged = append(untagged, d)
			continue
		}
		if d.Platform.OS == "unknown" {
			continue // attestations and signatures
		}
		if d.Platform.matches(want) {
			return d, nil
		}
		have = append(have, d.Platform.String())
	}
	if len(have) == 0 && len(untagged) == 1 {
		return untagged[0], nil // one image, no platform given: its config says
	}
	if len(have) == 0 && len(untagged) == 0 {
		return descriptor{}, fmt.Errorf("the index lists no image")
	}
	hint := "choose one with --platform"
	if explicit {
		hint = "--platform " + want.String() + " is not among them"
	}
	if len(have) == 0 {
		return descriptor{}, fmt.Errorf("the index lists %d images and no platform for them: %s", len(untagged), hint)
	}
	return descriptor{}, fmt.Errorf("no image for %s: the index has %s; %s", want, strings.Join(have, ", "), hint)
}

func readConfig(m *manifest, get func(descriptor) ([]byte, error), want Platform, explicit bool) (*resolved, error) {
	if m.Config.Digest == "" {
		return nil, fmt.Errorf("manifest: no config (schema 1 manifests are not supported)")
	}
	for _, l := range m.Layers {
		if err := checkDigest(l.Digest); err != nil {
			return nil, fmt.Errorf("manifest: layer: %w", err)
		}
	}
	raw, err := get(m.Config)
	if err != nil {
		return nil, err
	}
	c, err := parseImageConfig(raw)
	if err != nil {
		return nil, err
	}
	if err := checkPlatform(c, want, explicit); err != nil {
		return nil, err
	}
	if len(c.RootFS.DiffIDs) != 0 && len(c.RootFS.DiffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("image config lists %d layers, the manifest %d", len(c.RootFS.DiffIDs), len(m.Layers))
	}
	return &resolved{manifest: m, config: c, raw: raw}, nil
}

// checkPlatform refuses an image built for another platform than the one
// asked for (the host's by default).
func checkPlatform(c *imageConfig, want Platform, explicit bool) error {
	if c.Architecture == "" || c.OS == "" {
		return nil
	}
	got := Platform{OS: c.OS, Architecture: c.Architecture, Variant: c.Variant}
	if got.matches(want) {
		return nil
	}
	if explicit {
		return fmt.Errorf("the image is for %s, not %s", got, want)
	}
	return fmt.Errorf("the image is for %s, not this host's %s (give --platform %s to take it anyway)", got, want, got)
}

// layersOf makes the layers of a resolved image; open opens a blob.
func layersOf(r *resolved, open func(descriptor) func() (io.ReadCloser, error)) []*Layer {
	var ls []*Layer
	for i, d := range r.manifest.Layers {
		l := &Layer{
			Name:   fmt.Sprintf("layer %d of %d (%s)", i+1, len(r.manifest.Layers), shortDigest(d.Digest)),
			Digest: d.Digest,
			Size:   d.Size,
		}
		if d.Size <= 0 {
			l.Size = -1
		}
		if i < len(r.config.RootFS.DiffIDs) {
			l.DiffID = r.config.RootFS.DiffIDs[i]
		}
		l.open = open(d)
		ls = append(ls, l)
	}
	return ls
}
