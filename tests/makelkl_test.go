package tests

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMakeLKL: `make lkl LKL_SRC=TREE LKL_DIR=DIR` builds LKL's library in
// a local tree and installs liblkl.a and the headers under DIR, where the
// Makefile finds them and kbox links against them. KBOX_LKL_SRC names the
// tree; it must have been built once (tools/lkl/liblkl.a), so that this
// is an incremental build and never a whole kernel's. Without one the
// test skips loudly (CI has none unless it sets KBOX_LKL_SRC).
func TestMakeLKL(t *testing.T) {
	src := os.Getenv("KBOX_LKL_SRC")
	if src == "" {
		t.Skip("SKIP (needs an LKL tree): set KBOX_LKL_SRC to an LKL tree built once (make -C tools/lkl) to test make lkl")
	}
	if _, err := os.Stat(filepath.Join(src, "tools", "lkl", "liblkl.a")); err != nil {
		t.Skipf("SKIP (needs an LKL tree built once): %s has no tools/lkl/liblkl.a; a whole kernel build is too long for a test: run make -C %s/tools/lkl first", src, src)
	}
	conf := treeConfig(t, src)
	dir := t.TempDir()
	make := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
		cmd.Dir = repoRoot()
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
		}
		t.Logf("make %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		return string(out)
	}
	// The tree's own configuration: make lkl rebuilds nothing of the
	// kernel (the test never starts a kernel build).
	lklObj := filepath.Join(src, "tools", "lkl", "lib", "lkl.o")
	before, _ := os.Stat(lklObj)
	out := make("lkl", "LKL_SRC="+src, "LKL_DIR="+dir, "LKL_JOBS=2", "LKL_CONFIG="+conf)
	if !strings.Contains(out, "kbox: installed liblkl.a and headers under "+dir) {
		t.Errorf("make lkl did not say where it installed:\n%s", lastLines(out, 10))
	}
	if !strings.Contains(out, "LKL configuration "+conf+": unchanged") {
		t.Errorf("make lkl LKL_CONFIG=%s on a tree built with it did not find it unchanged:\n%s", conf, lastLines(out, 10))
	}
	if after, err := os.Stat(lklObj); err != nil || before == nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("make lkl with an unchanged configuration rebuilt the kernel (%s: %v)", lklObj, err)
	}
	if a, b := treeFileSum(t, filepath.Join(dir, "lib", "liblkl.config")), treeFileSum(t, filepath.Join(src, ".config")); a != b {
		t.Errorf("lib/liblkl.config is not the tree's .config")
	}
	for _, f := range []string{"lib/liblkl.a", "include/lkl.h", "include/lkl_host.h", "include/lkl/asm/syscalls.h"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not installed: %v", f, err)
		}
	}
	// The Makefile finds it there.
	if out := make("lkl-status", "LKL_DIR="+dir); !strings.Contains(out, "linking liblkl from "+dir+"/lib/liblkl.a") {
		t.Errorf("make lkl-status LKL_DIR=%s: %s", dir, out)
	}
	// And kbox links against it and reports a linked liblkl.
	bin := filepath.Join(t.TempDir(), "kbox")
	build := exec.Command("go", "build", "-buildmode=pie", "-tags", "lkl", "-o", bin, "./cmd/kbox")
	build.Dir = repoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-I"+dir+"/include -O2", "CGO_LDFLAGS=-L"+dir+"/lib")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build against %s: %v\n%s", dir, err, lastLines(string(out), 20))
	}
	v, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(v), "liblkl linked") || !strings.Contains(string(v), "\nkernel: LKL ") {
		t.Errorf("kbox built against %s: version %q, %v", dir, v, err)
	}
	if conf == "kbox" && !strings.Contains(string(v), ", configuration kbox,") {
		t.Errorf("kbox built against a liblkl of kbox's configuration: version %q", v)
	}
}

