//go:build lkl

package tests

import (
	"testing"
	"time"

	"github.com/kbox-project/kbox/web/webtest"
)

// TestDashboardAgainstKbox opens the dashboard of a running kbox in
// headless Chromium while a real guest workload runs, and checks that the
// charts, gauges, ENOSYS table and event feed show that workload. The
// screenshot is kept as a test artifact (tests/testdata/artifacts/).
func TestDashboardAgainstKbox(t *testing.T) {
	if webtest.FindChromium() == "" {
		t.Skip("SKIP (needs chromium): apt-get install chromium")
	}
	img := imagePath(t)
	o := startObserved(t, "image", "-S", img, "--read-only", "--web=0", "--web-token", "tok", "--",
		"/opt/tests/observe", "3", "2", "60000")
	time.Sleep(2500 * time.Millisecond) // history points to backfill

	b := webtest.Open(t, o.base+"/?token=tok")
	ok := func(s webtest.State) bool {
		if !webtest.DataShown(s) || s.ENOSYS == 0 {
			return false
		}
		for _, n := range s.Names {
			if n == "stat" {
				return true
			}
		}
		return false
	}
	st := b.WaitFor(ok, 40*time.Second)
	shot := b.Screenshot("kbox-dashboard.png")
	t.Logf("state: %+v\nscreenshot: %s", st, shot)
	if !ok(st) {
		t.Fatalf("dashboard did not show the guest's workload: %+v", st)
	}
	st = b.Eval(webtest.FilterAndExpand("lkl"))
	if st.Filtered == 0 || st.FilterBad != 0 || st.Detail != 1 {
		t.Errorf("filtering the feed to LKL and expanding a row: %+v", st)
	}
}
