//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// Small deviations from Linux (kbox issue 10): tests/guest/compat.c prints
// one line per check, section by section. Each section runs natively
// (compiled from the same source with musl-gcc -static, in a scratch
// directory, in a process group of its own) and under kbox, in a directory
// of the same base name on the image's ext4, with image files as shadows
// and, with KBOX_SHADOW_MAX=1, as virtual fds; the lines must be the same.
// Guest fd numbers of virtual fds differ from native ones (1024 and up),
// so /dev/fd/N names are compared without the number.
func TestCompat(t *testing.T) {
	img := copyImage(t, imagePath(t))
	bin := kboxBin(t)
	prog := buildNative(t, "compat.c")
	uts := unshareUTS()
	// Modes: "" (shadows), "1" (KBOX_SHADOW_MAX=1: virtual fds), "bind".
	all, one := []string{"", "1", "bind"}, []string{""}
	for _, c := range []struct {
		section string
		modes   []string
		issue   string
	}{
		{"umask", all, "1: the guest's umask governs files created in LKL"},
		{"dirfd", all, "2: a regular file (a shadow) as the dirfd is ENOTDIR"},
		{"direct", []string{"", "1"}, "3: O_DIRECT opens succeed, F_GETFL/F_SETFL agree"},
		{"kill", one, "4: ESRCH, zombies, process groups within the guest's tree"},
		{"uts", one, "5: uname, /proc/sys/kernel/{hostname,domainname}, sethostname agree"},
		{"personality", one, "7: personality(2)"},
		{"slash", all, "8: trailing slashes reach LKL"},
		{"exec", all, "9, 10: fexecve, execveat by directory fd, a script's $0"},
	} {
		t.Run(c.section, func(t *testing.T) {
			args := []string{prog, c.section, filepath.Join(t.TempDir(), "c-"+c.section)}
			if c.section == "uts" {
				if !uts {
					t.Skip("SKIP (needs unshare -u to change a hostname natively)")
				}
				args = append([]string{"unshare", "-u"}, args...)
			}
			cmd := exec.Command(args[0], args[1:]...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // kill(0) stays in it
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("native run: %v\n%s", err, out)
			}
			native := normalizeFds(string(out))
			for i, m := range c.modes {
				dir := "/m" + string(rune('0'+i)) + "/c-" + c.section
				args := []string{"image", "-S", img}
				if m == "bind" {
					args = append(args, "-b", t.TempDir()+":/bnd")
					dir, m = "/bnd/c-"+c.section, ""
				}
				args = append(args, "--", "/opt/tests/compat", c.section, dir)
				cmd := exec.Command(bin, args...)
				cmd.Env = append(os.Environ(), "KBOX_SHADOW_MAX="+m)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("KBOX_SHADOW_MAX=%q: %v\n%s\n%s", m, err, out, stderr.String())
				}
				diffLines(t, "issue "+c.issue+", mode "+c.modes[i], native, normalizeFds(string(out)))
			}
		})
	}
	// What no native run can answer: the host is not the guest's kernel.
	t.Run("kbox", func(t *testing.T) {
		stdout, stderr, status := runKbox(t, "image", "-S", img, "--", "/opt/tests/compat", "kbox", "/c-kbox")
		if status != 0 {
			t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
		}
		want := strings.Join([]string{
			"kbox.nodename: kbox-rootfs", // the image's /etc/hostname, as a booted system sets it (issue 5)
			"kbox.kill-outside: EPERM",   // a process outside the guest's tree (issue 4)
			"kbox.ppid: 0",               // the keeper is outside the guest, as a pid namespace's parent
			"kbox.kill-all: EPERM",
			"kbox.own-group: yes",   // kill(0) never reaches the keeper (issue 4)
			"kbox.f_notify: EINVAL", // a kernel without CONFIG_DNOTIFY (issue 11)
		}, "\n") + "\n"
		diffLines(t, "kbox-only answers", want, stdout)
	})
}

// buildNative compiles tests/guest/NAME with musl-gcc -static, as the image
// build does, for a native run.
func buildNative(t testing.TB, name string) string {
	t.Helper()
	cc, err := exec.LookPath("musl-gcc")
	if err != nil {
		t.Skip("SKIP (needs musl-gcc for the native run): apt-get install musl-tools")
	}
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(name, ".c"))
	if b, err := exec.Command(cc, "-static", "-O2", "-o", out, filepath.Join(repoRoot(), "tests", "guest", name)).CombinedOutput(); err != nil {
		t.Fatalf("musl-gcc %s: %v\n%s", name, err, b)
	}
	return out
}

// unshareUTS reports whether a native run can have a UTS namespace of its
// own (to call sethostname without changing the host's name).
func unshareUTS() bool {
	return exec.Command("unshare", "-u", "true").Run() == nil
}

var devFdN = regexp.MustCompile(`/dev/fd/[0-9]+`)

func normalizeFds(s string) string { return devFdN.ReplaceAllString(s, "/dev/fd/N") }

// diffLines fails t with every line where got differs from want.
func diffLines(t *testing.T, what, want, got string) {
	t.Helper()
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var bad []string
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			bad = append(bad, "  native/want: "+a+"\n  kbox:        "+b)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s: %d lines differ:\n%s\nkbox's output:\n%s", what, len(bad), strings.Join(bad, "\n"), got)
	}
}

// installGuest builds tests/guest/NAME.c (buildNative) and writes it to
// img as /NAME, mode 0755: a program a test needs that the image may
// predate.
func installGuest(t testing.TB, img, name string) {
	t.Helper()
	prog := buildNative(t, name+".c")
	for _, req := range []string{"write " + prog + " /" + name, "sif /" + name + " mode 0100755"} {
		if out, err := exec.Command("debugfs", "-w", "-R", req, img).CombinedOutput(); err != nil {
			t.Fatalf("debugfs %s: %v\n%s", req, err, out)
		}
	}
}
