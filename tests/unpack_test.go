//go:build lkl

package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnpackTimes: files written as dpkg unpacks a package
// (tests/guest/unpack.c: written, their writeback started, owner, mode and
// times set by path while the writer's fd is open, then fsynced and
// renamed) end with the times, modes and bytes they end with natively, in
// every tier, and the image holds those times after kbox exits: the times
// set while a writer held the file are the last word, not the write-back's.
func TestUnpackTimes(t *testing.T) {
	img := imagePath(t)
	bin := dumpFromImage(t, img, "/opt/tests/unpack")
	const n = "60"
	native, err := exec.Command(bin, filepath.Join(t.TempDir(), "u"), n).Output()
	if err != nil {
		t.Fatalf("native unpack: %v\n%s", err, native)
	}
	if !strings.Contains(string(native), "f59 size ") || strings.Contains(string(native), "differ") {
		t.Fatalf("natively:\n%s", native)
	}
	forEachTier(t, func(t *testing.T, m string) {
		work := copyImage(t, img)
		out, stderr, st := runKbox(t, "image", "-S", work, "--syscall-mode="+m, "--trusted", "--", "/opt/tests/unpack", "/u", n)
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "unpack", string(native), out)
		// In the image, as the guest saw them (debugfs: seconds).
		for _, f := range []string{"f0", "f31", "f59"} {
			got, err := exec.Command("debugfs", "-R", "stat /u/"+f, work).CombinedOutput()
			if err != nil {
				t.Fatalf("debugfs: %v\n%s", err, got)
			}
			if !strings.Contains(string(got), "mtime: 0x6553f100") || !strings.Contains(string(got), "atime: 0x5f5e1000") {
				t.Errorf("/u/%s in the image after the run, want mtime 1700000000 and atime 1600000000:\n%s", f, got)
			}
		}
	})
}

// BenchmarkUnpack times tests/guest/unpack.c writing 1000 files as dpkg
// unpacks them, natively (a host directory) and under each tier (a
// writable copy of the image; --trusted for the in-process tiers; each
// run after /bin/true on it, whose time is taken off): medians of 5
// interleaved rounds, and the ratio to native of the time net of start-up.
func BenchmarkUnpack(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	prog := dumpFromImage(b, img, "/opt/tests/unpack")
	const n = "1000"
	runs := map[string][]float64{}
	starts := map[string][]float64{}
	for round := 0; round < 5; round++ {
		runs["native"] = append(runs["native"], timeRun(b, exec.Command(prog, filepath.Join(b.TempDir(), "u"), n)))
		for _, m := range tiers {
			work := copyImage(b, img)
			args := []string{"image", "-S", work, "--syscall-mode=" + m}
			if m != "seccomp" {
				args = append(args, "--trusted")
			}
			starts[m] = append(starts[m], timeRun(b, exec.Command(bin, append(args, "--", "/bin/true")...)))
			runs[m] = append(runs[m], timeRun(b, exec.Command(bin, append(args, "--", "/opt/tests/unpack", "/u", n)...)))
		}
	}
	native := median(runs["native"])
	b.Logf("unpack %s files: native %.1f ms", n, native)
	for _, m := range tiers {
		t, s := median(runs[m]), median(starts[m])
		b.Logf("  %-8s %7.1f ms, start-up %5.1f, net %7.1f (%.2fx native)", m, t, s, t-s, (t-s)/native)
		b.ReportMetric((t-s)/native, "unpack_"+m+"_net_ratio")
	}
	b.ReportMetric(0, "ns/op")
}
