package tests

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// repoRoot is the checkout holding this package.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// imagePath returns the test image (KBOX_IMAGE, else the one `make
// test-image` builds: the user's image plus the test programs under
// /opt/tests), or skips the test with one loud line.
func imagePath(t testing.TB) string {
	t.Helper()
	p := os.Getenv("KBOX_IMAGE")
	if p == "" {
		p = filepath.Join(repoRoot(), "rootfs-tests.ext4")
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("SKIP (needs the test image): %s is missing: run `make test-image`", p)
	}
	return p
}

// userImagePath returns the user's image (KBOX_USER_IMAGE, else the one
// `make rootfs` builds) as rootfs/build.sh made it, or skips the test with
// one loud line: when it is missing, or has been mounted writable since
// (a `make shell`: what is in it is no longer build.sh's alone).
func userImagePath(t testing.TB) string {
	t.Helper()
	p := os.Getenv("KBOX_USER_IMAGE")
	if p == "" {
		p = filepath.Join(repoRoot(), "rootfs.ext4")
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("SKIP (needs the user's image): %s is missing: run `make rootfs`", p)
	}
	out, err := exec.Command("dumpe2fs", "-h", p).Output()
	if err != nil {
		t.Fatalf("dumpe2fs -h %s: %v", p, err)
	}
	if !regexp.MustCompile(`(?m)^Mount count:\s+0$`).Match(out) {
		t.Skipf("SKIP (needs the user's image as built): %s has been mounted writable since it was built: run `make rootfs`", p)
	}
	return p
}

// kboxBin returns the kbox binary built by `make`, or skips loudly.
func kboxBin(t testing.TB) string {
	t.Helper()
	p := os.Getenv("KBOX_BIN")
	if p == "" {
		p = filepath.Join(repoRoot(), "kbox")
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("SKIP (needs the kbox binary): %s is missing: run `make`", p)
	}
	return p
}

// packageImage returns a test image (the test programs under /opt/tests)
// built by rootfs/build.sh with Debian packages added (ROOTFS_PACKAGES),
// built once per machine into a cache directory, or skips the test with
// one loud line when it cannot be built (no Debian mirror). Tests that
// write use copyImage on it.
func packageImage(t testing.TB, pkgs ...string) string {
	t.Helper()
	imagePath(t) // the base image's absence skips as usual
	name := strings.Join(pkgs, "+")
	dir := filepath.Join(os.TempDir(), "kbox-test-images")
	out := filepath.Join(dir, name+".ext4")
	// Rebuilt when the guest programs or the build script changed.
	stamp := imageStamp()
	if b, err := os.ReadFile(out + ".stamp"); err == nil && string(b) == stamp {
		if _, err := os.Stat(out); err == nil {
			return out
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "rootfs", "build.sh"))
	cmd.Env = append(os.Environ(), "OUT="+out, "ROOTFS_PACKAGES="+strings.Join(pkgs, " "), "GUEST_PROGRAMS=1", "FROM_IMAGE=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("SKIP (needs an image with %s; building it failed, no Debian mirror?): %v\n%s", strings.Join(pkgs, " "), err, lastLines(string(b), 5))
	}
	os.WriteFile(out+".stamp", []byte(stamp), 0o644)
	return out
}

// imageStamp identifies what goes into an image besides packages: the
// build scripts and the guest programs' sources.
func imageStamp() string {
	var b strings.Builder
	var files []string
	for _, pat := range []string{"tests/guest/*.c", "tests/guest/dyn/*", "tests/stress/*.c", "tests/stress/go/*/*", "rootfs/build.sh", "rootfs/programs.sh"} {
		m, _ := filepath.Glob(filepath.Join(repoRoot(), pat))
		files = append(files, m...)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", filepath.Base(f), st.Size(), st.ModTime().UnixNano())
		}
	}
	return b.String()
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// debugfsCat reads a file of an ext4 image without kbox: its content, or
// "" and ok false when it is not there.
func debugfsCat(t *testing.T, img, path string) (string, bool) {
	t.Helper()
	if _, err := exec.LookPath("debugfs"); err != nil {
		t.Skip("SKIP (needs debugfs): apt-get install e2fsprogs")
	}
	cmd := exec.Command("debugfs", "-R", "cat "+path, img)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("debugfs cat %s %s: %v %s", img, path, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "File not found") {
		return "", false
	}
	return string(out), true
}

// copyImage makes a private sparse copy of the image for a test that writes.
func copyImage(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "rootfs.ext4")
	out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput()
	if err != nil {
		t.Fatalf("copy image: %v: %s", err, out)
	}
	return dst
}

