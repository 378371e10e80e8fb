package supervisor

import (
	"strings"
	"testing"
)

func TestTooOld(t *testing.T) {
	for _, c := range []struct {
		rel string
		old bool
	}{
		{"6.1.0-18-amd64", false},
		{"5.14.0", false},
		{"5.19.0-46-generic", false},
		{"5.13.19", true},
		{"5.10.0-28-amd64", true},
		{"4.19.0", true},
		{"3.10.0-1160.el7.x86_64", true},
		{"10.0", false},
		{"5.4-rc1", true},
		{"garbage", false},
		{"", false},
		{"x.y", false},
	} {
		if got := tooOld(c.rel); got != c.old {
			t.Errorf("tooOld(%q) = %v, want %v", c.rel, got, c.old)
		}
	}
}

func TestCheckHostKernelNamesTheFix(t *testing.T) {
	t.Setenv(kernelReleaseEnv, "5.10.0-28-amd64")
	err := checkHostKernel()
	if err == nil || !strings.Contains(err.Error(), "upgrade the host kernel") || !strings.Contains(err.Error(), "5.10.0-28-amd64") {
		t.Errorf("checkHostKernel on 5.10: %v", err)
	}
	t.Setenv(kernelReleaseEnv, "6.6.0")
	if err := checkHostKernel(); err != nil {
		t.Errorf("checkHostKernel on 6.6: %v", err)
	}
}
