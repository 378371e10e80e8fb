//go:build !kbox_broken_policy

package dispatch

// brokenHidden is false in every real build. A build with the tag
// kbox_broken_policy sets it (brokenpolicy_on.go): hidden paths are then
// not enforced, so that a test can show `kbox probe` catching a broken
// enforcement (tests/probe_test.go TestProbeCatchesBrokenPolicy).
const brokenHidden = false
