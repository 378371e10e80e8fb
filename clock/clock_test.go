package clock

import (
	"testing"
	"time"
)

func TestSinceMatchesWallClock(t *testing.T) {
	Init()
	for _, d := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
		s, w := Now(), time.Now()
		time.Sleep(d)
		got, want := Since(s), time.Since(w)
		if diff := got - want; diff < -want/20-50*time.Microsecond || diff > want/20+50*time.Microsecond {
			t.Errorf("%s clock: Since = %v, time.Since = %v", Source(), got, want)
		}
	}
	s := Now()
	if d := Since(s); d < 0 || d > time.Millisecond {
		t.Errorf("back-to-back Since = %v", d)
	}
}

// BenchmarkNowSince is the per-syscall cost of timing one dispatch.
func BenchmarkNowSince(b *testing.B) {
	Init()
	b.Logf("source %s", Source())
	var sum time.Duration
	for b.Loop() {
		sum += Since(Now())
	}
	_ = sum
}
