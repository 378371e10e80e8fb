//go:build lkl

package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// TestExecWarmsLibraries: an exec of a dynamic program starts making the
// shadows of the libraries it names (dispatch/warm.go), read from its
// memfd after the exec has let go of it. The engine here has no tier, so
// the exec ends ENOSYS once it is prepared; libselinux.so.1, which only
// ls names, then gets its shadow without any open of it.
func TestExecWarmsLibraries(t *testing.T) {
	g := lklGuest(t)
	const lib = "libselinux.so.1"
	warmed := func() bool {
		found := false
		engine.Shadows.EachNode(func(p string, _ int, _, _ uint64) {
			found = found || strings.HasSuffix(p, "/"+lib)
		})
		return found
	}
	if warmed() {
		t.Fatalf("%s has a shadow before the exec", lib)
	}
	r := &dispatch.Request{Nr: unix.SYS_EXECVE, Args: [6]uint64{g.Str("/usr/bin/ls")}, P: engine.Start(unix.Getpid(), "/"), G: g}
	if res := engine.Dispatch(r); res.Errno != unix.ENOSYS {
		t.Fatalf("execve with no tier: errno %v, want ENOSYS", res.Errno)
	}
	for end := time.Now().Add(5 * time.Second); !warmed(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no shadow of %s 5 s after the exec of ls", lib)
		}
	}
}
