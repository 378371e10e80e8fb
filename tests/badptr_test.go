//go:build lkl

package tests

import (
	"os/exec"
	"testing"
)

// Hostile pointers and lengths (NULL, unmapped, kernel addresses, PROT_NONE
// and read-only pages, strings running into a guard page, over-long paths,
// bad iovecs, open_how sizes and flags, argv/envp) must give the guest what
// Linux gives it, and never bring kbox down. The guest program prints one
// errno per case; under kbox its output must be the native one, with image
// files as shadows and, with KBOX_SHADOW_MAX=1, as virtual fds served by
// LKL.
func TestHostilePointers(t *testing.T) {
	img := imagePath(t)
	prog := dumpFromImage(t, img, "/opt/tests/badptr")
	native, err := exec.Command(prog).Output()
	if err != nil {
		t.Fatalf("native run: %v", err)
	}
	for _, max := range []string{"", "1"} {
		out, stderr, st := runKboxEnv(t, kboxEnv{vars: []string{"KBOX_SHADOW_MAX=" + max}}, "image", "-S", img, "--read-only", "--", "/opt/tests/badptr")
		if st != 0 {
			t.Fatalf("KBOX_SHADOW_MAX=%q: status %d\n%s\n%s", max, st, out, stderr)
		}
		if out != string(native) {
			t.Errorf("KBOX_SHADOW_MAX=%q, under kbox:\n%s\nnatively:\n%s\nkbox stderr: %s", max, out, native, stderr)
		}
	}
}
