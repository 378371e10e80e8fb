package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// PullOptions configure Pull.
type PullOptions struct {
	Platform Platform
	Explicit bool
	// CacheDir is the blob cache (DefaultCacheDir when empty).
	CacheDir string
	// Progress receives a line per layer; with Terminal set, a line
	// redrawn as the layer comes.
	Progress io.Writer
	Terminal bool
	// CertDir holds the registry's CA (*.crt) and client pair (NAME.cert,
	// NAME.key); empty: the registry's directory in certs.d (certs.go).
	CertDir string
}

// DefaultCacheDir is $XDG_CACHE_HOME/kbox, else ~/.cache/kbox.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "kbox"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set XDG_CACHE_HOME or HOME: %w", err)
	}
	return filepath.Join(home, ".cache", "kbox"), nil
}

// The cache holds blobs by digest (blobs/sha256/HEX), a blob being
// downloaded under HEX.partial (resumed by the next pull), and a record
// per pulled reference (refs/HASH.json: the blobs it uses), which --prune
// keeps.
type cache struct{ dir string }

func (c cache) blob(d string) string {
	return filepath.Join(c.dir, "blobs", "sha256", strings.TrimPrefix(d, "sha256:"))
}

// Pull resolves ref in its registry, downloads into the cache the layers
// it does not hold yet, each verified against its digest, and returns the
// image, its layers read from the cache.
func Pull(ref Ref, opt PullOptions) (*Image, error) {
	if opt.Platform.OS == "" {
		opt.Platform = HostPlatform()
	}
	if opt.CacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		opt.CacheDir = d
	}
	cc := cache{opt.CacheDir}
	if err := os.MkdirAll(filepath.Join(cc.dir, "blobs", "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(cc.dir, "refs"), 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	c, err := newClient(ref, opt.CertDir)
	if err != nil {
		return nil, err
	}
	if err := c.ping(); err != nil {
		return nil, err
	}
	top, _, err := c.getSmall("manifests", ref.reference(), descriptor{Digest: ref.Digest})
	if errors.Is(err, errSchema1) {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if err != nil {
		return nil, err
	}
	get := func(d descriptor) ([]byte, error) {
		kind := "blobs"
		switch d.MediaType {
		case MediaOCIIndex, MediaOCIManifest, MediaDockerList, MediaDockerV2, MediaDockerV1, MediaDockerV1JWS:
			kind = "manifests"
		}
		b, _, err := c.getSmall(kind, d.Digest, d)
		return b, err
	}
	r, err := resolve(top, get, opt.Platform, opt.Explicit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	im := &Image{Source: ref.String(), Config: r.config.Config}
	im.Layers = layersOf(r, func(d descriptor) func() (io.ReadCloser, error) {
		p := cc.blob(d.Digest)
		return func() (io.ReadCloser, error) { return os.Open(p) }
	})
	used := []string{r.manifest.Config.Digest}
	for _, d := range r.manifest.Layers {
		used = append(used, d.Digest)
	}
	if err := cc.fetchAll(c, r.manifest.Layers, opt); err != nil {
		return nil, err
	}
	// The config is kept too: a record names only blobs that exist.
	if err := os.WriteFile(cc.blob(r.manifest.Config.Digest), r.raw, 0o644); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	rec, _ := json.Marshal(map[string]any{"ref": ref.String(), "blobs": used, "pulled": time.Now().UTC().Format(time.RFC3339)})
	sum := sha256.Sum256([]byte(ref.String()))
	if err := os.WriteFile(filepath.Join(cc.dir, "refs", hex.EncodeToString(sum[:8])+".json"), rec, 0o644); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	return im, nil
}

// parallelDownloads is how many layers download at once (one on a
// terminal, whose progress bar is one line).
const parallelDownloads = 3

// fetchAll puts the layers in the cache, each blob once, a few at a time;
// it returns the first layer's error.
func (cc cache) fetchAll(c *client, ls []descriptor, opt PullOptions) error {
	n := parallelDownloads
	if opt.Terminal {
		n = 1
	}
	sem := make(chan struct{}, n)
	errs := make([]error, len(ls))
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for i, d := range ls {
		if seen[d.Digest] {
			continue
		}
		seen[d.Digest] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = cc.fetch(c, d, fmt.Sprintf("layer %d/%d", i+1, len(ls)), opt)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// fetch puts the blob d in the cache, resuming a partial download.
func (cc cache) fetch(c *client, d descriptor, name string, opt PullOptions) error {
	final := cc.blob(d.Digest)
	say := func(format string, a ...any) {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "kbox: %s %s: "+format+"\n", append([]any{name, shortDigest(d.Digest)}, a...)...)
		}
	}
	if st, err := os.Stat(final); err == nil && (d.Size <= 0 || st.Size() == d.Size) {
		say("%s, cached", mb(st.Size()))
		return nil
	}
	part := final + ".partial"
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("cache: %s is being downloaded by another kbox", shortDigest(d.Digest))
	}
	off, _ := f.Seek(0, io.SeekEnd)
	if d.Size > 0 && off > d.Size {
		f.Truncate(0)
		off = 0
	}
	resumed := off
	h := http.Header{}
	if off > 0 && (d.Size <= 0 || off < d.Size) {
		h.Set("Range", fmt.Sprintf("bytes=%d-", off))
	}
	if d.Size <= 0 || off < d.Size {
		resp, err := c.get(c.url("blobs", d.Digest), h)
		var re *RegistryError
		if errors.As(err, &re) && strings.HasPrefix(re.Status, "416") {
			// The partial download is no prefix the registry knows.
			f.Truncate(0)
			off, resumed = 0, 0
			resp, err = c.get(c.url("blobs", d.Digest), nil)
		}
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusPartialContent && off > 0 {
			f.Truncate(0) // the registry sent the whole blob
			off, resumed = 0, 0
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
		pw := &progressWriter{w: f, opt: opt, name: name, digest: d.Digest, total: d.Size, done: off}
		body := newIdleReader(resp.Body, idleTimeout)
		n, err := io.Copy(pw, body)
		pw.end()
		if body.timedOut() {
			err = fmt.Errorf("no data for %v", idleTimeout)
		}
		if err != nil {
			return fmt.Errorf("%s %s: download interrupted at %d of %d bytes (kept: the next pull resumes): %w", name, shortDigest(d.Digest), off+n, d.Size, err)
		}
	}
	if err := verifyFile(f, d); err != nil {
		f.Close()
		os.Remove(part)
		return fmt.Errorf("%s: %w (the download is deleted)", name, err)
	}
	if err := os.Rename(part, final); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if resumed > 0 {
		say("%s, resumed at %s", mb(d.Size), mb(resumed))
	} else {
		say("%s, downloaded", mb(d.Size))
	}
	return nil
}

// idleTimeout ends a download that stalls.
const idleTimeout = 60 * time.Second

// idleReader closes a body that sends nothing for a while, which ends
// the read waiting on it.
type idleReader struct {
	rc    io.ReadCloser
	d     time.Duration
	t     *time.Timer
	fired atomic.Bool
}

func newIdleReader(rc io.ReadCloser, d time.Duration) *idleReader {
	r := &idleReader{rc: rc, d: d}
	r.t = time.AfterFunc(d, func() { r.fired.Store(true); rc.Close() })
	return r
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.t.Reset(r.d)
	n, err := r.rc.Read(p)
	if err != nil {
		r.t.Stop()
	}
	return n, err
}

func (r *idleReader) timedOut() bool { return r.fired.Load() }

// verifyFile checks a downloaded blob's size and digest.
func verifyFile(f *os.File, d descriptor) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != d.Digest {
		return &DigestError{What: "blob " + shortDigest(d.Digest), Want: d.Digest, Got: got}
	}
	if d.Size > 0 && n != d.Size {
		return fmt.Errorf("blob %s: %d bytes where %d were announced", shortDigest(d.Digest), n, d.Size)
	}
	return nil
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// progressWriter counts a download and, on a terminal, redraws its line.
type progressWriter struct {
	w            io.Writer
	opt          PullOptions
	name, digest string
	total, done  int64
	last         time.Time
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	if p.opt.Terminal && p.opt.Progress != nil && time.Since(p.last) > 100*time.Millisecond {
		p.last = time.Now()
		const width = 30
		fill := width
		if p.total > 0 {
			fill = int(p.done * width / p.total)
		}
		fmt.Fprintf(p.opt.Progress, "\rkbox: %s %s [%s%s] %s / %s", p.name, shortDigest(p.digest), strings.Repeat("=", fill), strings.Repeat(" ", width-fill), mb(p.done), mb(p.total))
	}
	return n, err
}

func (p *progressWriter) end() {
	if p.opt.Terminal && p.opt.Progress != nil && !p.last.IsZero() {
		fmt.Fprint(p.opt.Progress, "\r\033[K")
	}
}

// Prune removes the cache's blobs that no pulled reference uses, and
// partial downloads. It returns how many files and bytes it removed.
func Prune(dir string) (int, int64, error) {
	if dir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return 0, 0, err
		}
		dir = d
	}
	keep := map[string]bool{}
	recs, _ := filepath.Glob(filepath.Join(dir, "refs", "*.json"))
	for _, r := range recs {
		b, err := os.ReadFile(r)
		if err != nil {
			return 0, 0, err
		}
		var rec struct{ Blobs []string }
		if err := json.Unmarshal(b, &rec); err != nil {
			return 0, 0, fmt.Errorf("cache record %s: %w", r, err)
		}
		for _, d := range rec.Blobs {
			keep[strings.TrimPrefix(d, "sha256:")] = true
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	var n int
	var bytes int64
	for _, e := range ents {
		if keep[e.Name()] {
			continue
		}
		p := filepath.Join(dir, "blobs", "sha256", e.Name())
		if fi, err := e.Info(); err == nil {
			bytes += fi.Size()
		}
		if err := os.Remove(p); err != nil {
			return n, bytes, err
		}
		n++
	}
	return n, bytes, nil
}
