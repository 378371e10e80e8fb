//go:build !amd64

package dispatch

// legacyPureLookups: asm-generic architectures have no legacy path
// syscalls (see legacy_amd64.go).
var legacyPureLookups []int

// legacyOpens: none (see legacy_amd64.go).
var legacyOpens []int
