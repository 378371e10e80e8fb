//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An idle run (docs/benchmarks.md, "Memory"): a second into it kbox has
// ended the Go threads its start left idle, and while the guest sleeps
// kbox starts no host threads (the kernel's clock event is one thread of
// kbox's, lkl/timer.c, not a new thread per expiry).

// TestSettleThreads: at the exit of a guest that slept two seconds, kbox
// has at most 8 Go threads, in the seccomp tier and in the in-process one.
func TestSettleThreads(t *testing.T) {
	img := imagePath(t)
	goRE := regexp.MustCompile(`threads at the guest's exit \d+: Go (\d+)`)
	for _, tier := range []string{"seccomp", "trap"} {
		t.Run(tier, func(t *testing.T) {
			_, errOut, status := runKboxEnv(t, kboxEnv{vars: []string{"KBOX_TRACE_STARTUP=1"}},
				"image", "-S", img, "--read-only", "--syscall-mode="+tier, "--trusted", "--", "/bin/sleep", "2")
			if status != 0 {
				t.Fatalf("status %d: %s", status, errOut)
			}
			m := goRE.FindStringSubmatch(errOut)
			if m == nil {
				t.Fatalf("no thread count in the start-up trace: %s", errOut)
			}
			if n, _ := strconv.Atoi(m[1]); n > 8 {
				t.Errorf("%d Go threads in an idle run, want at most 8: %s", n, errOut)
			}
		})
	}
}

// TestIdleStartsNoThreads: from 1.5 s into a run whose guest sleeps 4 s
// to its end, kbox's process starts at most a few threads (before
// lkl/timer.c glibc started one per timer expiry, some hundred a
// second). strace counts them: it follows the run's clone calls.
func TestIdleStartsNoThreads(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("*** strace not installed (apt-get install strace): the idle run's threads are not counted ***")
	}
	log := filepath.Join(t.TempDir(), "strace")
	cmd := exec.Command(strace, "-f", "-qq", "-ttt", "-e", "trace=clone,clone3", "-e", "signal=none", "-o", log,
		kboxBin(t), "image", "-S", imagePath(t), "--read-only", "--", "/bin/sleep", "4")
	start := float64(time.Now().UnixMicro()) / 1e6
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var late []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || !strings.HasPrefix(f[2], "clone") {
			continue
		}
		if ts, err := strconv.ParseFloat(f[1], 64); err == nil && ts > start+1.5 {
			late = append(late, l)
		}
	}
	// Go may start a thread now and then (its scavenger, a GC): a few.
	if len(late) > 3 {
		t.Errorf("an idle run started %d threads after 1.5 s, e.g. %q", len(late), late[0])
	}
}
