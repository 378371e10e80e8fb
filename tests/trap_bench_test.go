//go:build lkl

package tests

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkTrapFloor measures the floor of the trap mechanism with
// scripts/trap_floor.c (no kbox: a SIGSYS trap answered in C, with and
// without the two thread-pointer switches this CPU needs, the redirect to
// ordinary context the tier uses, and the hand-off to a service thread it
// did not choose), and the way into Go and back that the rewrite tier's
// stub takes, with tests/testdata/cbfloor (a cgo callback from a C
// thread, XSAVE and XRSTOR or the tiers' moves of the vector registers
// around it, an open+close made in two such trips), so that a target below the floor shows as such
// (docs/benchmarks.md). The tiers' rows beside native are
// BenchmarkRewrite's (native, seccomp, trap and rewrite in one run).
func BenchmarkTrapFloor(b *testing.B) {
	img := imagePath(b)
	hostFile := dumpFromImage(b, img, "/etc/hostname")
	const runs = 5
	floor := filepath.Join(b.TempDir(), "trap_floor")
	if out, err := exec.Command("cc", "-O2", "-pthread", "-o", floor, filepath.Join(repoRoot(), "scripts", "trap_floor.c")).CombinedOutput(); err != nil {
		b.Logf("trap_floor not built (%v): %s", err, out)
	} else {
		var line []string
		for _, mode := range []string{"native", "trap", "trapfs", "redirect", "handoff", "handoffspin", "fsbase"} {
			var v []float64
			for i := 0; i < runs; i++ {
				out, err := exec.Command(floor, mode, "20000", hostFile).Output()
				if err != nil {
					b.Fatalf("trap_floor %s: %v", mode, err)
				}
				v = append(v, parseBench(b, string(out)))
			}
			line = append(line, mode+" "+strconv.FormatFloat(median(v), 'f', 1, 64))
			b.ReportMetric(median(v), "floor_"+mode+"_ns")
		}
		b.Logf("floor (scripts/trap_floor.c, stat, ns/op): %s", strings.Join(line, "   "))
	}
	// The way into Go and back (tests/testdata/cbfloor): a callback from
	// a C thread, with XSAVE and XRSTOR or with the vector registers
	// moved by hand (trap/fpstate.c), and an open+close made by Go in two
	// such trips.
	cb := filepath.Join(b.TempDir(), "cbfloor")
	if out, err := exec.Command("go", "build", "-o", cb, "./testdata/cbfloor").CombinedOutput(); err != nil {
		b.Logf("cbfloor not built (%v): %s", err, lastLines(string(out), 3))
	} else {
		var line []string
		for _, m := range []struct {
			mode string
			n    int
		}{{"xsave", 1000000}, {"call", 1000000}, {"xcall", 1000000}, {"openclose", 200000}, {"xopenclose", 200000},
			{"vsave", 1000000}, {"vcall", 1000000}, {"vopenclose", 200000}} {
			out, err := exec.Command(cb, m.mode, strconv.Itoa(m.n), hostFile).Output()
			if err != nil {
				b.Fatalf("cbfloor %s: %v", m.mode, err)
			}
			v := parseBench(b, string(out))
			if v < 0 {
				line = append(line, m.mode+" n/a (no XGETBV 1)")
				continue
			}
			line = append(line, m.mode+" "+strconv.FormatFloat(v, 'f', 1, 64))
			b.ReportMetric(v, "cbfloor_"+m.mode+"_ns")
		}
		b.Logf("callback floor (tests/testdata/cbfloor, ns/op): %s", strings.Join(line, "   "))
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTrapStartup is BenchmarkStartup in the trap tier: wall time and
// peak RSS of `kbox image --syscall-mode=trap -- /bin/true`, with the
// seccomp tier's in the same run.
func BenchmarkTrapStartup(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	for _, mode := range []string{"seccomp", "trap"} {
		var wall, rss []float64
		for i := 0; i < 7; i++ {
			w, r, _ := tracedRun(b, bin, "image", "-S", img, "--read-only", "--syscall-mode="+mode, "--", "/bin/true")
			wall, rss = append(wall, w), append(rss, r)
		}
		b.Logf("%-7s kbox -- /bin/true: median wall %.1f ms, peak RSS %.1f MB", mode, median(wall), median(rss))
		b.ReportMetric(median(wall), mode+"_wall_ms")
		b.ReportMetric(median(rss), mode+"_peak_rss_MB")
	}
	b.ReportMetric(0, "ns/op")
}
