package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryCertDir: --cert-dir wins; else the registry's directory
// (HOST:PORT) in the first certs.d that has one, XDG_CONFIG_HOME's first.
func TestRegistryCertDir(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	ref, _ := ParseRef("127.0.0.1:5999/a/b:c")
	if d := registryCertDir(ref, ""); d != "" && !strings.HasPrefix(d, "/etc/") {
		t.Errorf("no certs.d entry: %q", d)
	}
	mine := filepath.Join(xdg, "containers", "certs.d", "127.0.0.1:5999")
	os.MkdirAll(mine, 0o755)
	if d := registryCertDir(ref, ""); d != mine {
		t.Errorf("certs.d: %q, want %q", d, mine)
	}
	if d := registryCertDir(ref, "/given"); d != "/given" {
		t.Errorf("--cert-dir: %q", d)
	}
}

// TestTLSConfigRefused: a directory whose files do not make a
// configuration is an error that names the file.
func TestTLSConfigRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		err   string
	}{
		{"no PEM in a .crt", map[string]string{"ca.crt": "nonsense"}, "ca.crt: no PEM certificate"},
		{"a .cert without its key", map[string]string{"c.cert": "x"}, "c.cert has no key c.key"},
		{"a .key without its certificate", map[string]string{"c.key": "x"}, "c.key has no client certificate c.cert"},
		{"a bad pair", map[string]string{"c.cert": "x", "c.key": "y"}, "client pair"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, b := range c.files {
				os.WriteFile(filepath.Join(dir, n), []byte(b), 0o600)
			}
			if _, err := tlsConfig(dir); err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("err %v, want %q", err, c.err)
			}
		})
	}
	if cfg, err := tlsConfig(""); cfg != nil || err != nil {
		t.Errorf("no directory: %v %v, want Go's defaults", cfg, err)
	}
	if _, err := tlsConfig(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing directory gave no error")
	}
}

// TestBasicWithIdentityToken: a registry that wants basic authentication
// is not sent an identity token, and the error says what config.json has.
func TestBasicWithIdentityToken(t *testing.T) {
	ref, _ := ParseRef("127.0.0.1:5999/a/b:c")
	c, err := newClient(ref, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c.creds = func() (credentials, bool) { return credentials{IdentityToken: "rt"}, true }
	if err := c.authenticate(`Basic realm="r"`); err == nil || !strings.Contains(err.Error(), "only an identity token") || c.auth != "" {
		t.Errorf("err %v, auth %q", err, c.auth)
	}
}
