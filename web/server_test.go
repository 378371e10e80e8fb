package web

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func newTestServer(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	if opts.Recorder == nil {
		opts.Recorder = NewRecorder(RecorderConfig{Family: testFamily, SampleEvery: 1})
	}
	if opts.Sampler == nil {
		fp := &fakeProc{files: map[string]string{
			"/proc/stat": sampleStatLKL, "/proc/meminfo": sampleMeminfo,
			"/proc/vmstat": sampleVmstat, "/proc/loadavg": "0.1 0.2 0.3 1/5 9\n",
		}}
		opts.Sampler = NewSampler(SamplerConfig{ReadFile: fp.read, Recorder: opts.Recorder, FDTable: func() (int, int) { return 5, 256 }})
	}
	s := NewServer(opts)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Close(); ts.Close() })
	return s, ts
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotSchema(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	s.opts.Recorder.Record(&Event{Nr: 0, Name: "read", LatencyNs: 100})
	s.sampler.SampleNow()
	var m map[string]any
	getJSON(t, ts.URL+"/api/snapshot", &m)
	for _, k := range []string{"time_ns", "uptime_ns", "syscalls_total", "syscall_rate_per_s", "families", "family_rate_per_s",
		"dispositions", "latency_hist_ns", "fd_table", "kernel", "paused", "events"} {
		if _, ok := m[k]; !ok {
			t.Errorf("snapshot missing %q", k)
		}
	}
	disp := m["dispositions"].(map[string]any)
	for _, k := range []string{"lkl", "host", "emulated", "denied", "enosys"} {
		if _, ok := disp[k]; !ok {
			t.Errorf("dispositions missing %q", k)
		}
	}
	fams := m["families"].(map[string]any)
	for _, f := range StandardFamilies {
		if _, ok := fams[f]; !ok {
			t.Errorf("families missing %q", f)
		}
	}
	k := m["kernel"].(map[string]any)
	for _, key := range []string{"context_switches", "context_switches_per_s", "processes_forked", "softirqs", "softirq_rate_per_s",
		"mem_kb", "page_faults", "major_page_faults", "loadavg", "open_files"} {
		if _, ok := k[key]; !ok {
			t.Errorf("kernel missing %q", key)
		}
	}
	mem := k["mem_kb"].(map[string]any)
	for _, key := range []string{"total_kb", "free_kb", "buffers_kb", "cached_kb", "slab_kb", "used_kb"} {
		if _, ok := mem[key]; !ok {
			t.Errorf("mem_kb missing %q", key)
		}
	}
	sirq := k["softirqs"].(map[string]any)
	for _, n := range SoftirqNames {
		if _, ok := sirq[n]; !ok {
			t.Errorf("softirqs missing %q", n)
		}
	}
	if la := k["loadavg"].([]any); len(la) != 3 || la[2].(float64) != 0.3 {
		t.Errorf("loadavg %v", la)
	}
	fd := m["fd_table"].(map[string]any)
	if fd["used"].(float64) != 5 || fd["capacity"].(float64) != 256 {
		t.Errorf("fd_table %v", fd)
	}
	h := m["latency_hist_ns"].([]any)
	if len(h) != HistBuckets || h[0].(map[string]any)["le_ns"] == nil {
		t.Errorf("hist %v", h[0])
	}
	if m["syscalls_total"].(float64) != 1 {
		t.Errorf("syscalls_total %v", m["syscalls_total"])
	}
}

