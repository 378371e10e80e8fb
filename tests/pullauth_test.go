//go:build lkl

package tests

import (
	"archive/tar"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kbox pull with an identity token from Docker's config.json, over TLS
// to a registry with its own CA that wants a client certificate, and of
// a schema 1 manifest (docs/images.md).

// TestPullIdentityToken: an identity token (auths.HOST.identitytoken, or
// a credential helper's "<token>" user) is an OAuth2 refresh token that
// the token service trades for an access token; a token it refuses is a
// clear error.
func TestPullIdentityToken(t *testing.T) {
	base := startRegistry(t)
	pushImage(t, base, "test/idtok", "v1", markerImage(t, "", "idtok"))
	p := newRegProxy(t, base)
	p.bearer, p.refresh = true, "rt-good"
	ref := p.host() + "/test/idtok:v1"
	out := filepath.Join(t.TempDir(), "out.ext4")
	config := func(token string) string {
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, "config.json"), []byte(`{"auths":{"`+p.host()+`":{"auth":"","identitytoken":"`+token+`"}}}`), 0o600)
		return d
	}
	env, _ := pullEnv(t, "DOCKER_CONFIG="+config("rt-good"))
	if so, se, status := runKboxEnv(t, env, "pull", ref, "-o", out); status != 0 {
		t.Fatalf("identity token: %d %s %s", status, so, se)
	}
	if got, _ := debugfsCat(t, out, "/marker"); got != "idtok\n" {
		t.Errorf("/marker %q", got)
	}
	p.mu.Lock()
	if len(p.forms) == 0 {
		t.Error("the token service got no form")
	} else {
		f := p.forms[0]
		for k, want := range map[string]string{"grant_type": "refresh_token", "refresh_token": "rt-good", "client_id": "kbox",
			"service": "test-registry", "scope": "repository:test/idtok:pull"} {
			if f.Get(k) != want {
				t.Errorf("token form %s=%q, want %q (form %v)", k, f.Get(k), want, f)
			}
		}
	}
	p.mu.Unlock()
	os.Remove(out)
	// A credential helper's "<token>" answer is an identity token too.
	helperDir, helperCfg := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(helperDir, "docker-credential-kboxtok"), []byte("#!/bin/sh\nread server\n"+
		"echo '{\"ServerURL\":\"'$server'\",\"Username\":\"<token>\",\"Secret\":\"rt-good\"}'\n"), 0o755)
	os.WriteFile(filepath.Join(helperCfg, "config.json"), []byte(`{"credsStore":"kboxtok"}`), 0o600)
	henv, _ := pullEnv(t, "DOCKER_CONFIG="+helperCfg, "PATH="+helperDir+":"+os.Getenv("PATH"))
	if so, se, status := runKboxEnv(t, henv, "pull", ref, "-o", out); status != 0 || !fileExists(out) {
		t.Errorf("helper's identity token: %d %s %s", status, so, se)
	}
	os.Remove(out)
	// A token the service refuses.
	env, _ = pullEnv(t, "DOCKER_CONFIG="+config("rt-stale"))
	so, se, status := runKboxEnv(t, env, "pull", ref, "-o", out)
	if status != 125 || !strings.Contains(se, "refused the identity token") || !strings.Contains(se, "401") || fileExists(out) {
		t.Errorf("wrong identity token: status %d, stderr %q (stdout %q); want 125, the token refused, no %s", status, se, so, out)
	}
}

