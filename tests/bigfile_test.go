//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestFileAboveShadowCap: a file larger than the shadow size cap is not
// copied into a memfd; it is served through a virtual fd, and the
// vectored-I/O and fallocate handlers work on it (tests/guest/vecio.c).
// The cap is lowered to 4 KiB with KBOX_SHADOW_MAX for the test.
func TestFileAboveShadowCap(t *testing.T) {
	img := copyImage(t, imagePath(t))
	cmd := exec.Command(kboxBin(t), "image", "-S", img, "-c",
		"head -c 10000 /dev/zero > /root/big && /opt/tests/vecio /root/big && head -c 11 /root/big && echo && wc -c /root/big")
	cmd.Env = append(os.Environ(), "KBOX_SHADOW_MAX=4096")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"(virtual)", "vecio ok", "hello world\n", "50000"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	bad := exec.Command(kboxBin(t), "image", "-S", img, "--", "/bin/true")
	bad.Env = append(os.Environ(), "KBOX_SHADOW_MAX=lots")
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "KBOX_SHADOW_MAX") {
		t.Errorf("bad KBOX_SHADOW_MAX accepted: %v %s", err, out)
	}
}
