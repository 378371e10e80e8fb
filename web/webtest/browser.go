// Package webtest drives the observatory dashboard in a real headless
// Chromium for tests: the web package's own test with synthetic events,
// and the end-to-end test against a running kbox.
package webtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// FindChromium returns the path of a Chromium-family browser, or "".
func FindChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// ArtifactsDir is where screenshots are kept: $KBOX_ARTIFACTS, or
// testdata/artifacts of the test's package (git-ignored).
func ArtifactsDir(t testing.TB) string {
	dir := os.Getenv("KBOX_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Browser is one headless Chromium tab.
type Browser struct {
	t   testing.TB
	Ctx context.Context
}

// Open starts headless Chromium (skipping the test loudly if there is
// none) and navigates to url. Everything is torn down with the test.
func Open(t testing.TB, url string) *Browser {
	t.Helper()
	chrome := FindChromium()
	if chrome == "" {
		t.Skip("SKIP (needs chromium): no Chromium browser found: apt-get install chromium")
	}
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
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelT)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
	return &Browser{t: t, Ctx: ctx}
}

// State is what Probe reads from the dashboard.
type State struct {
	Rows      int               `json:"rows"`     // event feed rows
	Points    map[string]int    `json:"points"`   // data points per chart canvas id
	Gauges    map[string]string `json:"gauges"`   // gauge id -> value
	Conn      string            `json:"conn"`     // stream status text
	ENOSYS    int               `json:"enosys"`   // ENOSYS table rows
	Legend    int               `json:"legend"`   // legend entries
	ScrollW   int               `json:"scrollW"`  // document scroll width
	DispRows  int               `json:"dispRows"` // disposition bars
	Columns   string            `json:"columns"`  // main grid columns
	Names     []string          `json:"names"`    // syscall names in the feed
	Detail    int               `json:"detail"`
	Filtered  int               `json:"filtered"`
	FilterBad int               `json:"filterBad"`
}

// Probe reads the dashboard's widgets.
const Probe = `(() => {
  const pts = {}; document.querySelectorAll('canvas.chart').forEach(c => pts[c.id] = Number(c.dataset.points || 0));
  const g = {}; document.querySelectorAll('.gauge').forEach(f => g[f.id] = f.dataset.value || '');
  const rows = [...document.querySelectorAll('#feed-body tr.ev')];
  return { rows: rows.length, points: pts, gauges: g,
    conn: document.getElementById('conn').textContent,
    enosys: document.querySelectorAll('#enosys tr td:nth-child(2)').length,
    legend: document.querySelectorAll('.legend span').length,
    scrollW: document.documentElement.scrollWidth,
    dispRows: document.querySelectorAll('#disp .row').length,
    columns: getComputedStyle(document.querySelector('main')).gridTemplateColumns,
    names: [...new Set(rows.map(r => (r.children[2] || {}).textContent || ''))] };
})()`

// FilterAndExpand selects a disposition in the feed filter and expands
// the first remaining row.
func FilterAndExpand(disp string) string {
	return `(() => {
  const sel = document.getElementById('f-disp'); sel.value = '` + disp + `'; sel.dispatchEvent(new Event('change'));
  const rows = [...document.querySelectorAll('#feed-body tr.ev')];
  const bad = rows.filter(r => !r.classList.contains('d-` + disp + `')).length;
  if (rows.length) rows[0].click();
  const detail = document.querySelectorAll('#feed-body tr.detail pre').length;
  return { filtered: rows.length, filterBad: bad, detail };
})()`
}

// Eval evaluates js (returning a State-shaped object).
func (b *Browser) Eval(js string) State {
	b.t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[State](js))
	if err != nil {
		b.t.Fatalf("evaluate: %v", err)
	}
	return v
}

// WaitFor probes until ok or the timeout, returning the last state.
func (b *Browser) WaitFor(ok func(State) bool, timeout time.Duration) State {
	deadline := time.Now().Add(timeout)
	for {
		st := b.Eval(Probe)
		if ok(st) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Screenshot saves a PNG of the viewport under ArtifactsDir and returns
// its path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(ArtifactsDir(b.t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// Resize emulates a viewport of w x h and lets the page relayout.
func (b *Browser) Resize(w, h int64) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, chromedp.EmulateViewport(w, h), chromedp.Sleep(1500*time.Millisecond)); err != nil {
		b.t.Fatal(err)
	}
}

// DataShown is the common check: feed rows, the four charts with at least
// two points, five disposition rows, a live stream and non-empty gauges.
func DataShown(s State) bool {
	if s.Rows == 0 || s.Conn != "stream: live" || s.DispRows != 5 {
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

// NetPanelState is what the network panel shows (NetPanelProbe).
type NetPanelState struct {
	Ifaces    int      `json:"ifaces"`
	Points    int      `json:"points"`
	Allowed   string   `json:"allowed"`
	Refused   string   `json:"refused"`
	Rows      []string `json:"rows"`
	Verdicts  []string `json:"verdicts"`
	Eth0      []string `json:"eth0"`
	Active    string   `json:"active"`
	Info      string   `json:"info"`
	ScrollW   int      `json:"scrollW"`
	RateCells []string `json:"rates"`
}

// NetPanelProbe scrolls to the network panel and reads it.
const NetPanelProbe = `(() => {
  const p = document.getElementById('net'); p.scrollIntoView();
  const rows = [...document.querySelectorAll('#net-decisions tbody tr.dec')];
  const eth0 = document.querySelector('#net-ifaces tr[data-iface="eth0"]');
  const cells = eth0 ? [...eth0.children].map(td => td.textContent) : [];
  const act = document.querySelector('#net-proto tr[data-tcp="ActiveOpens"]');
  return { ifaces: Number(p.dataset.ifaces || 0), points: Number(document.getElementById('c-net').dataset.points || 0),
    allowed: p.dataset.allowed || '', refused: p.dataset.refused || '',
    rows: rows.map(r => [...r.children].map(td => td.textContent).join('|')),
    verdicts: rows.map(r => getComputedStyle(r.querySelector('td.verdict')).color),
    eth0: cells, rates: cells.slice(5),
    active: act ? act.children[1].textContent : '',
    info: document.getElementById('net-info').textContent,
    scrollW: document.documentElement.scrollWidth };
})()`

// NetPanel reads the network panel.
func (b *Browser) NetPanel() NetPanelState {
	b.t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[NetPanelState](NetPanelProbe))
	if err != nil {
		b.t.Fatalf("evaluate: %v", err)
	}
	return v
}
