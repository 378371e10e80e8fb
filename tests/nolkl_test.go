//go:build !lkl

package tests

import "testing"

// TestLKLMissing reports, in one line, that the LKL integration tests did
// not run.
func TestLKLMissing(t *testing.T) {
	t.Skip("SKIP (needs liblkl): integration tests not built: no liblkl.a + lkl.h under LKL_DIR (default /opt/lkl); see README")
}
