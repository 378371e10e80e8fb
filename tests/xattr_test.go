//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Extended attributes (docs/tiers.md, "Extended attributes"): the guest
// program tests/guest/xattr.c run natively on the host and under kbox in
// each tier must print the same lines.

// xattrNative runs the xattr guest program natively in fresh directories
// beneath a temporary directory of the host (ext4 or tmpfs with user.*,
// trusted.* and ACLs; skips loudly otherwise): as root "own D1 prep D2
// uid 1000 other D2" (root's shadows of prep's files still cached when it
// becomes uid 1000), and as uid 1000 "own D2/u other D2 own D3/u" (D3 a
// 1777 directory).
func xattrNative(t *testing.T) (root, user string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP (the native comparison runs as root and as uid 1000: needs root)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("SKIP (the native comparison runs as uid 1000 with setpriv: not found)")
	}
	img := imagePath(t)
	base := t.TempDir()
	for d := base; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if strings.HasPrefix(d, os.TempDir()) {
			os.Chmod(d, 0o755) // uid 1000 walks down to its directories
		}
	}
	probe := filepath.Join(base, "probe")
	os.WriteFile(probe, nil, 0o644)
	if err := unix.Setxattr(probe, "trusted.probe", []byte("1"), 0); err != nil {
		t.Skipf("SKIP (the host's %s has no trusted.* extended attributes: %v)", base, err)
	}
	prog := dumpFromImage(t, img, "/opt/tests/xattr")
	os.Chmod(filepath.Dir(prog), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(prog)), 0o755)
	out, err := exec.Command(prog, "own", filepath.Join(base, "own"), "prep", filepath.Join(base, "p"),
		"uid", "1000", "other", filepath.Join(base, "p")).CombinedOutput()
	if err != nil {
		t.Fatalf("native as root: %v\n%s", err, out)
	}
	root = string(out)
	tmp := filepath.Join(base, "t")
	os.Mkdir(tmp, 0o1777)
	os.Chmod(tmp, 0o1777)
	out, err = exec.Command(setpriv, "--reuid", "1000", "--regid", "1000", "--groups", "1000", prog,
		"own", filepath.Join(base, "p", "u"), "other", filepath.Join(base, "p"), "own", filepath.Join(tmp, "u")).CombinedOutput()
	if err != nil {
		t.Fatalf("native as uid 1000: %v\n%s", err, out)
	}
	return root, string(out)
}

// TestXattr: set, get, list and remove by path, l* and fd (a shadow of an
// image file, a large file's virtual fd, a directory, O_PATH, a pipe, a
// unix and an internet socket, an image FIFO, a memfd, /dev/fd/N,
// /proc/self/fd/N), on the image and on /tmp, /proc and /dev/null, as
// root and as uid 1000 (--change-id), with user.*, trusted.*, security.*
// and POSIX ACLs (an ACL lets uid 1000 read root's 0600 file; a default
// ACL replaces the umask) and every error: the same lines as natively, in
// each tier.
func TestXattr(t *testing.T) {
	nativeRoot, nativeUser := xattrNative(t)
	img := copyImage(t, imagePath(t))
	forEachTier(t, func(t *testing.T, tier string) {
		// Files above 8 KiB are virtual fds, not shadows.
		t.Setenv("KBOX_SHADOW_MAX", "8192")
		d := "/xt/" + tier
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+tier, "--",
			"/opt/tests/xattr", "own", d+"/own", "prep", d+"/p", "uid", "1000", "other", d+"/p")
		if st != 0 {
			t.Errorf("as root: status %d\nstderr: %s", st, lastLines(stderr, 5))
		}
		diffLines(t, "as root", nativeRoot, out)
		out, stderr, st = runKbox(t, "image", "-R", img, "--change-id", "1000:1000", "--syscall-mode="+tier, "--",
			"/opt/tests/xattr", "own", d+"/p/u", "other", d+"/p", "own", "/tmp/u")
		if st != 0 {
			t.Errorf("as uid 1000: status %d\nstderr: %s", st, lastLines(stderr, 5))
		}
		diffLines(t, "as uid 1000", nativeUser, out)
	})
	assertCleanImage(t, img)
}

// bindNSLine is what a line about the trusted, security or system
// namespaces says on a bind: none there (EOPNOTSUPP), nothing listed, no
// mode changed by an ACL.
var bindNSLine = regexp.MustCompile(`^ns [^:]*: (EOPNOTSUPP|\[\]|0600|0644|0666|0700|-1 differs)$`)

