//go:build lkl

package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMapVirtualFds: mmap of files above the shadow cap, which kbox
// serves as virtual fds (tests/guest/mapvirt.c, the cap lowered to 4 KiB
// with KBOX_SHADOW_MAX), gives what Linux gives, line by line against the
// program run natively: the mapped bytes, a private write that stays
// private, SIGBUS past the file's last page, Linux's errors, a dup, a
// number reused by another file and a forked child's map (the seccomp
// tier), the same without the child in the in-process tiers. Before,
// every such mmap was EBADF.
func TestMapVirtualFds(t *testing.T) {
	img := copyImage(t, imagePath(t))
	prog := dumpFromImage(t, img, "/opt/tests/mapvirt")
	dir := t.TempDir()
	if b, err := exec.Command(prog, dir, "make").CombinedOutput(); err != nil {
		t.Fatalf("native make: %v\n%s", err, b)
	}
	b, err := exec.Command(prog, dir, "fork").CombinedOutput()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, b)
	}
	native := string(b)
	small := kboxEnv{vars: []string{"KBOX_SHADOW_MAX=4096"}}
	out, stderr, st := runKboxEnv(t, small, "image", "-S", img, "-c",
		"mkdir /root/m && /opt/tests/mapvirt /root/m make && /opt/tests/mapvirt /root/m fork")
	if st != 0 || out != native {
		t.Errorf("seccomp: status %d\n%s\nnatively:\n%s\nstderr: %s", st, out, native, stderr)
	}
	var noChild []string
	for _, l := range strings.SplitAfter(native, "\n") {
		if !strings.Contains(l, "in a child") {
			noChild = append(noChild, l)
		}
	}
	for _, m := range []string{"trap", "rewrite"} {
		out, stderr, st := runKboxEnv(t, small, "image", "-S", img, "--ephemeral", "--syscall-mode="+m, "--trusted", "--", "/opt/tests/mapvirt", "/root/m")
		if want := strings.Join(noChild, ""); st != 0 || out != want {
			t.Errorf("%s: status %d\n%s\nwant:\n%s\nstderr: %s", m, st, out, want, stderr)
		}
	}
}

// TestLoadVirtualLibrary: the dynamic loader maps a library above the
// shadow cap (a virtual fd: KBOX_SHADOW_MAX=4096), and under the rewrite
// tier its syscall site is patched as any library's
// (tests/guest/dyn/dlplug.c). Before, the load failed with EBADF.
func TestLoadVirtualLibrary(t *testing.T) {
	img := imagePath(t)
	if out, _, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/ls", "/opt/tests/dlplug", "/lib/ld-musl-x86_64.so.1"); st != 0 {
		t.Skipf("SKIP (the image has no dynamic musl guest; rebuilt without musl-gcc?): %s", out)
	}
	small := kboxEnv{vars: []string{"KBOX_SHADOW_MAX=4096"}}
	for _, m := range []string{"seccomp", "rewrite"} {
		out, stderr, st := runKboxEnv(t, small, "image", "-S", img, "--read-only", "--syscall-mode="+m, "--trusted", "--", "/opt/tests/dlplug", "100")
		want := "a: 100 calls ok, site original\nb mapped: site original\nb: 100 calls ok, site original\n"
		if m == "rewrite" {
			want = "a: 100 calls ok, site patched\nb mapped: site original\nb: 100 calls ok, site patched\n"
		}
		if st != 0 || out != want {
			t.Errorf("%s: status %d\n%s\nwant:\n%s\nstderr: %s", m, st, out, want, stderr)
		}
	}
}
