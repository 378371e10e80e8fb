package tests

import (
	"os"

	"github.com/kbox-project/kbox/lkl"
	"path/filepath"
	"strings"
	"testing"
)

// These run the real kbox binary against bad input: each must give one
// clear line and a meaningful status, never a panic.
func TestBadImages(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.img")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a filesystem ", 1<<16)), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.img")
	os.WriteFile(empty, nil, 0o644)
	cases := []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"missing", []string{"image", "-S", filepath.Join(dir, "nope.ext4"), "--", "/bin/true"}, 125, "no such file"},
		{"directory", []string{"image", "-S", dir, "--", "/bin/true"}, 125, "is a directory"},
		{"garbage", []string{"image", "-S", garbage, "--", "/bin/true"}, 125, "not an ext2/3/4 filesystem"},
		{"empty", []string{"image", "-S", empty, "--", "/bin/true"}, 125, "too small"},
		{"bad bind", []string{"image", "-S", garbage, "-b", "nocolon", "--", "/bin/true"}, 2, "bad bind"},
		{"unknown option", []string{"image", "--frobnicate"}, 2, "unknown option --frobnicate"},
		{"no image", []string{"image", "--", "/bin/true"}, 2, "no image"},
		{"unknown command", []string{"frob"}, 2, "unknown command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !lkl.Available && c.status == 125 {
				// Without liblkl, every image run stops at the LKL check.
				c.status, c.want = 2, "built without LKL"
			}
			_, stderr, status := runKbox(t, c.args...)
			if status != c.status {
				t.Errorf("status %d, want %d (stderr %q)", status, c.status, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("stderr %q lacks %q", stderr, c.want)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
				t.Errorf("kbox panicked: %s", stderr)
			}
			// One line of error; an unknown command also prints the usage.
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if c.name != "unknown command" && len(lines) != 1 {
				t.Errorf("want one line of error, got %d: %q", len(lines), stderr)
			}
		})
	}
}
