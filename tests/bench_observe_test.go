//go:build lkl

package tests

import (
	"os/exec"
	"strconv"
	"testing"
)

// BenchmarkObservatoryCost runs the stat row of tests/guest/bench under
// kbox with the observatory off, with --web, and with --web plus a JSON
// trace, and reports each as a ratio to "off" (median of several runs).
func BenchmarkObservatoryCost(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	const runs, iters = 5, 20000
	trace := b.TempDir() + "/trace.jsonl"
	modes := []struct {
		name string
		args []string
	}{
		{"off", nil},
		{"web", []string{"--web=0"}},
		{"web+trace", []string{"--web=0", "--trace-file", trace}},
	}
	var off float64
	for _, m := range modes {
		var v []float64
		for i := 0; i < runs+1; i++ { // the first run warms the caches
			args := append([]string{"image", "-S", img, "--read-only"}, m.args...)
			args = append(args, "--", "/opt/tests/bench", "stat", strconv.Itoa(iters))
			out, err := exec.Command(bin, args...).Output()
			if err != nil {
				b.Fatalf("%s: %v", m.name, err)
			}
			if i > 0 {
				v = append(v, parseBench(b, string(out)))
			}
		}
		med := median(v)
		if m.name == "off" {
			off = med
		}
		b.Logf("observatory %-9s stat %8.0f ns/op  ratio to off %.3f", m.name, med, med/off)
	}
}
