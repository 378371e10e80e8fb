package web

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/kbox-project/kbox/web/webtest"
)

// x86_64 numbers, only to make the demo data look real.
var demoSyscalls = []struct {
	nr     int32
	name   string
	family string
	path   bool
}{
	{0, "read", "io", false}, {1, "write", "io", false}, {257, "openat", "file", true}, {3, "close", "file", false},
	{5, "fstat", "meta", false}, {262, "newfstatat", "meta", true}, {9, "mmap", "mem", false}, {11, "munmap", "mem", false},
	{13, "rt_sigaction", "signal", false}, {14, "rt_sigprocmask", "signal", false}, {41, "socket", "net", false},
	{42, "connect", "net", false}, {228, "clock_gettime", "time", false}, {39, "getpid", "proc", false},
	{56, "clone", "proc", false}, {59, "execve", "proc", true}, {334, "rseq", "other", false}, {425, "io_uring_setup", "io", false},
}

func demoFamily(nr int32) string {
	for _, s := range demoSyscalls {
		if s.nr == nr {
			return s.family
		}
	}
	return ""
}

func feedDemoEvents(ctx context.Context, rec *Recorder) {
	rng := rand.New(rand.NewSource(1))
	paths := []string{"/etc/passwd", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/tmp/build/out.o", "/proc/self/maps", "/home/user/a \"quoted\" <name>.txt"}
	for ctx.Err() == nil {
		for i := 0; i < 200; i++ {
			s := demoSyscalls[rng.Intn(len(demoSyscalls))]
			e := Event{Pid: int32(100 + rng.Intn(4)), Nr: s.nr, Name: s.name, LatencyNs: int64(200 + rng.ExpFloat64()*3000), Ret: 0}
			switch {
			case s.name == "rseq" || s.name == "io_uring_setup":
				e.Disp, e.Ret, e.Errno = DispENOSYS, -38, 38
			case s.family == "net" && rng.Intn(3) == 0:
				e.Disp, e.Ret, e.Errno = DispDenied, -1, 1
			case s.family == "time" || s.name == "getpid":
				e.Disp = DispEmulated
			case s.family == "mem" || s.family == "signal" || s.name == "execve" || s.name == "clone":
				e.Disp = DispHost
			default:
				e.Disp = DispLKL
			}
			if s.path {
				e.Path = paths[rng.Intn(len(paths))]
				if rng.Intn(10) == 0 {
					e.Ret, e.Errno = -2, 2
				}
			}
			rec.Record(&e)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBrowserDashboard serves the dashboard from a real Server fed by
// synthetic events and this host's /proc, drives headless Chromium over
// the DevTools protocol and checks that every widget shows data. (The
// end-to-end test against a running kbox is tests/dashboard_test.go.)
func TestBrowserDashboard(t *testing.T) {
	if webtest.FindChromium() == "" {
		t.Skip("SKIP (needs chromium): apt-get install chromium")
	}
	rec := NewRecorder(RecorderConfig{Family: demoFamily, SampleEvery: 16})
	sm := NewSampler(SamplerConfig{ReadFile: os.ReadFile, Interval: 300 * time.Millisecond, Recorder: rec,
		FDTable: func() (int, int) { return 37, 1024 }})
	sm.Start()
	defer sm.Stop()
	srv := NewServer(Options{Recorder: rec, Sampler: sm, Token: "browser-test"})
	addr, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	feedCtx, stopFeed := context.WithCancel(context.Background())
	defer stopFeed()
	go feedDemoEvents(feedCtx, rec)
	time.Sleep(1200 * time.Millisecond) // a few history points to backfill

	b := webtest.Open(t, fmt.Sprintf("http://%s/?token=browser-test", addr))
	ok := func(s webtest.State) bool { return webtest.DataShown(s) && s.ENOSYS > 0 }
	st := b.WaitFor(ok, 30*time.Second)
	shot := b.Screenshot("observatory.png")
	t.Logf("state: %+v", st)
	t.Logf("screenshot: %s", shot)
	if !ok(st) {
		t.Fatalf("dashboard did not show data: %+v", st)
	}

	// Filtering by disposition and expanding a row.
	st = b.Eval(webtest.FilterAndExpand("denied"))
	if st.Filtered == 0 || st.FilterBad != 0 || st.Detail != 1 {
		t.Fatalf("filter/expand: %+v", st)
	}

	// Narrow window: one column, no horizontal overflow.
	b.Resize(400, 900)
	st = b.Eval(webtest.Probe)
	narrow := b.Screenshot("observatory-narrow.png")
	t.Logf("narrow: scrollWidth=%d columns=%q screenshot %s", st.ScrollW, st.Columns, narrow)
	if st.ScrollW > 410 {
		t.Errorf("narrow layout overflows: scrollWidth %d", st.ScrollW)
	}
}
