//go:build lkl

package tests

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// sessionCLIFigures: `kbox session checkpoint` and `kbox session
// rollback` after 100 MB written to a 1 GiB copy of the image (grown with
// resize2fs), median of 3 each, as each verb times itself
// (KBOX_TRACE_STARTUP's total: from kbox's main to the verb's end, without
// the exec of kbox) and as a script sees it (the whole command).
func sessionCLIFigures(b *testing.B) (cp, rb, cpWall, rbWall float64) {
	img := gibImage(b)
	dir := filepath.Join(b.TempDir(), "s")
	env := kboxEnv{vars: []string{"KBOX_TRACE_STARTUP=1"}}
	total := regexp.MustCompile(`start-up trace: total ([0-9.]+) ms`)
	run := func(args ...string) (own, wall float64) {
		b.Helper()
		t0 := time.Now()
		_, errOut, status := runKboxEnv(b, env, append([]string{"session"}, args...)...)
		wall = float64(time.Since(t0).Microseconds()) / 1000
		if status != 0 {
			b.Fatalf("kbox session %q: status %d: %s", args, status, errOut)
		}
		if m := total.FindStringSubmatch(errOut); m != nil {
			own, _ = strconv.ParseFloat(m[1], 64)
		}
		return own, wall
	}
	run("open", "-S", img, dir)
	defer exec.Command(kboxBin(b), "session", "close", dir).Run()
	run("run", dir, "--", "sh", "-c", "dd if=/dev/urandom of=/root/big bs=1M count=100 2>/dev/null && sync")
	var cps, rbs, cpw, rbw []float64
	for i := range 3 {
		own, wall := run("checkpoint", dir, "c"+strconv.Itoa(i))
		cps, cpw = append(cps, own), append(cpw, wall)
	}
	for range 3 {
		own, wall := run("rollback", dir, "c0")
		rbs, rbw = append(rbs, own), append(rbw, wall)
	}
	b.Logf("kbox session after 100 MB written to a 1 GiB image: checkpoint %v ms (wall %v), rollback %v ms (wall %v)", cps, cpw, rbs, rbw)
	return median(cps), median(rbs), median(cpw), median(rbw)
}

// gibImage is a copy of the test image grown to 1 GiB (resize2fs).
func gibImage(b *testing.B) string {
	img := copyImage(b, imagePath(b))
	for _, c := range [][]string{{"truncate", "-s", "1G", img}, {"e2fsck", "-fy", img}, {"resize2fs", img}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil && c[0] != "e2fsck" {
			b.Fatalf("%v: %v %s", c, err, out)
		}
	}
	return img
}

// BenchmarkSessionCLI: sessionCLIFigures alone.
func BenchmarkSessionCLI(b *testing.B) {
	cp, rb, cpw, rbw := sessionCLIFigures(b)
	b.ReportMetric(cp, "cli_checkpoint_ms")
	b.ReportMetric(rb, "cli_rollback_ms")
	b.ReportMetric(cpw, "cli_checkpoint_wall_ms")
	b.ReportMetric(rbw, "cli_rollback_wall_ms")
	b.ReportMetric(0, "ns/op")
}