// treeConfig returns the configuration (kbox or default) the LKL tree src
// was last built with by make lkl (its stamp, scripts/lkl.sh), or default
// for a tree built by hand (make -C tools/lkl uses LKL's defconfig).
func treeConfig(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(src, ".kbox-lkl-config"))
	if err != nil {
		return "default"
	}
	name, config := "", ""
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "name "); ok {
			name = v
		}
		if v, ok := strings.CutPrefix(l, "config "); ok {
			config = v
		}
	}
	if config == "building" {
		t.Skipf("SKIP (needs an LKL tree built once): the last make lkl in %s did not finish; run it again first", src)
	}
	if name != "kbox" && name != "default" {
		t.Skipf("SKIP (needs an LKL tree built with LKL_CONFIG=kbox or default): %s was built with %q", src, name)
	}
	return name
}

func treeFileSum(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("%v", err)
		return ""
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// TestMakeLKLConfig: `make lkl-config` checks a configuration against an
// LKL tree without changing it. An option of the fragment that Kconfig
// drops (an unknown name; one whose dependency the fragment turns off)
// fails it loudly, named; the tree's own configuration is found
// unchanged; the other configuration is found to need a kernel build.
// KBOX_LKL_SRC names the tree, built once by make lkl or by hand.
func TestMakeLKLConfig(t *testing.T) {
	src := os.Getenv("KBOX_LKL_SRC")
	if src == "" {
		t.Skip("SKIP (needs an LKL tree): set KBOX_LKL_SRC to an LKL tree built once (make lkl LKL_SRC=TREE) to test make lkl-config")
	}
	if _, err := os.Stat(filepath.Join(src, "tools", "lkl", "lib", "lkl.o")); err != nil {
		t.Skipf("SKIP (needs an LKL tree built once): %s has no tools/lkl/lib/lkl.o", src)
	}
	conf := treeConfig(t, src)
	other := map[string]string{"kbox": "default", "default": "kbox"}[conf]
	state := func() string {
		return treeFileSum(t, filepath.Join(src, ".config")) + treeFileSum(t, filepath.Join(src, "arch", "lkl", "Kconfig")) + treeFileSum(t, filepath.Join(src, ".kbox-lkl-config"))
	}
	before := state()
	bad := filepath.Join(t.TempDir(), "bad.config")
	os.WriteFile(bad, []byte("# a name Kconfig does not know\nCONFIG_KBOX_NO_SUCH_OPTION=y\n# ext4 off, so its ACLs cannot be on\n# CONFIG_EXT4_FS is not set\nCONFIG_EXT4_FS_POSIX_ACL=y\n"), 0o644)
	for _, c := range []struct {
		config string
		fails  bool
		want   []string
	}{
		{conf, false, []string{"LKL configuration " + conf + ": unchanged, make lkl rebuilds nothing"}},
		{other, false, []string{"LKL configuration " + other + ": differs from the tree's, make lkl rebuilds the kernel"}},
		{bad, true, []string{"lacks options of " + bad, "CONFIG_KBOX_NO_SUCH_OPTION (wanted y, absent", "CONFIG_EXT4_FS_POSIX_ACL (wanted y, absent", "not applied (the tree is unchanged)"}},
	} {
		cmd := exec.Command("make", "--no-print-directory", "lkl-config", "LKL_SRC="+src, "LKL_CONFIG="+c.config)
		cmd.Dir = repoRoot()
		out, err := cmd.CombinedOutput()
		if (err != nil) != c.fails {
			t.Errorf("make lkl-config LKL_CONFIG=%s: %v\n%s", c.config, err, out)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("make lkl-config LKL_CONFIG=%s does not say %q:\n%s", c.config, w, out)
			}
		}
		if c.config == bad && strings.Contains(string(out), "CONFIG_EXT4_FS (") {
			t.Errorf("an option the fragment turns off, and that is off, is reported:\n%s", out)
		}
	}
	if state() != before {
		t.Errorf("make lkl-config changed the tree (.config, arch/lkl/Kconfig or the stamp)")
	}
}
