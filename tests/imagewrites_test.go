//go:build lkl

package tests

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// limits.image_writes (docs/agents.md, shadowfd/space.go Quota,
// dispatch/policy.go policyImageWrite): the image's used space may grow
// by that much in the run; writes beyond get ENOSPC (SIGBUS for a shared
// mapping). tests/guest/imagewrites.c tries several files, several
// processes, a shared mapping and a sparse file above the shadow size
// (written by kbox through LKL). On a kbox without the limit the policy
// is refused ("not supported yet", exit 2).

const imageWritesLimit = 4 << 20

// imageWritesSlack is what the run may add beyond the limit: the shadows'
// store is sized in whole pages, with a little room for the file being
// filled.
const imageWritesSlack = 64 << 10

var (
	wroteRE = regexp.MustCompile(`(?m)^wrote (\d+)$`)
	errorRE = regexp.MustCompile(`(?m)^error (\S+)$`)
)

// wrote sums the "wrote N" lines and collects the "error E" lines. Each
// run prints one of each, but processes running at once may interleave
// their lines.
func wrote(t *testing.T, out string) (int64, []string) {
	t.Helper()
	var sum int64
	var errs []string
	ws := wroteRE.FindAllStringSubmatch(out, -1)
	for _, m := range ws {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		sum += n
	}
	for _, m := range errorRE.FindAllStringSubmatch(out, -1) {
		errs = append(errs, m[1])
	}
	if errs == nil || len(errs) != len(ws) {
		t.Fatalf("no result from imagewrites, or a line lost: %q", out)
	}
	return sum, errs
}

func TestPolicyImageWrites(t *testing.T) {
	pol := writePolicy(t, "[limits]\nimage_writes = \"4M\"\n")
	img := imagePath(t)
	cases := []struct {
		name    string
		cmd     string
		errWant string // a regexp matching one of the runs' errors (short: a short write, as Linux gives on a nearly full disk)
	}{
		{"files", "/opt/tests/imagewrites files /root 4 3", "ENOSPC|short"},
		{"processes", "mkdir -p /root/p1 /root/p2 /root/p3; for i in 1 2 3; do /opt/tests/imagewrites files /root/p$i 1 3 & done; wait", "ENOSPC|short"},
		{"mmap", "/opt/tests/imagewrites mmap /root/m 8", "SIGBUS"},
		{"sparse above the shadow size", "/opt/tests/imagewrites sparse /root/s 8", "ENOSPC"},
		{"files then more files", "/opt/tests/imagewrites files /root 1 3; mkdir /root/q; /opt/tests/imagewrites files /root/q 1 3", "ENOSPC|short"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, status := runKbox(t, "image", "-S", img, "--ephemeral", "--syscall-mode=seccomp", "--policy", pol, "--", "/bin/sh", "-c", c.cmd)
			if status != 0 {
				t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, out, stderr)
			}
			sum, errs := wrote(t, out)
			if sum > imageWritesLimit+imageWritesSlack {
				t.Errorf("wrote %d bytes in all, over the limit %d: %s", sum, imageWritesLimit, out)
			}
			if sum < imageWritesLimit/2 {
				t.Errorf("wrote only %d bytes, well under the limit %d: %s", sum, imageWritesLimit, out)
			}
			if !regexp.MustCompile(c.errWant).MatchString(strings.Join(errs, " ")) {
				t.Errorf("errors %v, want %s among them", errs, c.errWant)
			}
		})
	}
	// The limit, not the image, stopped them: without it all is written.
	t.Run("no limit", func(t *testing.T) {
		out, stderr, status := runKbox(t, "image", "-S", img, "--ephemeral", "--syscall-mode=seccomp", "--", "/opt/tests/imagewrites", "sparse", "/root/s", "8")
		if status != 0 || !strings.Contains(out, "wrote 8388608\nerror none") {
			t.Fatalf("status %d, stdout %q, stderr %s", status, out, stderr)
		}
	})
	// On the image itself: what was written is there, the image clean.
	t.Run("image", func(t *testing.T) {
		cp := copyImage(t, img)
		out, stderr, status := runKbox(t, "image", "-S", cp, "--syscall-mode=seccomp", "--policy", pol, "--", "/opt/tests/imagewrites", "files", "/root", "3", "2")
		if status != 0 {
			t.Fatalf("status %d: %s %s", status, out, stderr)
		}
		sum, _ := wrote(t, out)
		assertCleanImage(t, cp)
		out, _, _ = runKbox(t, "image", "-S", cp, "--read-only", "--", "/bin/sh", "-c", "cat /root/f0 /root/f1 /root/f2 2>/dev/null | wc -c")
		if got := strings.TrimSpace(out); got != strconv.FormatInt(sum, 10) {
			t.Errorf("the image holds %s bytes of the files, the writes reported %d", got, sum)
		}
	})
}
