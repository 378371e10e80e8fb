//go:build lkl

package tests

import (
	"strings"
	"testing"
)

// TestRestartAfterStartPanic: a kernel panic while kbox is starting (after
// boot and the root's mount, before the guest runs) starts kbox once more
// with the same arguments (lkl/console.c: LKL 6.0 has a rare race at
// boot), and the guest then runs once, with its own status and output and
// without kbox's marker in its environment, in each tier and with --net.
// A panic that comes again ends kbox, after one restart. The panic is
// KBOX_TEST_PANIC_AT_START's (docs/testing.md).
func TestRestartAfterStartPanic(t *testing.T) {
	img := imagePath(t)
	t.Setenv("KBOX_TEST_PANIC_AT_START", "1")
	for _, c := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"seccomp", []string{"--syscall-mode=seccomp", "--", "/bin/sh", "-c", "echo ran; env | grep -c KBOX_LKL; exit 3"}, 3, "ran\n0\n"},
		{"trap", []string{"--syscall-mode=trap", "--", "/bin/echo", "ran"}, 0, "ran\n"},
		{"rewrite with --net", []string{"--syscall-mode=rewrite", "--net", "--", "/bin/busybox", "ip", "addr"}, 0, "10.0.2.15"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, st := runKbox(t, append([]string{"image", "-S", img, "--read-only"}, c.args...)...)
			if st != c.status || !strings.Contains(out, c.want) || strings.Count(out, "ran\n") > 1 {
				t.Errorf("status %d (want %d), stdout %q (want %q once)\nstderr: %s", st, c.status, out, c.want, lastLines(stderr, 5))
			}
			if n := strings.Count(stderr, "starting once more"); n != 1 {
				t.Errorf("%d restarts said on stderr, want 1\nstderr: %s", n, lastLines(stderr, 5))
			}
		})
	}
	t.Run("panic again", func(t *testing.T) {
		t.Setenv("KBOX_TEST_PANIC_AT_START", "always")
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/echo", "ran")
		if st == 0 || out != "" || strings.Count(stderr, "starting once more") != 1 || strings.Count(stderr, "the kernel (LKL) panicked") != 2 {
			t.Errorf("status %d, stdout %q; want a failure after one restart\nstderr: %s", st, out, lastLines(stderr, 5))
		}
	})
}
