package oci

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// certsDirs are where a registry's own CA and client certificates are
// looked for, as Podman and Docker users set them up: a directory named
// for the registry (HOST or HOST:PORT) under the first of these that has
// one.
func certsDirs() []string {
	var ds []string
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		ds = append(ds, filepath.Join(x, "containers", "certs.d"))
	} else if home, err := os.UserHomeDir(); err == nil {
		ds = append(ds, filepath.Join(home, ".config", "containers", "certs.d"))
	}
	return append(ds, "/etc/containers/certs.d", "/etc/docker/certs.d")
}

// registryCertDir is the directory holding ref's registry's certificates:
// certDir when given (--cert-dir), else the registry's directory in the
// first certs.d that has one, else "".
func registryCertDir(ref Ref, certDir string) string {
	if certDir != "" {
		return certDir
	}
	names := []string{ref.Registry}
	if ref.Host != ref.Registry {
		names = append(names, ref.Host)
	}
	for _, d := range certsDirs() {
		for _, n := range names {
			p := filepath.Join(d, n)
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				return p
			}
		}
	}
	return ""
}

// tlsConfig is the TLS configuration for a registry whose certificates
// are in dir: the system's CAs plus dir's *.crt, and dir's client pairs
// NAME.cert and NAME.key. An empty dir gives Go's defaults (nil).
func tlsConfig(dir string) (*tls.Config, error) {
	if dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	cfg := &tls.Config{}
	for _, n := range names {
		p := filepath.Join(dir, n)
		switch {
		case strings.HasSuffix(n, ".crt"):
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("certificates: %w", err)
			}
			if cfg.RootCAs == nil {
				if cfg.RootCAs, err = x509.SystemCertPool(); err != nil || cfg.RootCAs == nil {
					cfg.RootCAs = x509.NewCertPool()
				}
			}
			if !cfg.RootCAs.AppendCertsFromPEM(b) {
				return nil, fmt.Errorf("certificates: %s: no PEM certificate in it", p)
			}
		case strings.HasSuffix(n, ".cert"):
			key := strings.TrimSuffix(p, ".cert") + ".key"
			pair, err := tls.LoadX509KeyPair(p, key)
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("certificates: client certificate %s has no key %s", p, filepath.Base(key))
			}
			if err != nil {
				return nil, fmt.Errorf("certificates: client pair %s: %w", p, err)
			}
			cfg.Certificates = append(cfg.Certificates, pair)
		case strings.HasSuffix(n, ".key"):
			if _, err := os.Stat(strings.TrimSuffix(p, ".key") + ".cert"); err != nil {
				return nil, fmt.Errorf("certificates: key %s has no client certificate %s", p, strings.TrimSuffix(n, ".key")+".cert")
			}
		}
	}
	return cfg, nil
}
