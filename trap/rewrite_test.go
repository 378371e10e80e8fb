//go:build linux && amd64 && cgo

package trap

import (
	"testing"

	"github.com/kbox-project/kbox/seccomp"
)

// The rewrite tier's stubs are cut out of the ranges the filter trusts.
func TestWithout(t *testing.T) {
	rs := []seccomp.IPRange{{Lo: 0, Hi: 100}, {Lo: 200, Hi: 300}, {Lo: 400, Hi: 500}}
	got := without(rs, 50, 250)
	want := []seccomp.IPRange{{Lo: 0, Hi: 50}, {Lo: 250, Hi: 300}, {Lo: 400, Hi: 500}}
	if len(got) != len(want) {
		t.Fatalf("without: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("without: %v, want %v", got, want)
		}
	}
}
