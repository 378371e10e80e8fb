//go:build lkl

package tests

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The stress programs (tests/stress), run under every tier kbox has,
// each asserting its own results: what the C kbox ships as stress tests,
// written here, plus a multi-threaded Go guest and a mixed workload.
// KBOX_STRESS_SECONDS sets the mixed workload's length (60 by default;
// `make stress` runs 600). Each run's wall time and kbox's peak RSS are
// logged (go test -v), and appended to $KBOX_STRESS_REPORT when set.

type stressCase struct {
	name  string
	argv  []string // after --
	want  string
	forks bool // needs fork: skipped in a tier that cannot fork
}

func stressCases(secs int) []stressCase {
	return []stressCase{
		{"forkstorm", []string{"/opt/tests/forkstorm", "2000"}, "forkstorm ok 2000", true},
		{"fd-exhaustion", []string{"/opt/tests/fdstress"}, "recovered", false},
		{"concurrent-io", []string{"/opt/tests/ioconc", "/root/ioconc", "8", "2000"}, "ioconc ok 16000", true},
		{"signal-race", []string{"/opt/tests/sigrace", "200"}, "sigrace ok 200", false},
		{"pthreads", []string{"/opt/tests/threads", "16", "200"}, "threads ok 3200", false},
		{"go-threads", []string{"/opt/tests/gothreads", "/tmp", "64", "50"}, "gothreads ok 3200", false},
		{"mixed", []string{"/bin/sh", "-c", mixedScript, "mixed", strconv.Itoa(secs), "/root/mixed"}, "mixed ok", true},
	}
}

var mixedScript = func() string {
	b, err := os.ReadFile("stress/mixed.sh")
	if err != nil {
		return "echo cannot read tests/stress/mixed.sh; exit 1"
	}
	return string(b)
}()

// stressTiers are the tiers this kbox runs a guest in, and whether each
// can run a guest that forks.
func stressTiers(t *testing.T, img string) (avail []string, forks map[string]bool) {
	forks = map[string]bool{}
	for _, tier := range tiers {
		_, _, st := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--", "/opt/tests/hello")
		if st != 0 {
			t.Logf("stress: tier %s not available here (status %d)", tier, st)
			continue
		}
		avail = append(avail, tier)
		_, _, st = runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--", "/bin/sh", "-c", "/opt/tests/hello >/dev/null; /opt/tests/hello >/dev/null")
		forks[tier] = st == 0
	}
	return avail, forks
}

func TestStress(t *testing.T) {
	img := copyImage(t, imagePath(t))
	secs := 60
	if v := os.Getenv("KBOX_STRESS_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("KBOX_STRESS_SECONDS=%q: want seconds", v)
		}
		secs = n
	}
	tiers, forks := stressTiers(t, img)
	if len(tiers) == 0 {
		t.Fatal("no tier runs /opt/tests/hello")
	}
	for _, tier := range tiers {
		for _, c := range stressCases(secs) {
			t.Run(tier+"/"+c.name, func(t *testing.T) {
				if c.forks && !forks[tier] {
					t.Skipf("SKIP: the %s tier cannot run a guest that forks", tier)
				}
				if c.name == "go-threads" {
					if _, _, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c", "test -x /opt/tests/gothreads"); st != 0 {
						t.Skip("SKIP: the image has no /opt/tests/gothreads (built without a Go toolchain)")
					}
				}
				limit := 3 * time.Minute
				if c.name == "mixed" {
					limit = time.Duration(secs)*time.Second + 3*time.Minute
				}
				out, stderr, status, wall, rss := runMeasured(t, limit, append([]string{"image", "-S", img, "--syscall-mode=" + tier, "--"}, c.argv...)...)
				if status != 0 || !strings.Contains(out, c.want) {
					t.Fatalf("status %d, want 0 and %q\nstdout: %s\nstderr: %s", status, c.want, lastLines(out, 20), lastLines(stderr, 20))
				}
				line := fmt.Sprintf("stress %s/%s: wall %.2f s, kbox peak RSS %d MB: %s", tier, c.name, wall.Seconds(), rss>>10, lastLines(out, 1))
				t.Log(line)
				if f := os.Getenv("KBOX_STRESS_REPORT"); f != "" {
					if fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
						fmt.Fprintln(fh, line)
						fh.Close()
					}
				}
			})
		}
	}
	assertCleanImage(t, img)
}

// runMeasured runs kbox with args within limit and returns its output,
// status, wall time and peak RSS in KiB (VmHWM, from its start-up trace:
// tracePeakMB says why not wait4's).
func runMeasured(t *testing.T, limit time.Duration, args ...string) (string, string, int, time.Duration, int64) {
	t.Helper()
	start := time.Now()
	out, errOut, status, _ := runKboxOpts(t, limit, kboxEnv{vars: []string{"KBOX_TRACE_STARTUP=1"}}, args...)
	wall := time.Since(start)
	var rss int64
	if m := peakRE.FindStringSubmatch(errOut); m != nil {
		rss, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return out, errOut, status, wall, rss
}
