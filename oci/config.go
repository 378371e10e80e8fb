// Package oci reads container images: `docker save` tarballs, OCI image
// layouts (a directory or a tar of one), plain root filesystem tarballs,
// and images in a registry (the distribution v2 protocol). It yields an
// image's layers, verified against their digests and decompressed, and the
// part of its configuration kbox applies when it runs the image. It does
// not build filesystems: package rootfs applies the layers to an ext4
// image through the kernel.
package oci

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Config is the part of an image's configuration that becomes kbox's
// defaults for the image (the OCI image spec's config object).
type Config struct {
	Env        []string `json:"Env,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
	User       string   `json:"User,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
}

// Empty reports whether the config sets nothing.
func (c *Config) Empty() bool {
	return c == nil || len(c.Env) == 0 && c.WorkingDir == "" && c.User == "" && len(c.Entrypoint) == 0 && len(c.Cmd) == 0
}

// imageConfig is the image configuration blob (docker save's and the OCI
// layout's config file, a registry's config blob).
type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
	Config       Config `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

func parseImageConfig(b []byte) (*imageConfig, error) {
	var c imageConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	for _, d := range c.RootFS.DiffIDs {
		if err := checkDigest(d); err != nil {
			return nil, fmt.Errorf("image config: diff_id: %w", err)
		}
	}
	return &c, nil
}

// checkDigest accepts the digests kbox can verify: sha256:<64 hex>.
func checkDigest(d string) error {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return fmt.Errorf("bad digest %q: want sha256:<64 lowercase hex digits>", d)
	}
	return nil
}
