package tests

import (
	"crypto/sha256"
	"os"
	"os/exec"

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

// TestBadImageFiles: an image truncated, one with its superblock zeroed,
// and a good image on a read-only host file system without --read-only:
// each is one clear line and status 125, and the file is unchanged.
func TestBadImageFiles(t *testing.T) {
	if !lkl.Available {
		t.Skip("SKIP: needs liblkl (the checks are made before the kernel boots, but with LKL's build)")
	}
	img := imagePath(t)
	dir := t.TempDir()
	mk := func(name string, change func(f *os.File) error) string {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := change(f); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sum := func(p string) [32]byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	check := func(t *testing.T, file string, stderr string, status int, want string, before [32]byte) {
		if status != 125 || !strings.Contains(stderr, want) {
			t.Errorf("status %d, stderr %q; want 125 and %q", status, stderr, want)
		}
		if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 {
			t.Errorf("want one line of error, got %q", stderr)
		}
		if sum(file) != before {
			t.Errorf("%s changed", file)
		}
	}
	for _, c := range []struct {
		name, want string
		change     func(f *os.File) error
	}{
		{"truncated", "truncated", func(f *os.File) error { return f.Truncate(20 << 20) }},
		{"zeroed superblock", "not an ext2/3/4 filesystem", func(f *os.File) error {
			_, err := f.WriteAt(make([]byte, 1024), 1024)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mk(strings.ReplaceAll(c.name, " ", "-")+".ext4", c.change)
			before := sum(p)
			_, stderr, status := runKbox(t, "image", "-S", p, "--", "/bin/true")
			check(t, p, stderr, status, c.want, before)
		})
	}
	t.Run("read-only host file system", func(t *testing.T) {
		// A private mount namespace with a tmpfs remounted read-only;
		// where this user may not make one, the case skips loudly.
		ro := filepath.Join(dir, "ro")
		os.MkdirAll(ro, 0o755)
		before := sum(img)
		script := `mount -t tmpfs none "$1" && cp "$2" "$1/image.ext4" && mount -o remount,ro "$1" || exit 99; exec "$3" image -S "$1/image.ext4" -- /bin/true`
		cmd := exec.Command("unshare", "-m", "sh", "-c", script, "sh", ro, img, kboxBin(t))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		status := cmd.ProcessState.ExitCode()
		if err != nil && (status == 99 || strings.Contains(stderr.String(), "unshare:")) {
			t.Skipf("SKIP: cannot make a read-only file system here (unshare -m and mount): %s", stderr.String())
		}
		check(t, img, stderr.String(), status, "read-only file system (use --read-only", before)
	})
}

// TestErrorsNameTheFix: a kbox without liblkl, a missing image and a host
// kernel too old for the seccomp tier each stop kbox with one line that
// names what to do.
func TestErrorsNameTheFix(t *testing.T) {
	bin := kboxBin(t)
	dir := t.TempDir()
	noLKL := bin
	if lkl.Available {
		// The message of a kbox built without LKL, from such a build.
		noLKL = filepath.Join(dir, "kbox-nolkl")
		build := exec.Command("go", "build", "-o", noLKL, "./cmd/kbox")
		build.Dir = repoRoot()
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build without lkl: %v\n%s", err, out)
		}
	}
	img := filepath.Join(dir, "some.ext4")
	os.WriteFile(img, nil, 0o644)
	cases := []struct {
		name   string
		bin    string
		env    string
		args   []string
		status int
		want   []string
	}{
		{"no liblkl", noLKL, "", []string{"image", "-S", img, "--", "/bin/true"}, 2, []string{"built without LKL", "make lkl"}},
		{"missing image", bin, "", []string{"image", "-S", filepath.Join(dir, "rootfs.ext4"), "--", "/bin/true"}, 125, []string{"no such file", "make rootfs"}},
		{"old kernel", bin, "KBOX_TEST_KERNEL_RELEASE=5.10.0-28-amd64", []string{"image", "--syscall-mode=seccomp", "-S", "", "--", "/bin/true"}, 125, []string{"needs Linux 5.14 or later", "5.10.0-28-amd64", "upgrade the host kernel"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "missing image" && !lkl.Available {
				c.status, c.want = 2, []string{"make lkl"}
			}
			if c.name == "old kernel" {
				if !lkl.Available {
					t.Skip("SKIP (needs liblkl): the tier starts after the kernel boots")
				}
				c.args[3] = imagePath(t)
			}
			cmd := exec.Command(c.bin, c.args...)
			if c.env != "" {
				cmd.Env = append(os.Environ(), c.env)
			}
			var se strings.Builder
			cmd.Stderr = &se
			err := cmd.Run()
			status := 0
			if ee, ok := err.(*exec.ExitError); ok {
				status = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			stderr := se.String()
			if status != c.status {
				t.Errorf("status %d, want %d (stderr %q)", status, c.status, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 {
				t.Errorf("want one line, got %d: %q", len(lines), stderr)
			}
		})
	}
}