func TestHistoryAndControl(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	for i := 0; i < 4; i++ {
		s.sampler.SampleNow()
	}
	var h []map[string]any
	getJSON(t, ts.URL+"/api/history?limit=2", &h)
	if len(h) != 2 {
		t.Fatalf("history %d", len(h))
	}
	if _, ok := h[0]["latency_hist_ns"]; ok {
		t.Error("history should omit latency_hist_ns")
	}
	getJSON(t, ts.URL+"/api/history", &h)
	if len(h) != 4 {
		t.Fatalf("history %d", len(h))
	}
	resp, _ := http.Get(ts.URL + "/api/history?limit=x")
	if resp.StatusCode != 400 {
		t.Fatalf("bad limit: %s", resp.Status)
	}
	resp.Body.Close()

	post := func(body string) (int, map[string]any) {
		resp, err := http.Post(ts.URL+"/api/control", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	var snap Snapshot
	if code, m := post(`{"action":"pause"}`); code != 200 || m["paused"] != true {
		t.Fatalf("pause: %d %v", code, m)
	}
	getJSON(t, ts.URL+"/api/snapshot", &snap)
	if !snap.Paused {
		t.Fatal("snapshot not paused")
	}
	if code, _ := post(`{"action":"resume"}`); code != 200 {
		t.Fatal("resume")
	}
	getJSON(t, ts.URL+"/api/snapshot", &snap)
	if snap.Paused {
		t.Fatal("snapshot still paused")
	}
	if code, _ := post(`{"action":"explode"}`); code != 400 {
		t.Fatal("bad action accepted")
	}
	if code, _ := post(`not json`); code != 400 {
		t.Fatal("bad json accepted")
	}
	resp, _ = http.Get(ts.URL + "/api/control")
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET control: %s", resp.Status)
	}
	resp.Body.Close()
}

func TestENOSYSAndStats(t *testing.T) {
	s, ts := newTestServer(t, Options{})
	rec := s.opts.Recorder
	for i := 0; i < 3; i++ {
		rec.Record(&Event{Nr: 334, Name: "rseq", Disp: DispENOSYS, Ret: -38, Errno: 38})
	}
	rec.Record(&Event{Nr: 425, Name: "io_uring_setup", Disp: DispENOSYS, Ret: -38, Errno: 38})
	rec.Record(&Event{Nr: 0, Name: "read"})
	var list []SyscallCount
	getJSON(t, ts.URL+"/api/enosys", &list)
	if len(list) != 2 || list[0].Name != "rseq" || list[0].Count != 3 || list[0].Nr != 334 || list[1].Name != "io_uring_setup" {
		t.Fatalf("enosys %+v", list)
	}
	var raw []map[string]any
	getJSON(t, ts.URL+"/api/enosys", &raw)
	for _, k := range []string{"nr", "name", "count"} {
		if _, ok := raw[0][k]; !ok {
			t.Fatalf("enosys missing %q", k)
		}
	}
	var st map[string]any
	getJSON(t, ts.URL+"/stats", &st)
	for _, k := range []string{"uptime_ns", "syscalls_total", "events_dropped", "sse_subscribers", "events_recorded"} {
		if _, ok := st[k]; !ok {
			t.Fatalf("stats missing %q", k)
		}
	}
	if st["syscalls_total"].(float64) != 5 {
		t.Fatalf("stats %v", st)
	}
}

func TestDashboardServed(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	for path, want := range map[string]string{"/": "<canvas", "/app.js": "EventSource", "/style.css": "grid-template-columns"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %s, %d bytes", path, resp.Status, len(b))
		}
	}
}

