package web

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestNetLogRing(t *testing.T) {
	l := NewNetLog(4)
	for i := 0; i < 6; i++ {
		v := "allowed"
		if i%2 == 1 {
			v = "refused"
		}
		d := l.Add(NetDecision{Proto: "tcp", Verdict: v, Dest: "10.0.2.2:" + string(rune('0'+i))})
		if d.Seq != uint64(i+1) || d.TimeNs == 0 {
			t.Fatalf("add %d: %+v", i, d)
		}
	}
	ds, lost := l.Since(0)
	if lost != 2 || len(ds) != 4 || ds[0].Seq != 3 || ds[3].Seq != 6 {
		t.Errorf("since 0: lost %d, %+v", lost, ds)
	}
	if ds, lost := l.Since(5); lost != 0 || len(ds) != 1 || ds[0].Seq != 6 {
		t.Errorf("since 5: lost %d, %+v", lost, ds)
	}
	if ds, _ := l.Since(6); ds != nil {
		t.Errorf("since head: %+v", ds)
	}
	s := l.Summary(2)
	if s.Allowed != 3 || s.Refused != 3 || len(s.Decisions) != 2 || s.Decisions[1].Seq != 6 {
		t.Errorf("summary %+v", s)
	}
	var nilLog *NetLog
	if nilLog.Head() != 0 || len(nilLog.Summary(0).Decisions) != 0 {
		t.Errorf("nil log")
	}
}

// TestNetJSON: AppendNetJSON is valid JSON with every field, escaped,
// and "type":"net"; the trace writes it as one line.
func TestNetJSON(t *testing.T) {
	d := NetDecision{Seq: 7, TimeNs: 42, Proto: "tcp", Verdict: "refused", Guest: "10.0.2.15:40000",
		Dest: "10.0.2.2:8000", Real: "127.0.0.1:8000", Rule: "guarded 127.0.0.0/8", Why: "a \"quoted\"\nwhy"}
	var got map[string]any
	if err := json.Unmarshal(AppendNetJSON(nil, &d), &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "net" || got["why"] != d.Why || got["rule"] != d.Rule || got["inbound"] != false || got["seq"] != 7.0 {
		t.Errorf("%v", got)
	}
	var back NetDecision
	json.Unmarshal(AppendNetJSON(nil, &d), &back)
	if back != d {
		t.Errorf("round trip %+v", back)
	}
	var buf bytes.Buffer
	tw := NewTraceWriter(&buf)
	tw.WriteNet(&d)
	tw.Close()
	if strings.Count(buf.String(), "\n") != 1 || !strings.HasPrefix(buf.String(), `{"type":"net"`) {
		t.Errorf("trace %q", buf.String())
	}
}

// TestNetAPIAndSSE: /api/net has the counts and decisions; the SSE
// stream sends decisions as "net" events, live and replayed with a
// backlog.
func TestNetAPIAndSSE(t *testing.T) {
	l := NewNetLog(0)
	_, ts := newTestServer(t, Options{NetLog: l, PollInterval: 5 * time.Millisecond})
	l.Add(NetDecision{Proto: "tcp", Verdict: "refused", Dest: "10.0.2.2:1", Rule: "guarded 127.0.0.0/8"})
	var s NetSummary
	getJSON(t, ts.URL+"/api/net", &s)
	if s.Refused != 1 || len(s.Decisions) != 1 || s.Decisions[0].Rule != "guarded 127.0.0.0/8" {
		t.Errorf("/api/net %+v", s)
	}
	// Live: only what comes after.
	resp := openSSE(t, ts.URL+"/api/events", "")
	time.Sleep(50 * time.Millisecond)
	l.Add(NetDecision{Proto: "tcp", Verdict: "allowed", Dest: "10.0.2.2:2", Rule: "allow 127.0.0.1/32:2"})
	msgs := readSSE(t, resp.Body, 1, 5*time.Second)
	resp.Body.Close()
	if len(msgs) != 1 || msgs[0].event != "net" || !strings.Contains(msgs[0].data, `"seq":2`) || !strings.Contains(msgs[0].data, `"verdict":"allowed"`) {
		t.Errorf("live %+v", msgs)
	}
	// Backlog: the kept decisions replayed.
	resp = openSSE(t, ts.URL+"/api/events?backlog=10", "")
	msgs = readSSE(t, resp.Body, 2, 5*time.Second)
	resp.Body.Close()
	if len(msgs) != 2 || msgs[0].event != "net" || !strings.Contains(msgs[0].data, `"seq":1`) || !strings.Contains(msgs[1].data, `"seq":2`) {
		t.Errorf("backlog %+v", msgs)
	}
	if r, _ := ts.Client().Get(ts.URL + "/api/net?limit=x"); r == nil || r.StatusCode != 400 {
		t.Errorf("bad limit: %v", r)
	}
}
