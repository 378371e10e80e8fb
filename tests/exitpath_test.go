//go:build lkl

package tests

import (
	"path/filepath"
	"strings"
	"testing"
)

// The end of a run (docs/benchmarks.md, "Start-up"): a run whose disk
// writes all end with it (--read-only, --ephemeral) leaves the kernel to
// the process's exit, with no unmount; a run that keeps what it wrote
// (the image itself, --snapshot) syncs, unmounts and detaches the disk
// (the kernel then ends with the process), and what it wrote is on
// disk, clean, when kbox exits.
func TestExitPath(t *testing.T) {
	cases := []struct {
		name     string
		args     func(dir string) []string
		unmounts bool   // the trace names unmount and close, else leave
		inImage  bool   // the guest's file is in the image afterwards
		snapshot string // the file the guest's write must be in, if any
	}{
		{name: "read-only", args: func(string) []string { return []string{"--read-only"} }},
		{name: "ephemeral", args: func(string) []string { return []string{"--ephemeral"} }},
		{name: "snapshot", args: func(dir string) []string {
			return []string{"--snapshot", filepath.Join(dir, "snap.ext4")}
		}, unmounts: true, snapshot: "snap.ext4"},
		{name: "read-write", args: func(string) []string { return nil }, unmounts: true, inImage: true},
	}
	for _, tier := range []string{"seccomp", "rewrite"} {
		for _, c := range cases {
			t.Run(tier+"/"+c.name, func(t *testing.T) {
				img := copyImage(t, imagePath(t))
				before := fileSum(t, img)
				dir := t.TempDir()
				args := append([]string{"image", "-S", img, "--syscall-mode=" + tier, "--trusted"}, c.args(dir)...)
				args = append(args, "--", "/bin/sh", "-c", "echo kept > /etc/exitpath 2>/dev/null; echo done")
				out, errOut, status := runKboxEnv(t, kboxEnv{vars: []string{"KBOX_TRACE_STARTUP=1"}}, args...)
				if status != 0 || out != "done\n" {
					t.Fatalf("status %d, out %q, stderr:\n%s", status, out, errOut)
				}
				var trace string
				for _, l := range strings.Split(errOut, "\n") {
					if strings.Contains(l, "start-up trace") {
						trace = l + " "
					}
				}
				unmounted := strings.Contains(trace, " unmount ") && strings.Contains(trace, " close ")
				left := strings.Contains(trace, " leave ")
				if trace == "" || unmounted != c.unmounts || left == c.unmounts {
					t.Errorf("want unmounted %v (else left): trace %q", c.unmounts, trace)
				}
				assertCleanImage(t, img)
				got, ok := debugfsCat(t, img, "/etc/exitpath")
				if c.inImage && (!ok || got != "kept\n") {
					t.Errorf("the guest's write is not in the image at kbox's exit: %v %q", ok, got)
				}
				if !c.inImage {
					if ok {
						t.Errorf("the guest's write reached the image: %q", got)
					}
					if after := fileSum(t, img); after != before {
						t.Errorf("the image changed: %s -> %s", before, after)
					}
				}
				if c.snapshot != "" {
					snap := filepath.Join(dir, c.snapshot)
					assertCleanImage(t, snap)
					if got, ok := debugfsCat(t, snap, "/etc/exitpath"); !ok || got != "kept\n" {
						t.Errorf("the guest's write is not in the snapshot: %v %q", ok, got)
					}
				}
			})
		}
	}
}
