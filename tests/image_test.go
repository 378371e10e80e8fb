package tests

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The images as rootfs/build.sh makes them, read with debugfs (no LKL
// needed): the user's image (`make rootfs`) has no test programs and no
// /opt/tests on its PATH; the test image (`make test-image`) is the same
// tree plus the programs of tests/guest and tests/stress under /opt/tests.
// Both list the users and groups in Debian's order, root first
// (base-passwd's passwd.master and group.master). TestImageGuestView
// checks the same from inside the guest.

// debugfsNames lists the names in a directory of the image; ok false when
// there is no such directory.
func debugfsNames(t *testing.T, img, dir string) (map[string]bool, bool) {
	t.Helper()
	cmd := exec.Command("debugfs", "-R", "ls -p "+dir, img)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("debugfs ls %s %s: %v %s", img, dir, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "File not found") {
		return nil, false
	}
	names := map[string]bool{}
	// /inode/mode/uid/gid/name/size/
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Split(l, "/"); len(f) >= 6 && f[5] != "." && f[5] != ".." {
			names[f[5]] = true
		}
	}
	return names, true
}

// firstFields is the first field of each line (user or group names).
func firstFields(s string) []string {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			names = append(names, strings.SplitN(l, ":", 2)[0])
		}
	}
	return names
}

// checkDebianOrder: the names of master (base-passwd's file on this
// host, when it has one) come in the image's file in master's order.
func checkDebianOrder(t *testing.T, file, content, master string) {
	t.Helper()
	b, err := os.ReadFile(master)
	if err != nil {
		return // not a Debian host: root first is checked alone
	}
	in := map[string]int{}
	for i, n := range firstFields(content) {
		in[n] = i
	}
	last, lastName := -1, ""
	for _, n := range firstFields(string(b)) {
		i, ok := in[n]
		if !ok {
			continue
		}
		if i < last {
			t.Errorf("%s: %s (line %d) comes before %s (line %d), %s has them the other way", file, n, i+1, lastName, last+1, master)
		}
		last, lastName = i, n
	}
}

// guestPrograms are the names build.sh gives the programs of tests/guest
// and tests/stress in /opt/tests.
func guestPrograms(t *testing.T) []string {
	t.Helper()
	names := []string{"badelf"}
	for _, pat := range []string{"tests/guest/*.c", "tests/stress/*.c"} {
		m, _ := filepath.Glob(filepath.Join(repoRoot(), pat))
		for _, f := range m {
			names = append(names, strings.TrimSuffix(filepath.Base(f), ".c"))
		}
	}
	if len(names) < 10 {
		t.Fatalf("only %d guest program sources found under %s", len(names), repoRoot())
	}
	// The Go guests (a Go toolchain runs this test) and, with musl-gcc,
	// the dynamic musl one.
	m, _ := filepath.Glob(filepath.Join(repoRoot(), "tests/stress/go/*"))
	for _, d := range m {
		names = append(names, filepath.Base(d))
	}
	if _, err := exec.LookPath("musl-gcc"); err == nil {
		names = append(names, "dlplug", "libplug_a.so", "libplug_b.so")
	}
	return names
}

func TestImageContents(t *testing.T) {
	programs := guestPrograms(t)
	for _, c := range []struct {
		name     string
		image    func(testing.TB) string
		programs bool
	}{
		{"user image", userImagePath, false},
		{"test image", imagePath, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := c.image(t)
			// Debian's order and shadow files for a Debian base (the
			// default); Alpine's own files otherwise.
			release, _ := debugfsCat(t, img, "/etc/os-release")
			debian := strings.Contains(release, `KBOX_BASE="debian`)
			for _, f := range []struct{ path, root, master string }{
				{"/etc/passwd", "root:x:0:0:", "/usr/share/base-passwd/passwd.master"},
				{"/etc/group", "root:x:0:", "/usr/share/base-passwd/group.master"},
				{"/etc/shadow", "root:", "/usr/share/base-passwd/passwd.master"},
				{"/etc/gshadow", "root:", "/usr/share/base-passwd/group.master"},
			} {
				s, ok := debugfsCat(t, img, f.path)
				if !ok {
					if debian || !strings.Contains(f.path, "shadow") {
						t.Errorf("%s: no %s", img, f.path)
					}
					continue
				}
				if !strings.HasPrefix(s, f.root) {
					first, _, _ := strings.Cut(s, "\n")
					t.Errorf("%s: %s starts with %q, want root first (%q)", img, f.path, first, f.root)
				}
				if debian {
					checkDebianOrder(t, f.path, s, f.master)
				}
			}
			profile, ok := debugfsCat(t, img, "/etc/profile")
			if !ok {
				t.Fatalf("%s: no /etc/profile", img)
			}
			if strings.Contains(profile, "/opt/tests") {
				t.Errorf("%s: /etc/profile names /opt/tests:\n%s", img, profile)
			}
			names, ok := debugfsNames(t, img, "/opt/tests")
			if !c.programs {
				if ok {
					t.Errorf("%s: has /opt/tests (%d entries), the user's image must have no test programs", img, len(names))
				}
				return
			}
			if !ok {
				t.Fatalf("%s: no /opt/tests", img)
			}
			for _, p := range programs {
				if !names[p] {
					t.Errorf("%s: /opt/tests/%s missing", img, p)
				}
			}
		})
	}
	// The test image is the user's tree plus the programs: the same users,
	// groups and profile.
	t.Run("same tree", func(t *testing.T) {
		user, test := userImagePath(t), imagePath(t)
		for _, f := range []string{"/etc/passwd", "/etc/group", "/etc/profile", "/etc/os-release"} {
			u, _ := debugfsCat(t, user, f)
			g, _ := debugfsCat(t, test, f)
			if u != g {
				t.Errorf("%s differs between the user's image and the test image:\n%s\n---\n%s", f, u, g)
			}
		}
	})
}
