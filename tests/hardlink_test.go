//go:build lkl

package tests

import (
	"strings"
	"testing"
)

// A hard link that already exists in the image to a hidden file does not
// open its content (dispatch/policy.go ScanHidden: hidden by inode). On a
// kbox that hides by path only, the second name reads the secret.
func TestPolicyHiddenHardLink(t *testing.T) {
	img := copyImage(t, imagePath(t))
	out, stderr, status := runKbox(t, "image", "-S", img, "--syscall-mode=seccomp", "--", "/bin/sh", "-c",
		"mkdir -p /data/secret/sub && echo s3cret > /data/secret/sub/key && ln /data/secret/sub/key /data/pub && echo made")
	if status != 0 || !strings.Contains(out, "made") {
		t.Fatalf("setup: status %d: %s %s", status, out, stderr)
	}
	pol := writePolicy(t, "[paths]\nhidden = [\"/data/secret\"]\n")
	script := "cat /data/pub; echo cat=$?; cat /data/./pub; echo dot=$?; ln -s /data/pub /tmp/l; cat /tmp/l; echo sym=$?; " +
		"ln /data/pub /tmp/h 2>/dev/null; echo ln=$?; stat -c %s /data/pub; echo stat=$?; echo ok > /data/other; cat /data/other"
	cases := []guestCase{
		{name: "hidden by inode", args: []string{"--policy", pol, "--", "/bin/sh", "-c", script},
			want: []string{"cat=1", "dot=1", "sym=1", "ln=1", "stat=1", "ok"}, not: []string{"s3cret"}},
		// Without the policy the second name reads the file: the test can
		// tell.
		{name: "no policy", args: []string{"--", "/bin/sh", "-c", "cat /data/pub"}, want: []string{"s3cret"}},
	}
	runCases(t, []string{"image", "-S", img, "--syscall-mode=seccomp"}, cases)
	assertCleanImage(t, img)
}
