//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// chroot(2) gives a guest process a root of its own (LTP chroot01-04,
// realpath01; it was refused, EPERM): tests/guest/chrootp.c checks its
// errnos (EACCES and EPERM by the guest's credentials), paths, symlinks and
// ".." inside the new root, trailing slashes, O_CREAT through a dangling
// link, fork, exec of a static and of a dynamic program (PT_INTERP found
// in the new root) and of a #! script,
// getcwd outside the root ("(unreachable)"), an fchdir escape and
// /proc/PID/root. It prints what a native run prints, with the new root in
// the image, in kbox's /tmp and in a bind. The hostile mode climbs out of
// the new root by Linux's own escape (an fd opened before the chroot): it
// reaches the image's root and never a host file.
func TestChroot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIP (the native run needs root: it chroots)")
	}
	img := imagePath(t)
	prog := dumpFromImage(t, img, "/opt/tests/chrootp")
	if err := os.Chmod(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, prog)
	cmd.Dir = t.TempDir()
	native, err := cmd.Output()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, native)
	}
	host := t.TempDir()
	// In a bind the host kernel judges permissions, by kbox's uid (root
	// here), as for every call in a bind (docs/security.md): the
	// directories nobody may not search are searched, and chroot reaches
	// its capability check.
	inBind := strings.NewReplacer("nobody chroot nosearch EACCES", "nobody chroot nosearch EPERM",
		"nobody chroot nosearch component EACCES", "nobody chroot nosearch component ENOENT").Replace(string(native))
	for _, c := range []struct {
		name string
		args []string
		dir  string
		want string
	}{
		{"image", nil, "/var/tmp/w", string(native)},
		{"tmp", nil, "/tmp/w", string(native)},
		{"bind", []string{"-b", host + ":/mnt/h"}, "/mnt/h/w", inBind},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"image", "-S", img, "--ephemeral"}, c.args...)
			args = append(args, "--", "/bin/sh", "-c", "mkdir -p "+c.dir+" && cd "+c.dir+" && exec /opt/tests/chrootp /opt/tests/chrootp")
			out, stderr, st := runKbox(t, args...)
			if st != 0 || out != c.want {
				t.Errorf("status %d; under kbox:\n%s\nwant (the native run's):\n%s\n%s", st, out, c.want, stderr)
			}
		})
	}
	marker := filepath.Join(host, "HOSTMARK")
	if err := os.WriteFile(marker, []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "hostile climbed, marker ENOENT\n" +
		"hostile fchdir ok\n" +
		"hostile chroot . ok\n" +
		"hostile symlink ok\n" +
		"hostile chdir /up/.. ok\n" +
		"hostile chroot . again ok\n" +
		"hostile getcwd /\n" +
		"hostile image root /opt/tests/chrootp ok\n" +
		"hostile marker ENOENT\n"
	// The in-process tiers serve chroot alike (one process: no fork).
	forTiers(t, []string{"trap", "rewrite"}, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--ephemeral", "--trusted", "--syscall-mode="+tier, "-w", "/tmp",
			"--", "/opt/tests/chrootp", "hostile", marker)
		if st != 0 || out != want {
			t.Errorf("status %d:\n%s\nwant:\n%s\n%s", st, out, want, stderr)
		}
	})
	for _, dir := range []string{"/var/tmp/h", "/tmp/h"} {
		t.Run("hostile"+filepath.Dir(dir), func(t *testing.T) {
			out, stderr, st := runKbox(t, "image", "-S", img, "--ephemeral", "--", "/bin/sh", "-c",
				"mkdir -p "+dir+" && cd "+dir+" && exec /opt/tests/chrootp hostile "+marker)
			if st != 0 || out != want {
				t.Errorf("status %d:\n%s\nwant:\n%s\n%s", st, out, want, stderr)
			}
		})
	}
}