// testCA makes a CA, and certificates it signs: the server's (for
// 127.0.0.1) and a client's, as PEM.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kbox test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate and its key, PEM, for the server (with
// 127.0.0.1 as its address) or a client.
func (ca *testCA) issue(t *testing.T, serial int64, server bool) (certPEM, keyPEM []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "kbox test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// TestPullTLSCertDir: a registry on TLS with its own CA that wants a
// client certificate signed by it is pulled from with the certificates
// of --cert-dir or of the registry's certs.d directory, and refused
// clearly without them.
func TestPullTLSCertDir(t *testing.T) {
	base := startRegistry(t)
	pushImage(t, base, "test/tls", "v1", markerImage(t, "", "tls"))
	ca := newTestCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	srvCert, srvKey := ca.issue(t, 2, true)
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(u))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	ref := host + "/test/tls:v1"
	// Directories: the CA alone, the CA and a client pair, a client
	// certificate without its key.
	clientCert, clientKey := ca.issue(t, 3, false)
	caOnly, full, noKey := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{caOnly, full, noKey} {
		os.WriteFile(filepath.Join(d, "ca.crt"), ca.pem, 0o644)
	}
	os.WriteFile(filepath.Join(full, "client.cert"), clientCert, 0o644)
	os.WriteFile(filepath.Join(full, "client.key"), clientKey, 0o600)
	os.WriteFile(filepath.Join(noKey, "client.cert"), clientCert, 0o644)
	// XDG_CONFIG_HOME/containers/certs.d/HOST:PORT, as Podman has it.
	xdg := t.TempDir()
	certsD := filepath.Join(xdg, "containers", "certs.d", host)
	os.MkdirAll(certsD, 0o755)
	for _, n := range []string{"ca.crt", "client.cert", "client.key"} {
		b, _ := os.ReadFile(filepath.Join(full, n))
		os.WriteFile(filepath.Join(certsD, n), b, 0o600)
	}
	out := filepath.Join(t.TempDir(), "out.ext4")
	for _, c := range []struct {
		name  string
		xdg   string
		args  []string
		ok    bool
		wants []string
	}{
		{"no certificates", t.TempDir(), nil, false, []string{"TLS with " + host + " failed", "certificate signed by unknown authority", "--cert-dir", "certs.d/" + host}},
		{"CA without a client certificate", t.TempDir(), []string{"--cert-dir", caOnly}, false, []string{"TLS with " + host + " failed", "certificates from " + caOnly, "certificate required"}},
		{"client certificate without its key", t.TempDir(), []string{"--cert-dir", noKey}, false, []string{"client.cert has no key client.key"}},
		{"--cert-dir", t.TempDir(), []string{"--cert-dir", full}, true, nil},
		{"certs.d", xdg, nil, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, _ := pullEnv(t, "XDG_CONFIG_HOME="+c.xdg)
			so, se, status := runKboxEnv(t, env, append(append([]string{"pull"}, c.args...), ref, "-o", out)...)
			if c.ok {
				if status != 0 {
					t.Fatalf("pull: %d %s %s", status, so, se)
				}
				if got, _ := debugfsCat(t, out, "/marker"); got != "tls\n" {
					t.Errorf("/marker %q", got)
				}
				os.Remove(out)
				return
			}
			if status != 125 || fileExists(out) {
				t.Errorf("status %d, stderr %q; want 125 and no %s", status, se, out)
			}
			for _, w := range c.wants {
				if !strings.Contains(se, w) {
					t.Errorf("stderr %q lacks %q", se, w)
				}
			}
		})
	}
}

// TestPullSchema1: a registry serving a Docker schema 1 manifest (either
// media type) is refused with an error that says so and how to fix it.
func TestPullSchema1(t *testing.T) {
	base := startRegistry(t)
	p := newRegProxy(t, base)
	for _, mt := range []string{"application/vnd.docker.distribution.manifest.v1+json", "application/vnd.docker.distribution.manifest.v1+prettyjws"} {
		t.Run(mt[strings.LastIndex(mt, "+")+1:], func(t *testing.T) {
			p.mu.Lock()
			p.schema1 = mt
			p.mu.Unlock()
			env, cache := pullEnv(t)
			out := filepath.Join(t.TempDir(), "out.ext4")
			so, se, status := runKboxEnv(t, env, "pull", p.host()+"/test/old:v1", "-o", out)
			if status != 125 || !strings.Contains(se, "deprecated Docker schema 1 manifest format") || !strings.Contains(se, "re-push it with a current client") || fileExists(out) {
				t.Errorf("status %d, stderr %q (stdout %q); want 125, the schema 1 error, no %s", status, se, so, out)
			}
			if blobs, _ := filepath.Glob(filepath.Join(cache, "blobs", "sha256", "*")); len(blobs) != 0 {
				t.Errorf("blobs cached: %v", blobs)
			}
		})
	}
}

// TestPullRefused: an image whose layer climbs out of the root, or that
// does not fit --size, is refused after the pull as kbox import refuses
// it: status 125, no OUT, nothing in TMPDIR, and the cache holds only
// complete, verified blobs.
func TestPullRefused(t *testing.T) {
	base := startRegistry(t)
	host := strings.TrimPrefix(base, "http://")
	bb := busyboxEntries(t)
	pushImage(t, base, "test/escape", "v1", testImage{config: map[string]any{}, layers: tarLayers(t, [][]testEntry{bb,
		{{name: "../../etc/x", typ: tar.TypeReg, mode: 0o644, data: "x"}}})})
	pushImage(t, base, "test/big", "v1", testImage{config: map[string]any{}, layers: tarLayers(t, [][]testEntry{bb})})
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"dotdot entry", []string{host + "/test/escape:v1"}, `entry "../../etc/x": its ".." leaves the image's root: refused`},
		{"too small", []string{host + "/test/big:v1", "--size", "2M"}, "the image is full"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			env, cache := pullEnv(t, "TMPDIR="+tmp)
			outDir := t.TempDir()
			out := filepath.Join(outDir, "out.ext4")
			so, se, status := runKboxEnv(t, env, append(append([]string{"pull"}, c.args...), "-o", out)...)
			if status != 125 || !strings.Contains(se, c.want) {
				t.Errorf("status %d, stderr %q (stdout %q); want 125 and %q", status, se, so, c.want)
			}
			for _, d := range []string{tmp, outDir} {
				if left, _ := os.ReadDir(d); len(left) != 0 {
					t.Errorf("files left in %s: %v", d, left)
				}
			}
			blobs, _ := filepath.Glob(filepath.Join(cache, "blobs", "sha256", "*"))
			for _, b := range blobs {
				data, err := os.ReadFile(b)
				if err != nil || strings.HasSuffix(b, ".partial") || "sha256:"+filepath.Base(b) != digestOf(data) {
					t.Errorf("cache: %s is not a complete, verified blob", b)
				}
			}
		})
	}
}