// xattrHostWant is the xattr program's "hostf" and "rofs" output for a
// host file with user.h, trusted.h and security.h in a bind, and then one
// in a read-only bind (or on a read-only image).
const xattrHostWant = `hostf list user: [user.h]
ns hostf list other: []
hostf get user.h: ok 2 uh
ns hostf get trusted.h: EOPNOTSUPP
ns hostf get security.h: EOPNOTSUPP
ns hostf remove security.h: EOPNOTSUPP
hostf set user.n: ok 0
hostf remove user.n: ok 0
hostf flist user: [user.h]
ns hostf flist other: []
hostf fset user.n: ok 0
ns hostf fset trusted.n: EOPNOTSUPP
hostf fremove user.n: ok 0
`

const xattrRofsWant = `rofs get: ENODATA
rofs set: EROFS
rofs remove: EROFS
rofs fset: EROFS
`

// TestXattrBind: on a bind (-b), user.* reaches the host file (the same
// lines as natively, by path, l* and fd), and the host's trusted.*,
// security.* and ACLs neither show nor change: a filesystem without them
// (EOPNOTSUPP, never listed); on a read-only bind and a read-only image a
// change is EROFS. In each tier.
func TestXattrBind(t *testing.T) {
	native, _ := xattrNative(t)
	native = native[:strings.Index(native, "prep ")] // the "own" lines
	img := copyImage(t, imagePath(t))
	forEachTier(t, func(t *testing.T, tier string) {
		hb, hro := t.TempDir(), t.TempDir()
		for _, f := range []string{filepath.Join(hb, "hostf"), filepath.Join(hro, "hostf")} {
			os.WriteFile(f, nil, 0o644)
			for _, n := range []string{"user.h", "trusted.h", "security.h"} {
				if err := unix.Setxattr(f, n, []byte(n[:1]+"h"), 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+tier, "-b", hb+":/mnt/b", "-b", hro+":/mnt/r:ro", "--",
			"/opt/tests/xattr", "own", "/mnt/b/own", "hostf", "/mnt/b/hostf", "rofs", "/mnt/r/hostf")
		if st != 0 {
			t.Fatalf("status %d\nstderr: %s", st, lastLines(stderr, 5))
		}
		got, want := strings.Split(out, "\n"), strings.Split(native+xattrHostWant+xattrRofsWant, "\n")
		if len(got) != len(want) {
			t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), out)
		}
		for i := range got {
			if got[i] != want[i] && !(strings.HasPrefix(want[i], "ns ") && bindNSLine.MatchString(got[i])) {
				t.Errorf("line %d: %q, want %q", i+1, got[i], want[i])
			}
		}
		// The host files are as they were: user.n came and went.
		for _, f := range []string{filepath.Join(hb, "hostf"), filepath.Join(hro, "hostf")} {
			buf := make([]byte, 256)
			n, err := unix.Listxattr(f, buf)
			names := strings.Fields(strings.ReplaceAll(string(buf[:max(n, 0)]), "\x00", " "))
			slices.Sort(names)
			if err != nil || strings.Join(names, " ") != "security.h trusted.h user.h" {
				t.Errorf("%s holds %q (%v), want security.h trusted.h user.h", f, names, err)
			}
		}
		out, stderr, st = runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--", "/opt/tests/xattr", "rofs", "/etc/hostname")
		if st != 0 || out != xattrRofsWant {
			t.Errorf("read-only image: status %d\n%s\nwant:\n%s\nstderr: %s", st, out, xattrRofsWant, lastLines(stderr, 5))
		}
	})
}

