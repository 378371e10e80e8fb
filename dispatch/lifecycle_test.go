package dispatch

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Serve reports every syscall to Observe with its result, as Dispatch
// served it; Stop and Close may be called more than once.
func TestServeObservesAndCloseTwice(t *testing.T) {
	e := New(Options{RootID: true})
	type seen struct {
		nr  int
		res Result
	}
	var got []seen
	e.Observe = func(r *Request, res *Result, _ time.Duration) { got = append(got, seen{r.Nr, *res}) }
	g := &memGuest{}
	p := e.Begin(4242, 1, "/")
	if e.RootPid != 4242 || e.Keeper != 1 || p.Cwd() != "/" {
		t.Fatalf("Begin: root %d keeper %d cwd %q", e.RootPid, e.Keeper, p.Cwd())
	}
	for _, c := range []struct {
		nr    int
		args  [6]uint64
		errno unix.Errno
	}{
		{nr: unix.SYS_GETUID},
		{nr: unix.SYS_CAPGET, args: [6]uint64{badAt}, errno: unix.EFAULT},
	} {
		res := e.Serve(&Request{Nr: c.nr, Args: c.args, G: g, P: p})
		if res.Errno != c.errno {
			t.Errorf("nr %d: errno %v, want %v", c.nr, res.Errno, c.errno)
		}
	}
	if len(got) != 2 || got[0].nr != unix.SYS_GETUID || got[1].nr != unix.SYS_CAPGET || got[1].res.Errno != unix.EFAULT {
		t.Errorf("observed %+v", got)
	}
	e.Stop()
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
