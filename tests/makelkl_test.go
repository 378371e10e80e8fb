package tests

import (
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
	out := make("lkl", "LKL_SRC="+src, "LKL_DIR="+dir, "LKL_JOBS=2")
	if !strings.Contains(out, "kbox: installed liblkl.a and headers under "+dir) {
		t.Errorf("make lkl did not say where it installed:\n%s", lastLines(out, 10))
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
	if err != nil || !strings.Contains(string(v), "liblkl linked") {
		t.Errorf("kbox built against %s: version %q, %v", dir, v, err)
	}
}