// TestXattrTools: Debian's attr tools (setfattr, getfattr) and acl tools
// (setfacl, getfacl), each run as the command itself (no shell) in each
// tier: an attribute set, read, dumped and removed; an ACL that grants
// uid 1000 read on root's 0600 file lets uid 1000 (--change-id) read it,
// and once removed (setfacl -b) it does not; one that grants it rx on
// root's 0700 program lets it run the program.
func TestXattrTools(t *testing.T) {
	img := copyImage(t, packageImage(t, "attr", "acl"))
	hostname, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "cat", "/etc/hostname")
	if st != 0 || hostname == "" {
		t.Fatalf("cat /etc/hostname: status %d %q\n%s", st, hostname, stderr)
	}
	forEachTier(t, func(t *testing.T, tier string) {
		// as runs args with who's options before the image (the
		// last of them takes it) and returns stdout and stderr.
		as := func(who []string, wantStatus int, args ...string) (string, string) {
			t.Helper()
			a := append(append(append([]string{"image"}, who...), img, "--syscall-mode="+tier, "--"), args...)
			out, stderr, st := runKbox(t, a...)
			if st != wantStatus {
				t.Fatalf("%s: status %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), st, wantStatus, out, lastLines(stderr, 5))
			}
			return out, stderr
		}
		root, user := []string{"-S"}, []string{"--change-id", "1000:1000", "-R"}
		d := "/xt-" + tier
		f, secret := d+"/f", d+"/secret"
		as(root, 0, "mkdir", "-p", d)
		as(root, 0, "touch", f)
		as(root, 0, "setfattr", "-n", "user.tool", "-v", "works", f)
		if out, _ := as(root, 0, "getfattr", "-n", "user.tool", "--only-values", f); out != "works" {
			t.Errorf("getfattr --only-values: %q, want \"works\"", out)
		}
		if out, _ := as(root, 0, "getfattr", "-d", f); !strings.Contains(out, `user.tool="works"`) {
			t.Errorf("getfattr -d: %q", out)
		}
		as(root, 0, "setfattr", "-x", "user.tool", f)
		if out, _ := as(root, 0, "getfattr", "-d", f); strings.Contains(out, "user.tool") {
			t.Errorf("getfattr -d after setfattr -x: %q", out)
		}
		as(root, 0, "cp", "/etc/hostname", secret)
		as(root, 0, "chmod", "600", secret)
		if _, e := as(user, 1, "cat", secret); !strings.Contains(e, "Permission denied") {
			t.Errorf("uid 1000 reads root's 0600 file without an ACL: %q", e)
		}
		as(root, 0, "setfacl", "-m", "u:1000:r", secret)
		if out, _ := as(root, 0, "getfacl", "-cn", secret); !strings.Contains(out, "user:1000:r--") || !strings.Contains(out, "mask::r--") {
			t.Errorf("getfacl: %q, want user:1000:r-- and mask::r--", out)
		}
		if out, _ := as(user, 0, "cat", secret); out != hostname {
			t.Errorf("uid 1000 with the ACL: %q, want %q", out, hostname)
		}
		if _, e := as(user, 1, "touch", secret); !strings.Contains(e, "Permission denied") {
			t.Errorf("uid 1000 writes with a read ACL: %q", e)
		}
		as(root, 0, "setfacl", "-b", secret)
		if _, e := as(user, 1, "cat", secret); !strings.Contains(e, "Permission denied") {
			t.Errorf("uid 1000 reads after setfacl -b: %q", e)
		}
		// exec asks LKL too: an ACL entry with x lets uid 1000 run
		// root's 0700 program (an execve of env's, which the
		// in-process tiers carry out as well).
		prog := d + "/hello"
		as(root, 0, "cp", "/opt/tests/hello", prog)
		as(root, 0, "chmod", "700", prog)
		if _, e := as(user, 126, "env", prog); !strings.Contains(e, "Permission denied") {
			t.Errorf("uid 1000 runs root's 0700 program without an ACL: %q", e)
		}
		as(root, 0, "setfacl", "-m", "u:1000:rx", prog)
		if out, _ := as(user, 0, "env", prog); !strings.Contains(out, "hello") {
			t.Errorf("uid 1000 with an rx ACL: %q", out)
		}
	})
	assertCleanImage(t, img)
}

// pythonTestsuite is Debian 12's package of CPython's own tests (the
// image's Python is 3.11).
const pythonTestsuite = "libpython3.11-testsuite"

// TestXattrCPython: CPython's tests of extended attributes (test_os's
// ExtendedAttributeTests, test_shutil's copyxattr and copy2 cases) run
// instead of skipping with "no non-broken extended attribute support",
// and pass, as do both modules. The seccomp tier: the test runner forks.
func TestXattrCPython(t *testing.T) {
	img := copyImage(t, packageImage(t, "python3", pythonTestsuite))
	out, stderr, st, _ := runKboxWithin(t, 10*time.Minute, "image", "-S", img, "--syscall-mode=seccomp", "--",
		"python3", "-m", "test", "-v", "test_os", "test_shutil")
	if strings.Contains(out, "no non-broken extended attribute support") {
		t.Errorf("xattr cases skipped:\n%s", grepLines(out, "extended attribute"))
	}
	ran := 0
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "xattr") && !strings.Contains(l, "ExtendedAttribute") || !strings.Contains(l, " ... ") {
			continue
		}
		ran++
		if !strings.HasSuffix(l, " ... ok") {
			t.Errorf("not ok: %s", l)
		}
	}
	if ran < 6 {
		t.Errorf("%d xattr test cases ran, want at least 6 (status %d)\n%s\nstderr: %s", ran, st, lastLines(out, 30), lastLines(stderr, 5))
	}
	if st != 0 {
		t.Errorf("python3 -m test test_os test_shutil: status %d\n%s", st, grepLines(out, "FAIL"))
	}
	t.Logf("test_os and test_shutil: status %d, %d xattr cases ran; %s", st, ran, grepLines(out, "Tests result"))
}

