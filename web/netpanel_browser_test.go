package web

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbox-project/kbox/web/webtest"
)

// TestBrowserNetPanel: the dashboard's network panel in headless
// Chromium, fed by a /proc whose eth0 counters grow (as LKL's do) and by
// the network stack's decisions: per-interface bytes, packets and rates,
// the rx/tx chart, TCP/UDP counters, and the decisions, allowed and
// refused with their peers and rules, newest first.
func TestBrowserNetPanel(t *testing.T) {
	if webtest.FindChromium() == "" {
		t.Skip("SKIP (needs chromium): apt-get install chromium")
	}
	var ticks atomic.Int64
	read := func(p string) ([]byte, error) {
		switch p {
		case "/proc/net/dev":
			n := ticks.Add(1)
			return []byte(fmt.Sprintf("Inter-|   Receive                                                |  Transmit\n"+
				" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"+
				"    lo: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"+
				"  eth0: %d %d 0 0 0 0 0 0 %d %d 0 0 0 0 0 0\n", 1000000*n, 700*n, 2000000*n, 900*n)), nil
		case "/proc/net/snmp":
			return []byte("Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n" +
				"Tcp: 1 200 120000 -1 7 1 0 0 1 700 800 0 0 2 0\n" +
				"Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n" +
				"Udp: 3 1 0 4 0 0 0 0 0\n"), nil
		}
		return os.ReadFile(p)
	}
	rec := NewRecorder(RecorderConfig{Family: demoFamily, SampleEvery: 16})
	sm := NewSampler(SamplerConfig{ReadFile: read, Interval: 300 * time.Millisecond, Recorder: rec})
	sm.Start()
	defer sm.Stop()
	nl := NewNetLog(0)
	nl.Add(NetDecision{Proto: "tcp", Verdict: "allowed", Guest: "10.0.2.15:40001", Dest: "10.0.2.2:8000", Real: "127.0.0.1:8000",
		Rule: "allow 127.0.0.1/32:8000", Why: "allowed by 127.0.0.1/32:8000"})
	srv := NewServer(Options{Recorder: rec, Sampler: sm, NetLog: nl})
	addr, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go feedDemoEvents(ctx, rec)
	time.Sleep(1000 * time.Millisecond)

	b := webtest.Open(t, fmt.Sprintf("http://%s/", addr))
	probe := b.NetPanel
	// A refusal while the page is open shows up on the next poll.
	time.AfterFunc(1500*time.Millisecond, func() {
		nl.Add(NetDecision{Proto: "tcp", Verdict: "refused", Guest: "10.0.2.15:40002", Dest: "169.254.169.254:80", Real: "169.254.169.254:80",
			Rule: "guarded 169.254.0.0/16", Why: "guarded range 169.254.0.0/16"})
	})
	var st webtest.NetPanelState
	ok := func(s webtest.NetPanelState) bool {
		return s.Ifaces == 2 && s.Points >= 2 && s.Allowed == "1" && s.Refused == "1" && len(s.Rows) == 2 &&
			len(s.RateCells) == 2 && s.RateCells[0] != "0B" && s.RateCells[1] != "0B" && s.Active == "7"
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if st = probe(); ok(st) {
			break
		}
	}
	shot := b.Screenshot("observatory-net.png")
	t.Logf("state %+v, screenshot %s", st, shot)
	if !ok(st) {
		t.Fatalf("network panel: %+v", st)
	}
	// Newest first, with peers and rules; refused in red, allowed in green.
	if !strings.HasPrefix(st.Rows[0], "2|refused|tcp|10.0.2.15:40002|169.254.169.254:80|169.254.169.254:80|guarded 169.254.0.0/16") ||
		!strings.HasPrefix(st.Rows[1], "1|allowed|tcp|10.0.2.15:40001|10.0.2.2:8000|127.0.0.1:8000|allow 127.0.0.1/32:8000") {
		t.Errorf("rows %q", st.Rows)
	}
	if st.Verdicts[0] == st.Verdicts[1] {
		t.Errorf("refused and allowed in the same colour %q", st.Verdicts)
	}
	if st.Info != "1 allowed · 1 refused" {
		t.Errorf("info %q", st.Info)
	}
	// The rates: eth0 grows 1 MB rx and 2 MB tx per sample.
	if !strings.HasSuffix(st.RateCells[0], "MB") || !strings.HasSuffix(st.RateCells[1], "MB") {
		t.Errorf("eth0 rates %q", st.RateCells)
	}
	b.Resize(400, 900)
	if st = probe(); st.ScrollW > 410 {
		t.Errorf("narrow layout overflows: scrollWidth %d", st.ScrollW)
	}
}