// assertCleanImage checks that an ext4 image was cleanly unmounted: its
// superblock has no needs_recovery flag and `e2fsck -fn` finds nothing.
func assertCleanImage(t testing.TB, img string) {
	t.Helper()
	out, err := exec.Command("dumpe2fs", "-h", img).CombinedOutput()
	if err != nil {
		t.Fatalf("dumpe2fs: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Filesystem features:") && strings.Contains(l, "needs_recovery") {
			t.Errorf("image left with needs_recovery (not cleanly unmounted):\n%s", l)
		}
	}
	if out, err := exec.Command("e2fsck", "-fn", img).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn: %v\n%s", err, out)
	}
}

// kboxTimeout bounds each run of runKbox, so that a run that hangs fails
// its test (kbox is killed, and its keeper kills the guest) instead of
// stalling the whole test binary.
const kboxTimeout = 2 * time.Minute

// runKbox runs the kbox binary and returns stdout, stderr and exit status.
func runKbox(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	out, errOut, status, _ := runKboxWithin(t, kboxTimeout, args...)
	return out, errOut, status
}

// runKboxWithin is runKbox with its own time limit; it also returns how
// the process ended (for its resource use).
func runKboxWithin(t testing.TB, limit time.Duration, args ...string) (string, string, int, *os.ProcessState) {
	t.Helper()
	return runKboxOpts(t, limit, kboxEnv{}, args...)
}

// kboxEnv is what a run of kbox gets besides its arguments: variables
// added to the test's environment, and its stdin (none: /dev/null).
type kboxEnv struct {
	vars  []string
	stdin string
}

// runKboxEnv is runKbox with variables added to kbox's environment and
// stdin.
func runKboxEnv(t testing.TB, env kboxEnv, args ...string) (string, string, int) {
	t.Helper()
	out, errOut, status, _ := runKboxOpts(t, kboxTimeout, env, args...)
	return out, errOut, status
}

func runKboxOpts(t testing.TB, limit time.Duration, env kboxEnv, args ...string) (string, string, int, *os.ProcessState) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, kboxBin(t), args...)
	if env.vars != nil {
		cmd.Env = append(os.Environ(), env.vars...)
	}
	if env.stdin != "" {
		cmd.Stdin = strings.NewReader(env.stdin)
	}
	cmd.WaitDelay = 5 * time.Second
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kbox %q did not finish within %v: killed\nstdout: %s\nstderr: %s", args, limit, lastLines(so.String(), 20), lastLines(se.String(), 20))
	}
	status := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run kbox: %v", err)
		}
		status = ee.ExitCode()
	}
	return so.String(), se.String(), status, cmd.ProcessState
}

// guestCase is one guest run through runCases: kbox arguments after the
// common prefix, the expected status and output.
type guestCase struct {
	name   string
	args   []string
	status int
	want   []string // substrings of stdout, in order
	not    []string // in neither stdout nor stderr
}

func runCases(t *testing.T, prefix []string, cases []guestCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append(append([]string{}, prefix...), c.args...)
			stdout, stderr, status := runKbox(t, args...)
			if status != c.status {
				t.Errorf("status %d, want %d\nstdout: %s\nstderr: %s", status, c.status, stdout, stderr)
			}
			rest := stdout
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Errorf("stdout lacks %q (in order)\nstdout: %s\nstderr: %s", w, stdout, stderr)
					break
				}
				rest = rest[i+len(w):]
			}
			for _, n := range c.not {
				if strings.Contains(stdout+stderr, n) {
					t.Errorf("output has %q\nstdout: %s\nstderr: %s", n, stdout, stderr)
				}
			}
		})
	}
}

// converseKbox runs kbox with args (within kboxTimeout) and calls line
// with each line it prints, its stdin (which line may write to or close)
// and kbox's pid; it returns what kbox printed and the error of its end.
func converseKbox(t *testing.T, line func(text string, stdin io.WriteCloser, pid int), args ...string) (stdout, stderr string, err error) {
	t.Helper()
	k := startKbox(t, args...)
	for {
		l, ok := k.Next()
		if !ok {
			break
		}
		line(l, k.Stdin, k.Pid())
	}
	k.Wait()
	return k.Stdout(), k.Stderr(), k.err
}

// tiers are kbox's tiers by their --syscall-mode names. A test of a guest
// program that needs no fork runs in each (forEachTier).
var tiers = []string{"seccomp", "trap", "rewrite"}

// forEachTier runs f as a subtest for each of tiers.
func forEachTier(t *testing.T, f func(t *testing.T, tier string)) { forTiers(t, tiers, f) }

// forTiers runs f as a subtest for each tier of list.
func forTiers(t *testing.T, list []string, f func(t *testing.T, tier string)) {
	for _, tier := range list {
		t.Run(tier, func(t *testing.T) { f(t, tier) })
	}
}

// hostMachine is the host's uname machine (x86_64, aarch64), which the
// guest's uname reports too.
func hostMachine(t testing.TB) string {
	out, err := exec.Command("uname", "-m").Output()
	if err != nil {
		t.Fatalf("uname -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}
