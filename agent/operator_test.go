package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newTestServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.TmpDir = t.TempDir()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestImageNames: an agent names an image of the operator's directory by
// bare name; anything else is a clear error, and a host path never
// resolves.
func TestImageNames(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"alpine.ext4", "debian", "both", "both.ext4", ".hidden.ext4"} {
		os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644)
	}
	os.Mkdir(filepath.Join(dir, "subdir.ext4"), 0o755)
	outside := filepath.Join(t.TempDir(), "secret.ext4")
	os.WriteFile(outside, []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link.ext4")) // the operator's own link
	def := filepath.Join(t.TempDir(), "default.ext4")
	os.WriteFile(def, []byte("x"), 0o644)
	s := newTestServer(t, Config{Image: def, Images: dir})
	cases := []struct {
		name, want, err string
	}{
		{"", def, ""},
		{"alpine", filepath.Join(dir, "alpine.ext4"), ""},
		{"alpine.ext4", filepath.Join(dir, "alpine.ext4"), ""},
		{"debian", filepath.Join(dir, "debian"), ""},
		{"both", filepath.Join(dir, "both.ext4"), ""},
		{"link", filepath.Join(dir, "link.ext4"), ""},
		{"nope", "", "not one of the server's images: alpine, both, debian, link"},
		{"subdir", "", "not one of the server's images"},
		{outside, "", "bare name"},
		{"../" + filepath.Base(dir) + "/alpine", "", "bare name"},
		{"a/b", "", "bare name"},
		{"..", "", "bare name"},
		{"a..b", "", "bare name"},
		{".hidden", "", "bare name"},
		{"/etc/passwd", "", "bare name"},
		{"x\x00y", "", "bare name"},
		{strings.Repeat("a", 300), "", "bare name"},
	}
	for _, c := range cases {
		got, err := s.imageOf(c.name)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("imageOf(%q) = %q, %v; want %q", c.name, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("imageOf(%q) = %q, %v; want an error with %q", c.name, got, err, c.err)
		}
	}
	// Without --images, names are refused; without --image, so is none.
	s2 := newTestServer(t, Config{Image: def})
	if _, err := s2.imageOf("alpine"); err == nil || !strings.Contains(err.Error(), "no --images") {
		t.Errorf("a name without --images: %v", err)
	}
	s3 := newTestServer(t, Config{Images: dir})
	if _, err := s3.imageOf(""); err == nil || !strings.Contains(err.Error(), "one of: alpine") {
		t.Errorf("no name without --image: %v", err)
	}
}

// TestSnapshotNames: a snapshot is NAME.ext4 in the operator's directory,
// never replacing one unless allowed; the rename does not replace even
// when one appears after the check.
func TestSnapshotNames(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "old.ext4"), []byte("old"), 0o644)
	s := newTestServer(t, Config{Images: dir, Snapshots: dir})
	for _, c := range []struct{ name, want, err string }{
		{"new", filepath.Join(dir, "new.ext4"), ""},
		{"new.ext4", filepath.Join(dir, "new.ext4"), ""},
		{"old", "", "exists already"},
		{"/root/.anything", "", "bare name"},
		{"../x", "", "bare name"},
		{".x", "", "bare name"},
	} {
		got, err := s.snapshotPath(c.name)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("snapshotPath(%q) = %q, %v; want %q", c.name, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("snapshotPath(%q) = %q, %v; want an error with %q", c.name, got, err, c.err)
		}
	}
	tmp := filepath.Join(dir, ".old.ext4.kbox-tmp-1")
	os.WriteFile(tmp, []byte("new"), 0o644)
	if err := s.publish(tmp, filepath.Join(dir, "old.ext4")); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("publish over an existing snapshot: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "old.ext4")); string(b) != "old" {
		t.Errorf("the existing snapshot was replaced: %q", b)
	}
	ow := newTestServer(t, Config{Images: dir, Snapshots: dir, SnapshotsOverwrite: true})
	if _, err := ow.snapshotPath("old"); err != nil {
		t.Errorf("overwrite allowed: %v", err)
	}
	if err := ow.publish(tmp, filepath.Join(dir, "old.ext4")); err != nil {
		t.Errorf("publish with overwrite: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "old.ext4")); string(b) != "new" {
		t.Errorf("the snapshot was not replaced: %q", b)
	}
	none := newTestServer(t, Config{Images: dir})
	if _, err := none.snapshotPath("x"); err == nil || !strings.Contains(err.Error(), "no --snapshots") {
		t.Errorf("without --snapshots: %v", err)
	}
}

// TestSettingsHash: the hash covers the images, the policy and the
// network, and nothing else changes it.
func TestSettingsHash(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "a.ext4")
	os.WriteFile(img, []byte("x"), 0o644)
	base := Config{Image: img}
	h := func(c Config) string { return newTestServer(t, c).SettingsSHA256() }
	h0 := h(base)
	if len(h0) != 64 || h(base) != h0 {
		t.Fatalf("hash %q not stable", h0)
	}
	if h(Config{Image: img, Audit: "/x", MaxSessions: 3}) != h0 {
		t.Errorf("the audit file or the session limit changed the hash")
	}
	for name, c := range map[string]Config{
		"images":    {Image: img, Images: dir},
		"snapshots": {Image: img, Snapshots: dir},
		"policy":    {Image: img, Policy: []byte("[paths]\nhidden = [\"/x\"]\n")},
		"net":       {Image: img, Net: Net{Enabled: true}},
		"net-allow": {Image: img, Net: Net{Enabled: true, Allow: []string{"127.0.0.1:80"}}},
	} {
		if h(c) == h0 {
			t.Errorf("%s: the hash did not change", name)
		}
	}
	if _, err := New(Config{Image: img, Policy: []byte("[pathz]\n"), TmpDir: t.TempDir()}); err == nil {
		t.Errorf("a bad operator policy was taken")
	}
}
