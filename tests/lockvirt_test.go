//go:build lkl

package tests

import (
	"os/exec"
	"testing"
)

// TestLocksOnVirtualFds: fcntl's record locks (POSIX and OFD) and flock
// between guest processes on a file above the shadow cap and on a
// directory, which kbox serves as virtual fds (tests/guest/lockvirt.c,
// the cap lowered to 4 KiB with KBOX_SHADOW_MAX), give what Linux gives,
// line by line against the program run natively: conflicts, F_GETLK's
// holder, F_SETLKW's wait, the release at a close and at an exit. The
// in-process tiers' one process keeps and drops its own locks. Before,
// fcntl's locks there were ENOLCK and flock granted every caller.
func TestLocksOnVirtualFds(t *testing.T) {
	img := copyImage(t, imagePath(t))
	prog := dumpFromImage(t, img, "/opt/tests/lockvirt")
	dir := t.TempDir()
	native := map[string]string{}
	for _, mode := range []string{"make", "", "solo"} {
		args := []string{dir}
		if mode != "" {
			args = append(args, mode)
		}
		b, err := exec.Command(prog, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("native %s: %v\n%s", mode, err, b)
		}
		native[mode] = string(b)
	}
	small := kboxEnv{vars: []string{"KBOX_SHADOW_MAX=4096"}}
	out, stderr, st := runKboxEnv(t, small, "image", "-S", img, "-c",
		"mkdir /root/l && /opt/tests/lockvirt /root/l make && /opt/tests/lockvirt /root/l")
	if st != 0 || out != native[""] {
		t.Errorf("seccomp: status %d\n%s\nnatively:\n%s\nstderr: %s", st, out, native[""], stderr)
	}
	for _, m := range []string{"trap", "rewrite"} {
		out, stderr, st := runKboxEnv(t, small, "image", "-S", img, "--ephemeral", "--syscall-mode="+m, "--trusted", "--", "/opt/tests/lockvirt", "/root/l", "solo")
		if st != 0 || out != native["solo"] {
			t.Errorf("%s: status %d\n%s\nnatively:\n%s\nstderr: %s", m, st, out, native["solo"], stderr)
		}
	}
}
