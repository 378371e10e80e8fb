package main

import (
	"testing"
	"time"

	"github.com/kbox-project/kbox/clock"
	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/web"
	"golang.org/x/sys/unix"
)

// pidGuest is a dispatch.Guest that only knows its pid.
type pidGuest struct{ dispatch.Guest }

func (pidGuest) Pid() int { return 4242 }

func TestNoObservatoryByDefault(t *testing.T) {
	o, err := ParseImageArgs([]string{"-S", "img", "--", "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := newObservatory(o, kernelSource{})
	if ob != nil || err != nil || ob.hook() != nil {
		t.Fatalf("observatory without --web/--stats/--trace: %v %v", ob, err)
	}
	ob.close() // nil-safe
}

func TestObserveEvent(t *testing.T) {
	o, _ := ParseImageArgs([]string{"-S", "img", "--stats"})
	ob, err := newObservatory(o, kernelSource{})
	if err != nil || ob == nil || ob.server != nil || ob.trace != nil {
		t.Fatalf("--stats: %+v %v", ob, err)
	}
	g := pidGuest{}
	for _, c := range []struct {
		nr   int
		res  dispatch.Result
		disp web.Disposition
	}{
		{unix.SYS_OPENAT, dispatch.Result{Disp: dispatch.LKL, Val: 1025}, web.DispLKL},
		{unix.SYS_OPENAT, dispatch.Result{Disp: dispatch.LKL, Errno: unix.ENOENT}, web.DispLKL},
		{unix.SYS_IO_SETUP, dispatch.Result{Disp: dispatch.ENOSYS, Errno: unix.ENOSYS}, web.DispENOSYS},
		{unix.SYS_CLOSE, dispatch.Result{Action: dispatch.Continue, Disp: dispatch.Host}, web.DispHost},
	} {
		req := dispatch.Request{Nr: c.nr, G: g, Path: "/etc/hostname"}
		ob.observe(&req, &c.res, time.Microsecond)
	}
	d := ob.rec.Dispositions()
	if d[web.DispLKL] != 2 || d[web.DispENOSYS] != 1 || d[web.DispHost] != 1 {
		t.Errorf("dispositions %v", d)
	}
	if n := ob.rec.ENOSYSCounts(); len(n) != 1 || n[0].Name != "io_setup" {
		t.Errorf("enosys %+v", n)
	}
	if fam := ob.rec.FamilyCounts(); fam["file"] != 3 || fam["io"] != 1 {
		t.Errorf("families %v", fam)
	}
	var evs [8]web.Event
	n, _, _ := ob.rec.Read(0, evs[:])
	if n != 4 || evs[0].Path != "/etc/hostname" || evs[0].Ret != 1025 || evs[1].Ret != -int64(unix.ENOENT) || evs[1].Errno != int32(unix.ENOENT) || evs[0].Pid != 4242 {
		t.Errorf("events %+v", evs[:n])
	}
}

// BenchmarkObserve is the cost the observatory adds to one dispatched
// syscall when it is on: the two clock reads around dispatch (as the
// supervisor's serve loop does them) plus building and recording the
// event. Target: <= 50 ns.
func BenchmarkObserve(b *testing.B) {
	o, _ := ParseImageArgs([]string{"-S", "img", "--stats"})
	ob, _ := newObservatory(o, kernelSource{})
	req := dispatch.Request{Nr: unix.SYS_NEWFSTATAT, G: pidGuest{}, Path: "/etc/hostname"}
	res := dispatch.Result{Disp: dispatch.LKL}
	hook := ob.hook()
	b.ReportAllocs()
	for b.Loop() {
		start := clock.Now()
		hook(&req, &res, clock.Since(start))
	}
}
