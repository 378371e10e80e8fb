package web

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestFormatStats(t *testing.T) {
	r := NewRecorder(RecorderConfig{Family: testFamily})
	for i := 0; i < 30; i++ {
		r.Record(&Event{Nr: 0, Name: "read", Disp: DispLKL})
	}
	for i := 0; i < 5; i++ {
		r.Record(&Event{Nr: 334, Name: "rseq", Disp: DispENOSYS, Ret: -38, Errno: 38})
	}
	r.Record(&Event{Nr: 59, Name: "execve", Disp: DispHost})
	var b bytes.Buffer
	if err := FormatStats(&b, r, 1500*time.Millisecond, 2); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"wall 1.5s", "36 syscalls", "lkl 30", "enosys 5", "read", "rseq", "(1 more)", "ENOSYS"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n > 40 {
		t.Errorf("%d lines: not one screen", n)
	}
	b.Reset()
	_ = FormatStats(&b, nil, 0, 0)
	if !strings.Contains(b.String(), "ENOSYS: none") {
		t.Errorf("nil recorder: %s", b.String())
	}
	t.Log("\n" + out)
}
