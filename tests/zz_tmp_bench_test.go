//go:build lkl

package tests

import (
	"testing"
	"time"
)

func BenchmarkTmpSessionRun(b *testing.B) {
	img := imagePath(b)
	_, callOK := benchClient(b, "--image", img, "--warm-pool", "0")
	res := callOK("session_open", map[string]any{})
	sid := res.StructuredContent.(map[string]any)["session"].(string)
	var runs []float64
	for i := 0; i < 201; i++ {
		t0 := time.Now()
		callOK("run", map[string]any{"session": sid, "argv": []string{"/bin/true"}})
		if i > 0 {
			runs = append(runs, float64(time.Since(t0).Microseconds())/1000)
		}
	}
	b.Logf("run p50 %.2f p90 %.2f p99 %.2f", percentile(runs, 50), percentile(runs, 90), percentile(runs, 99))
}
