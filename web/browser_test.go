package web

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func artifactsDir(t *testing.T) string {
	dir := os.Getenv("KBOX_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts") // git-ignored (root .gitignore)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

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
// the DevTools protocol and checks that every widget shows data.
func TestBrowserDashboard(t *testing.T) {
	chrome := findChromium()
	if chrome == "" {
		t.Skip("chromium not found: apt-get install chromium")
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

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	url := fmt.Sprintf("http://%s/?token=browser-test", addr)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	type state struct {
		Rows      int               `json:"rows"`
		Points    map[string]int    `json:"points"`
		Gauges    map[string]string `json:"gauges"`
		Conn      string            `json:"conn"`
		ENOSYS    int               `json:"enosys"`
		Legend    int               `json:"legend"`
		ScrollW   int               `json:"scrollW"`
		DispRows  int               `json:"dispRows"`
		Columns   string            `json:"columns"`
		Detail    int               `json:"detail"`
		Filtered  int               `json:"filtered"`
		FilterBad int               `json:"filterBad"`
	}
	const probe = `(() => {
	  const pts = {}; document.querySelectorAll('canvas.chart').forEach(c => pts[c.id] = Number(c.dataset.points || 0));
	  const g = {}; document.querySelectorAll('.gauge').forEach(f => g[f.id] = f.dataset.value || '');
	  return { rows: document.querySelectorAll('#feed-body tr.ev').length, points: pts, gauges: g,
	    conn: document.getElementById('conn').textContent,
	    enosys: document.querySelectorAll('#enosys tr td:nth-child(2)').length,
	    legend: document.querySelectorAll('.legend span').length,
	    scrollW: document.documentElement.scrollWidth,
	    dispRows: document.querySelectorAll('#disp .row').length,
	    columns: getComputedStyle(document.querySelector('main')).gridTemplateColumns };
	})()`
	var st state
	eval := func(js string) state {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[state](js))
		if err != nil {
			t.Fatalf("evaluate: %v", err)
		}
		return v
	}
	shoot := func(path string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ok := func(s state) bool {
		if s.Rows == 0 || s.ENOSYS == 0 || s.Conn != "stream: live" || s.DispRows != 5 {
			return false
		}
		for _, id := range []string{"c-family", "c-mem", "c-ctx", "c-softirq"} {
			if s.Points[id] < 2 {
				return false
			}
		}
		for _, id := range []string{"g-sys", "g-mem", "g-fd"} {
			if v := s.Gauges[id]; v == "" || v == "0" || v == "n/a" {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st = eval(probe)
		if ok(st) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	dir := artifactsDir(t)
	shot := filepath.Join(dir, "observatory.png")
	shoot(shot)
	t.Logf("state: %+v", st)
	t.Logf("screenshot: %s", shot)
	if !ok(st) {
		t.Fatalf("dashboard did not show data: %+v", st)
	}

	// Filtering by disposition and expanding a row.
	const filt = `(() => {
	  const sel = document.getElementById('f-disp'); sel.value = 'denied'; sel.dispatchEvent(new Event('change'));
	  const rows = [...document.querySelectorAll('#feed-body tr.ev')];
	  const bad = rows.filter(r => !r.classList.contains('d-denied')).length;
	  if (rows.length) rows[0].click();
	  const detail = document.querySelectorAll('#feed-body tr.detail pre').length;
	  return { filtered: rows.length, filterBad: bad, detail };
	})()`
	st = eval(filt)
	if st.Filtered == 0 || st.FilterBad != 0 || st.Detail != 1 {
		t.Fatalf("filter/expand: %+v", st)
	}

	// Narrow window: one column, no horizontal overflow.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(400, 900), chromedp.Sleep(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	st = eval(probe)
	narrow := filepath.Join(dir, "observatory-narrow.png")
	shoot(narrow)
	t.Logf("narrow: scrollWidth=%d columns=%q screenshot %s", st.ScrollW, st.Columns, narrow)
	if st.ScrollW > 410 {
		t.Errorf("narrow layout overflows: scrollWidth %d", st.ScrollW)
	}
}