// grepLines returns the lines of s holding sub.
func grepLines(s, sub string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestXattrAfterStat: a get answers the same right after a stat of the
// path, as ls -l asks (kbox then answers security.* and ACL names of a
// file without names from what it knows: dispatch/xattr_facts.go), as
// alone: on the image (ext4) and on /tmp (tmpfs), by path and by link, of
// a file, a symlink, a directory and files with names, as root and as uid
// 1000 (tests/guest/xattrfacts.c); and a name set after is found.
func TestXattrAfterStat(t *testing.T) {
	img := copyImage(t, imagePath(t))
	forEachTier(t, func(t *testing.T, tier string) {
		for _, run := range [][]string{
			{"-S", "--", "/opt/tests/xattrfacts", "/xf-" + tier},
			{"-S", "--", "/opt/tests/xattrfacts", "/tmp/xf"},
			{"-R", "--change-id", "1000:1000", "--", "/opt/tests/xattrfacts", "/tmp/xf"},
		} {
			args := append([]string{"image", run[0], img, "--syscall-mode=" + tier}, run[1:]...)
			out, stderr, st := runKbox(t, args...)
			if st != 0 || strings.Contains(out, "FAIL") || !strings.Contains(out, "system.posix_acl_default path s:") {
				t.Errorf("%v: status %d\n%s\nstderr: %s", run, st, out, lastLines(stderr, 5))
			}
		}
	})
	assertCleanImage(t, img)
}

// TestXattrAhead: gets that follow a statx of the same path string, as ls
// -l makes them, answer as Linux does when the file, the path's bytes,
// the cwd or the pointers differ from what the statx saw
// (tests/guest/xattrahead.c). The rewrite tier answers such gets before
// Go from answers the statx prepared (dispatch/hint.go, trap/hint.c).
func TestXattrAhead(t *testing.T) {
	img := copyImage(t, imagePath(t))
	forEachTier(t, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+tier, "--", "/opt/tests/xattrahead", "/xa-"+tier)
		if st != 0 || strings.Contains(out, "FAIL") || strings.Count(out, ": ok\n") != 8 {
			t.Errorf("status %d\n%s\nstderr: %s", st, out, lastLines(stderr, 5))
		}
	})
	assertCleanImage(t, img)
}

// TestXattrAheadListing: ls -lR of a directory whose files have POSIX
// ACLs, security.selinux, user names or none, with symlinks and a
// directory with a default ACL (tests/guest/xattrahead.c make) lists the
// same in every tier, as root and as uid 1000: the rewrite tier's answers
// ahead are given only to files without names.
func TestXattrAheadListing(t *testing.T) {
	img := copyImage(t, imagePath(t))
	out, stderr, st := runKbox(t, "image", "-S", img, "--", "/opt/tests/xattrahead", "/xl", "make")
	if st != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("make: status %d\n%s\nstderr: %s", st, out, lastLines(stderr, 5))
	}
	t.Log(strings.TrimSpace(out))
	listings := map[string]string{}
	forEachTier(t, func(t *testing.T, tier string) {
		// As uid 1000 too (the facts and the answers are kept by the
		// caller's credentials): the same listing.
		asUser, stderr, st := runKbox(t, "image", "-R", img, "--read-only", "--change-id", "1000:1000", "--syscall-mode="+tier, "--", "/usr/bin/ls", "-lR", "--time-style=+", "/xl")
		if st != 0 || strings.Count(asUser, "\n") < 300 {
			t.Fatalf("as uid 1000: status %d\n%s\nstderr: %s", st, lastLines(asUser, 5), lastLines(stderr, 5))
		}
		listings[tier+" as uid 1000"] = asUser
		ls, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--", "/usr/bin/ls", "-lR", "--time-style=+", "/xl")
		if st != 0 || strings.Count(ls, "\n") < 300 {
			t.Fatalf("status %d\n%s\nstderr: %s", st, lastLines(ls, 5), lastLines(stderr, 5))
		}
		if strings.Contains(out, "acl yes") && !strings.Contains(ls, "-rw-r--r--+ ") {
			t.Errorf("no file listed with an ACL (+):\n%s", lastLines(ls, 10))
		}
		if strings.Contains(out, "selinux yes") && !strings.Contains(ls, "-rw-r--r--. ") {
			t.Errorf("no file listed with a security context (.):\n%s", lastLines(ls, 10))
		}
		listings[tier] = ls
	})
	for tier, ls := range listings {
		if ls != listings["seccomp"] {
			t.Errorf("%s lists otherwise than seccomp:\n%s\nseccomp:\n%s", tier, ls, listings["seccomp"])
		}
	}
	assertCleanImage(t, img)
}
