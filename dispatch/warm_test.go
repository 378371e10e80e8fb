package dispatch

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestNeededLibs: a dynamic host program names libc; garbage, a cut ELF
// and an empty file name nothing, without a panic.
func TestNeededLibs(t *testing.T) {
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skipf("no /bin/true: %v", err)
	}
	// glibc's libc.so.6, musl's libc.musl-ARCH.so.1
	if libs := neededLibs(b); !slices.ContainsFunc(libs, func(s string) bool { return strings.HasPrefix(s, "libc.") }) {
		t.Errorf("/bin/true needs %q, want libc", libs)
	}
	for name, in := range map[string][]byte{
		"empty":   nil,
		"garbage": []byte("\x7fELF\x02\x01\x01garbage garbage garbage garbage garbage garbage garbage"),
		"cut":     b[:200],
		"script":  []byte("#!/bin/sh\necho hi\n"),
	} {
		if libs := neededLibs(in); len(libs) != 0 {
			t.Errorf("%s: %q, want none", name, libs)
		}
	}
}