func TestTokenAuth(t *testing.T) {
	_, ts := newTestServer(t, Options{Token: "s3cret"})
	do := func(path, auth string) int {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/", "/api/snapshot", "/api/history", "/api/enosys", "/stats", "/api/events"} {
		if c := do(p, ""); c != 401 {
			t.Errorf("%s without token: %d", p, c)
		}
		if c := do(p, "Bearer wrong"); c != 401 {
			t.Errorf("%s wrong token: %d", p, c)
		}
	}
	for _, p := range []string{"/", "/api/snapshot", "/stats"} {
		if c := do(p, "Bearer s3cret"); c != 200 {
			t.Errorf("%s with token: %d", p, c)
		}
		if c := do(p+"?token=s3cret", ""); c != 200 {
			t.Errorf("%s with query token: %d", p, c)
		}
	}
	resp, err := http.Post(ts.URL+"/api/control", "application/json", strings.NewReader(`{"action":"pause"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("control without token: %d", resp.StatusCode)
	}
}

type sseMsg struct {
	id, event, data string
}

// readSSE reads messages until n are collected or the deadline passes.
func readSSE(t *testing.T, body io.Reader, n int, deadline time.Duration) []sseMsg {
	t.Helper()
	ch := make(chan sseMsg, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		var m sseMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.event != "" || m.data != "" {
					ch <- m
				}
				m = sseMsg{}
			case strings.HasPrefix(line, "id: "):
				m.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				m.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				m.data = line[6:]
			}
		}
	}()
	var out []sseMsg
	timer := time.After(deadline)
	for len(out) < n {
		select {
		case m, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, m)
		case <-timer:
			return out
		}
	}
	return out
}

func openSSE(t *testing.T, url, lastID string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	return resp
}

func TestSSELiveAndResume(t *testing.T) {
	s, ts := newTestServer(t, Options{PollInterval: 5 * time.Millisecond})
	rec := s.opts.Recorder
	for i := 1; i <= 10; i++ {
		rec.Record(&Event{Nr: 257, Name: "openat", Pid: int32(i), Path: "/f" + strconv.Itoa(i), Disp: DispLKL})
	}
	// Resume after id 6: exactly events 7..10 replayed.
	resp := openSSE(t, ts.URL+"/api/events", "6")
	msgs := readSSE(t, resp.Body, 4, 5*time.Second)
	resp.Body.Close()
	if len(msgs) != 4 {
		t.Fatalf("got %d msgs", len(msgs))
	}
	for i, m := range msgs {
		if m.event != "syscall" || m.id != strconv.Itoa(7+i) {
			t.Fatalf("msg %d: %+v", i, m)
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(m.data), &e); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"seq", "time_ns", "pid", "nr", "name", "disposition", "ret", "errno", "latency_ns", "path"} {
			if _, ok := e[k]; !ok {
				t.Fatalf("event missing %q", k)
			}
		}
		if e["seq"].(float64) != float64(7+i) || e["path"] != "/f"+strconv.Itoa(7+i) || e["disposition"] != "lkl" {
			t.Fatalf("event %v", e)
		}
	}
	// Query-parameter form.
	resp = openSSE(t, ts.URL+"/api/events?last_event_id=9", "")
	msgs = readSSE(t, resp.Body, 1, 5*time.Second)
	resp.Body.Close()
	if len(msgs) != 1 || msgs[0].id != "10" {
		t.Fatalf("query resume %+v", msgs)
	}
	// Live: no id => only new events.
	resp = openSSE(t, ts.URL+"/api/events", "")
	go func() {
		time.Sleep(50 * time.Millisecond)
		rec.Record(&Event{Nr: 59, Name: "execve", Path: "/bin/sh", Disp: DispHost})
	}()
	msgs = readSSE(t, resp.Body, 1, 5*time.Second)
	resp.Body.Close()
	if len(msgs) != 1 || msgs[0].id != "11" || !strings.Contains(msgs[0].data, `"name":"execve"`) {
		t.Fatalf("live %+v", msgs)
	}
	// Backlog.
	resp = openSSE(t, ts.URL+"/api/events?backlog=3", "")
	msgs = readSSE(t, resp.Body, 3, 5*time.Second)
	resp.Body.Close()
	if len(msgs) != 3 || msgs[0].id != "9" {
		t.Fatalf("backlog %+v", msgs)
	}
}

func TestSSEGap(t *testing.T) {
	rec := NewRecorder(RecorderConfig{Size: 16, SampleEvery: 1})
	_, ts := newTestServer(t, Options{Recorder: rec, PollInterval: 5 * time.Millisecond})
	for i := 0; i < 100; i++ {
		rec.Record(&Event{Nr: 1, Name: "write"})
	}
	resp := openSSE(t, ts.URL+"/api/events", "10")
	msgs := readSSE(t, resp.Body, 17, 5*time.Second)
	resp.Body.Close()
	if len(msgs) != 17 || msgs[0].event != "gap" || msgs[1].id != "85" {
		t.Fatalf("msgs %+v", msgs[:2])
	}
	var raw map[string]uint64
	json.Unmarshal([]byte(msgs[0].data), &raw)
	if raw["lost"] != 74 || raw["resume_seq"] != 85 {
		t.Fatalf("gap %s", msgs[0].data)
	}
}

func TestSlowSubscriberDoesNotBlockRecord(t *testing.T) {
	rec := NewRecorder(RecorderConfig{SampleEvery: 1, Size: 4096})
	s := NewServer(Options{Recorder: rec, PollInterval: 5 * time.Millisecond, WriteTimeout: 2 * time.Second})
	addr, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const N = 1_000_000
	ev := Event{Nr: 1, Name: "write", Path: "/some/reasonably/long/path/name.txt", Ret: -1, Errno: 5}
	run := func() time.Duration {
		done := make(chan time.Duration, 1)
		go func() {
			e := ev
			t0 := time.Now()
			for i := 0; i < N; i++ {
				rec.Record(&e)
			}
			done <- time.Since(t0)
		}()
		select {
		case d := <-done:
			return d
		case <-time.After(60 * time.Second):
			t.Fatal("Record blocked: 1e6 events did not complete within 60s")
			return 0
		}
	}
	base := run()

	// A client that subscribes and never reads.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(conn, "GET /api/events?last_event_id=0 HTTP/1.1\r\nHost: x\r\n\r\n")
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().SSESubscribers != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Stats().SSESubscribers != 1 {
		t.Fatal("subscriber did not register")
	}
	var m0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	slow := run()
	var m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m1)
	t.Logf("1e6 Record: %v without subscriber, %v with a stuck subscriber; heap %d -> %d KiB",
		base, slow, m0.HeapAlloc>>10, m1.HeapAlloc>>10)
	if slow > 3*base+500*time.Millisecond {
		t.Errorf("Record slowed down by stuck subscriber: %v vs %v", slow, base)
	}
	if m1.HeapAlloc > m0.HeapAlloc+32<<20 {
		t.Errorf("heap grew by %d KiB", (m1.HeapAlloc-m0.HeapAlloc)>>10)
	}
	// The stuck client is eventually disconnected by the write timeout,
	// or at the latest by Close.
}

func TestStartCloseNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	rec := NewRecorder(RecorderConfig{SampleEvery: 1})
	sm := NewSampler(SamplerConfig{Recorder: rec, Interval: 10 * time.Millisecond})
	sm.Start()
	s := NewServer(Options{Recorder: rec, Sampler: sm})
	addr, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("addr %q", addr)
	}
	if _, err := s.Start(); err == nil {
		t.Fatal("double start")
	}
	// Two open SSE streams.
	var resps []*http.Response
	for i := 0; i < 2; i++ {
		resps = append(resps, openSSE(t, "http://"+addr+"/api/events", ""))
	}
	rec.Record(&Event{Nr: 1})
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	sm.Stop()
	for _, r := range resps {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines %d -> %d\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": true, "127.0.0.1:8080": true, "[::1]:80": true, "::1": true, "localhost:8080": true,
		"127.1.2.3": true, "0.0.0.0:8080": false, "": false, "[::]:80": false, "192.168.1.5": false, "example.com:80": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
}
