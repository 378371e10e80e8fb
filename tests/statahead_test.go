//go:build lkl

package tests

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatAhead: a walk that lstats, stats and statxes what it lists,
// depth first as busybox find does, gets the same answers in every
// tier, as root and as uid 1000, on a read-only image: files of several
// sizes, modes and link counts, symlinks (to files, to a directory,
// dangling), a FIFO, a long name, directories only root may search or
// nobody may, nested directories with files after them, and paths past
// 511 bytes. Then the prepared answers meet bad, read-only and half-
// writable buffers, paths that fault, a reused path buffer, other
// spellings, stats that follow, flags, relative paths, the old stat
// calls, statx of other flags and masks, and other threads
// (tests/guest/statahead.c). The rewrite tier answers such calls from
// what each listing prepared (dispatch/hint_stat.go, trap/hint_stat.c).
func TestStatAhead(t *testing.T) {
	img := copyImage(t, imagePath(t))
	out, stderr, st := runKbox(t, "image", "-S", img, "--", "/opt/tests/statahead", "/sa", "make")
	if st != 0 || strings.Contains(out, "FAIL") {
		t.Fatalf("make: status %d\n%s\nstderr: %s", st, out, lastLines(stderr, 5))
	}
	walks := map[string]string{}
	forEachTier(t, func(t *testing.T, tier string) {
		for _, who := range []struct {
			name string
			args []string
		}{
			{"", []string{"-S"}},
			{" as uid 1000", []string{"-R", "--change-id", "1000:1000"}},
		} {
			args := append([]string{"image", who.args[0], img, "--read-only", "--syscall-mode=" + tier}, who.args[1:]...)
			walk, stderr, st := runKbox(t, append(args, "--", "/opt/tests/statahead", "/sa", "walk")...)
			if st != 0 || strings.Count(walk, "\n") < 1000 {
				t.Fatalf("walk%s: status %d\n%s\nstderr: %s", who.name, st, lastLines(walk, 5), lastLines(stderr, 5))
			}
			walks[tier+who.name] = walk
			cases, stderr, st := runKbox(t, append(args, "--", "/opt/tests/statahead", "/sa", "cases")...)
			if st != 0 || strings.Contains(cases, "FAIL") || strings.Count(cases, ": ok\n") != 6 {
				t.Errorf("cases%s: status %d\n%s\nstderr: %s", who.name, st, cases, lastLines(stderr, 5))
			}
		}
	})
	for _, want := range []string{
		"l /sa/flat/l001 dev=",        // a symlink's own answer
		"s /sa/flat/dangle ENOENT",    // a dangling one followed
		"s /sa/flat/fifo dev=",        // a FIFO
		"l /sa/flat/nosearch/g1 dev=", // root searches any directory
		"x /sa/flat/l001 ",            // a statx answer
	} {
		if !strings.Contains(walks["seccomp"], want) {
			t.Errorf("the walk has no %q", want)
		}
	}
	for _, want := range []string{
		"opendir /sa/flat/locked EACCES", // not uid 1000's
		"l /sa/flat/nosearch/g1 EACCES",  // listed, not searchable
	} {
		if !strings.Contains(walks["seccomp as uid 1000"], want) {
			t.Errorf("the walk as uid 1000 has no %q", want)
		}
	}
	for run, walk := range walks {
		base := "seccomp"
		if strings.HasSuffix(run, " as uid 1000") {
			base += " as uid 1000"
		}
		if walk != walks[base] {
			d := lineDiff(walk, walks[base])
			t.Errorf("%s walks otherwise than %s (%s | %s):\n%s", run, base, run, base, d[:min(len(d), 2000)])
		}
	}
	assertCleanImage(t, img)
}

// TestStatAheadKeepsFS: the rewrite tier answers a walk's prepared stats
// on the way in, with the guest's thread pointer still in FS
// (trap/core.c, kbox_rw_serve). On a CPU without FSGSBASE each switch of
// FS is an arch_prctl, a trip through the host kernel, and a trip into
// Go takes two. The walk makes over 4,000 stats, most of them prepared;
// kbox must make fewer arch_prctl calls than that (strace counts them).
// A CPU with FSGSBASE switches FS without a syscall: nothing to count.
func TestStatAheadKeepsFS(t *testing.T) {
	if hwcap2()&2 != 0 {
		t.Skip("*** the CPU has FSGSBASE: kbox switches FS with wrfsbase, no syscall to count ***")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("*** strace not installed (apt-get install strace): kbox's arch_prctl calls are not counted ***")
	}
	img := copyImage(t, imagePath(t))
	if out, stderr, st := runKbox(t, "image", "-S", img, "--", "/opt/tests/statahead", "/sa", "make"); st != 0 {
		t.Fatalf("make: status %d\n%s\nstderr: %s", st, out, lastLines(stderr, 5))
	}
	log := filepath.Join(t.TempDir(), "strace")
	cmd := exec.Command(strace, "-f", "-qq", "-e", "trace=arch_prctl", "-e", "signal=none", "-o", log,
		kboxBin(t), "image", "-S", img, "--read-only", "--syscall-mode=rewrite", "--trusted", "--", "/opt/tests/statahead", "/sa", "walk")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the walk under strace: %v", err)
	}
	stats := strings.Count(string(out), "\n")
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	switches := strings.Count(string(data), "ARCH_SET_FS")
	t.Logf("%d stats, %d arch_prctl(ARCH_SET_FS) calls", stats, switches)
	if stats < 4000 || switches >= stats {
		t.Errorf("the walk's %d stats took %d switches of FS (arch_prctl): prepared answers should take none", stats, switches)
	}
}

// hwcap2 returns the process's AT_HWCAP2 (the kernel's view of the CPU:
// bit 1 FSGSBASE).
func hwcap2() uint64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 0
	}
	for i := 0; i+16 <= len(b); i += 16 {
		if binary.NativeEndian.Uint64(b[i:]) == 26 { // AT_HWCAP2
			return binary.NativeEndian.Uint64(b[i+8:])
		}
	}
	return 0
}
