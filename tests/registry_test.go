//go:build lkl

package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A registry for the pull tests: Debian's docker-registry (the CNCF
// distribution registry) on 127.0.0.1, images pushed to it with the v2
// push API, and a proxy in front of it that the tests make misbehave:
// asking for a bearer token, answering 500, dropping a blob's connection
// half-way, or changing a blob's bytes.

// startRegistry starts docker-registry on a free loopback port and returns
// its base URL.
func startRegistry(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Skip("SKIP (needs Debian's docker-registry): apt-get install docker-registry")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr)
	cfgPath := filepath.Join(dir, "config.yml")
	os.WriteFile(cfgPath, []byte(cfg), 0o644)
	cmd := exec.Command(bin, "serve", cfgPath)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base := "http://" + addr
	for i := 0; ; i++ {
		resp, err := http.Get(base + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if i == 100 {
			t.Fatalf("docker-registry did not answer on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pushBlob uploads a blob with the monolithic v2 upload.
func pushBlob(t testing.TB, base, repo string, b []byte) {
	t.Helper()
	resp, err := http.Post(base+"/v2/"+repo+"/blobs/uploads/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("start upload: %s", resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(base)
	loc = u.ResolveReference(loc)
	q := loc.Query()
	q.Set("digest", digestOf(b))
	loc.RawQuery = q.Encode()
	req, _ := http.NewRequest("PUT", loc.String(), bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload blob: %s", resp.Status)
	}
}

func pushManifest(t testing.TB, base, repo, ref string, m blob) {
	t.Helper()
	req, _ := http.NewRequest("PUT", base+"/v2/"+repo+"/manifests/"+ref, bytes.NewReader(m.data))
	req.Header.Set("Content-Type", m.mediaType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("push manifest %s: %s %s", ref, resp.Status, body)
	}
}

// pushImage pushes an image as repo:tag; with several, an index of them
// (each with its platform) is the tag.
func pushImage(t testing.TB, base, repo, tag string, ims ...testImage) {
	t.Helper()
	var descs []map[string]any
	for _, im := range ims {
		m, c, ls := im.blobs(t)
		for _, l := range ls {
			pushBlob(t, base, repo, l.data)
		}
		pushBlob(t, base, repo, c.data)
		if len(ims) == 1 {
			pushManifest(t, base, repo, tag, m)
			return
		}
		pushManifest(t, base, repo, digestOf(m.data), m)
		d := m.desc()
		d["platform"] = map[string]any{"os": "linux", "architecture": im.archOrHost()}
		descs = append(descs, d)
	}
	idx := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":%s}`, mustJSON(descs))
	pushManifest(t, base, repo, tag, blob{"application/vnd.oci.image.index.v1+json", []byte(idx)})
}

// regProxy stands in front of the registry and misbehaves as told.
type regProxy struct {
	srv    *httptest.Server
	target *url.URL
	mu     sync.Mutex
	// bearer: /v2/ wants "Bearer good", from the token service at /token
	// (which wants user:pass when set); noChallenge: a 401 with no
	// WWW-Authenticate at all.
	bearer      bool
	user, pass  string
	noChallenge bool
	// refresh: the token service wants this refresh token (an identity
	// token) in an OAuth2 form POST, whose fields go to forms.
	refresh    string
	forms      []url.Values
	schema1    string // answer manifest requests with a schema 1 manifest of this media type
	status     int    // answer every /v2/ request with this status
	dropDigest string // cut this blob's first download after dropAfter bytes
	dropAfter  int64
	dropped    bool
	corrupt    string // change a byte of this blob
	ranges     []string
}

func newRegProxy(t *testing.T, base string) *regProxy {
	u, _ := url.Parse(base)
	p := &regProxy{target: u}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		path := resp.Request.URL.Path
		switch {
		case p.dropDigest != "" && strings.HasSuffix(path, "/blobs/"+p.dropDigest) && !p.dropped:
			p.dropped = true
			resp.Body = &cutReader{r: resp.Body, left: p.dropAfter}
		case p.corrupt != "" && strings.HasSuffix(path, "/blobs/"+p.corrupt):
			resp.Body = &flipReader{r: resp.Body}
		}
		return nil
	}
	rp.ErrorLog = nil
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		bearer, status, noChallenge := p.bearer, p.status, p.noChallenge
		user, pass := p.user, p.pass
		refresh, schema1 := p.refresh, p.schema1
		if rg := r.Header.Get("Range"); rg != "" {
			p.ranges = append(p.ranges, rg)
		}
		p.mu.Unlock()
		if r.URL.Path == "/token" && refresh != "" {
			r.ParseForm()
			p.mu.Lock()
			p.forms = append(p.forms, r.PostForm)
			p.mu.Unlock()
			if r.Method != "POST" || r.PostForm.Get("grant_type") != "refresh_token" || r.PostForm.Get("refresh_token") != refresh {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"invalid refresh token"}]}`)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"access_token":"good","refresh_token":"`+refresh+`","expires_in":300}`)
			return
		}
		if schema1 != "" && strings.Contains(r.URL.Path, "/manifests/") {
			w.Header().Set("Content-Type", schema1)
			io.WriteString(w, `{"schemaVersion":1,"name":"test/old","tag":"v1","architecture":"amd64","fsLayers":[{"blobSum":"sha256:a3ed95caeb02ffe68cdd9fd84406680ae93d633cb16422d00e8a7c22955b46d4"}],"history":[{"v1Compatibility":"{}"}]}`)
			return
		}
		if r.URL.Path == "/token" {
			if u, pw, ok := r.BasicAuth(); user != "" && (!ok || u != user || pw != pass) {
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}`, http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"token":"good"}`)
			return
		}
		if status != 0 {
			http.Error(w, "broken on purpose", status)
			return
		}
		if bearer && r.Header.Get("Authorization") != "Bearer good" {
			if !noChallenge {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="test-registry"`, p.srv.URL))
			}
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// host is the proxy's host:port, for image references.
func (p *regProxy) host() string { return strings.TrimPrefix(p.srv.URL, "http://") }

type cutReader struct {
	r    io.ReadCloser
	left int64
}

func (c *cutReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		return 0, errors.New("connection dropped on purpose")
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}

func (c *cutReader) Close() error { return c.r.Close() }

type flipReader struct {
	r    io.ReadCloser
	done bool
}

func (f *flipReader) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	if n > 0 && !f.done {
		b[n/2] ^= 0xff
		f.done = true
	}
	return n, err
}

func (f *flipReader) Close() error { return f.r.Close() }
