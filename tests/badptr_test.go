package tests

import (
	"os/exec"
	"testing"
)

// Hostile pointers and lengths (NULL, unmapped, kernel addresses, PROT_NONE
// and read-only pages, strings running into a guard page, over-long paths)
// must give the guest what Linux gives it, and never bring kbox down. The
// guest program prints one errno per case; its output under kbox must be
// the native one.
func TestHostilePointers(t *testing.T) {
	img := imagePath(t)
	prog := dumpFromImage(t, img, "/opt/tests/badptr")
	native, err := exec.Command(prog).Output()
	if err != nil {
		t.Fatalf("native run: %v", err)
	}
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/opt/tests/badptr")
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	if out != string(native) {
		t.Errorf("under kbox:\n%s\nnatively:\n%s\nkbox stderr: %s", out, native, stderr)
	}
}
