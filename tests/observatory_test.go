//go:build lkl

package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// observed is a kbox run with the observatory on.
type observed struct {
	cmd    *exec.Cmd
	base   string // http://host:port
	stdout *strings.Builder
	stderr *strings.Builder
	done   chan error
}

var observatoryLine = regexp.MustCompile(`kbox: observatory at (http://[^/\s]+)/`)

// startObserved starts kbox with args (which include --web=0) and waits
// for the observatory address it prints.
func startObserved(t *testing.T, args ...string) *observed {
	t.Helper()
	return startObservedWith(t, nil, args...)
}

// startObservedWith is startObserved with the guest's output going to
// stdout (nil: o.stdout).
func startObservedWith(t *testing.T, stdout io.Writer, args ...string) *observed {
	t.Helper()
	o := &observed{cmd: exec.Command(kboxBin(t), args...), stdout: &strings.Builder{}, stderr: &strings.Builder{}, done: make(chan error, 1)}
	o.cmd.Stdout = o.stdout
	if stdout != nil {
		o.cmd.Stdout = stdout
	}
	pr, pw := io.Pipe()
	o.cmd.Stderr = pw
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			o.stderr.WriteString(line + "\n")
			if m := observatoryLine.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
	}()
	go func() {
		err := o.cmd.Wait()
		pw.Close()
		o.done <- err
	}()
	t.Cleanup(func() {
		o.cmd.Process.Kill()
		<-o.done
	})
	select {
	case o.base = <-addr:
	case err := <-o.done:
		o.done <- err
		t.Fatalf("kbox exited before the observatory listened: %v\n%s", err, o.stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("no observatory address printed:\n%s", o.stderr)
	}
	return o
}

// wait waits for kbox to exit and returns its status.
func (o *observed) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case err := <-o.done:
		o.done <- err
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("kbox still running after %v", d)
	}
	return -1
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("GET %s: content type %q", url, ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// snapshot mirrors the documented /api/snapshot schema (docs/observatory.md).
type snapshot struct {
	TimeNs          int64              `json:"time_ns"`
	UptimeNs        int64              `json:"uptime_ns"`
	SyscallsTotal   uint64             `json:"syscalls_total"`
	SyscallRatePerS float64            `json:"syscall_rate_per_s"`
	Families        map[string]uint64  `json:"families"`
	FamilyRatePerS  map[string]float64 `json:"family_rate_per_s"`
	Dispositions    map[string]uint64  `json:"dispositions"`
	LatencyHistNs   []struct {
		LeNs  int64  `json:"le_ns"`
		Count uint64 `json:"count"`
	} `json:"latency_hist_ns"`
	FDTable struct {
		Used     int `json:"used"`
		Capacity int `json:"capacity"`
	} `json:"fd_table"`
	Kernel struct {
		Available           bool               `json:"available"`
		ContextSwitches     uint64             `json:"context_switches"`
		ContextSwitchesPerS float64            `json:"context_switches_per_s"`
		Softirqs            map[string]uint64  `json:"softirqs"`
		SoftirqRatePerS     map[string]float64 `json:"softirq_rate_per_s"`
		MemKB               map[string]uint64  `json:"mem_kb"`
		LoadAvg             []float64          `json:"loadavg"`
		OpenFiles           uint64             `json:"open_files"`
	} `json:"kernel"`
	Guest struct {
		Available  bool   `json:"available"`
		Processes  int    `json:"processes"`
		PageFaults uint64 `json:"page_faults"`
	} `json:"guest"`
	Events struct {
		Recorded uint64 `json:"recorded"`
		RingSize int    `json:"ring_size"`
		HeadSeq  uint64 `json:"head_seq"`
	} `json:"events"`
	Paused bool `json:"paused"`
}

func softirqSum(s *snapshot) (n uint64) {
	for _, v := range s.Kernel.Softirqs {
		n += v
	}
	return n
}

type sseEvent struct {
	ID   uint64
	Kind string
	Data map[string]any
}

// readSSE reads up to n syscall events from /api/events with the given
// Last-Event-ID ("" for none) and query.
func readSSE(t *testing.T, base, lastID, query string, n int) []sseEvent {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/events"+query, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events content type %q", ct)
	}
	var out []sseEvent
	cur := sseEvent{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && len(out) < n {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Kind == "syscall" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.ID, _ = strconv.ParseUint(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			cur.Kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &cur.Data); err != nil {
				t.Fatalf("event data %q: %v", line, err)
			}
		}
	}
	return out
}

// TestObservatoryAPI runs a real guest workload (tests/guest/observe.c:
// directory fds held open, three ENOSYS calls, a stat loop touching fresh
// pages) and checks every endpoint against it: schema, counters that move,
// ENOSYS names, SSE resume, pause/resume, and that Ctrl-C ends the run.
func TestObservatoryAPI(t *testing.T) {
	img := imagePath(t)
	// The seccomp tier: its exit status 130 after Ctrl-C is checked below
	// (an in-process tier dies of the SIGINT with its guest instead).
	o := startObserved(t, "image", "-S", img, "--read-only", "--web=0", "--syscall-mode=seccomp", "--", "/opt/tests/observe", "4", "3", "60000")

	var s1, s2 snapshot
	getJSON(t, o.base+"/api/snapshot", &s1)
	for _, f := range []string{"file", "io", "meta", "proc", "signal", "mem", "net", "time", "other"} {
		if _, ok := s1.Families[f]; !ok {
			t.Errorf("families lacks %q: %v", f, s1.Families)
		}
	}
	for _, d := range []string{"lkl", "host", "emulated", "denied", "enosys"} {
		if _, ok := s1.Dispositions[d]; !ok {
			t.Errorf("dispositions lacks %q", d)
		}
	}
	for _, k := range []string{"total_kb", "free_kb", "slab_kb", "used_kb"} {
		if s1.Kernel.MemKB[k] == 0 {
			t.Errorf("kernel mem_kb.%s is 0: %v", k, s1.Kernel.MemKB)
		}
	}
	if !s1.Kernel.Available || len(s1.Kernel.Softirqs) != 10 || len(s1.Kernel.LoadAvg) != 3 || len(s1.LatencyHistNs) == 0 {
		t.Errorf("kernel section incomplete: %+v", s1.Kernel)
	}
	if s1.FDTable.Capacity <= 0 || s1.Events.RingSize <= 0 {
		t.Errorf("fd_table/events: %+v %+v", s1.FDTable, s1.Events)
	}

	// Counters move while the guest runs; load average needs LKL's
	// 5-second load tick, so allow for two of them.
	deadline := time.Now().Add(20 * time.Second)
	moved := func() bool {
		return s2.SyscallsTotal > s1.SyscallsTotal+1000 && s2.SyscallRatePerS > 0 &&
			s2.Families["meta"] > s1.Families["meta"] && s2.Dispositions["lkl"] > s1.Dispositions["lkl"] &&
			s2.Kernel.ContextSwitches > s1.Kernel.ContextSwitches && softirqSum(&s2) > softirqSum(&s1) &&
			s2.Guest.Available && s2.Guest.PageFaults > s1.Guest.PageFaults &&
			s2.FDTable.Used >= 4 && s2.Kernel.LoadAvg[0] > 0
	}
	for {
		time.Sleep(500 * time.Millisecond)
		getJSON(t, o.base+"/api/snapshot", &s2)
		if moved() || time.Now().After(deadline) {
			break
		}
	}
	if !moved() {
		t.Fatalf("counters did not move:\nbefore %+v\nafter  %+v", s1, s2)
	}
	t.Logf("after %.1fs: %d syscalls (%.0f/s), ctxsw %d→%d, softirqs %d→%d, guest faults %d→%d, fds %d/%d, load %v",
		float64(s2.UptimeNs)/1e9, s2.SyscallsTotal, s2.SyscallRatePerS, s1.Kernel.ContextSwitches, s2.Kernel.ContextSwitches,
		softirqSum(&s1), softirqSum(&s2), s1.Guest.PageFaults, s2.Guest.PageFaults, s2.FDTable.Used, s2.FDTable.Capacity, s2.Kernel.LoadAvg)

	// ENOSYS by name.
	var nosys []struct {
		Nr    int    `json:"nr"`
		Name  string `json:"name"`
		Count uint64 `json:"count"`
	}
	getJSON(t, o.base+"/api/enosys", &nosys)
	if len(nosys) != 1 || nosys[0].Name != "landlock_create_ruleset" || nosys[0].Count != 3 {
		t.Errorf("enosys = %+v, want landlock_create_ruleset x3", nosys)
	}

	// History backfill.
	var hist []snapshot
	getJSON(t, o.base+"/api/history", &hist)
	if len(hist) < 2 || hist[len(hist)-1].TimeNs <= hist[0].TimeNs || hist[0].LatencyHistNs != nil {
		t.Errorf("history: %d entries", len(hist))
	}

	// SSE: events of the workload, then resume after the 10th with
	// Last-Event-ID: the stream continues at the 11th.
	evs := readSSE(t, o.base, "", "?backlog=64", 20)
	if len(evs) != 20 {
		t.Fatalf("got %d events", len(evs))
	}
	sawStat := false
	for i, e := range evs {
		if i > 0 && e.ID != evs[i-1].ID+1 {
			t.Errorf("ids not consecutive: %d after %d", e.ID, evs[i-1].ID)
		}
		if e.Data["name"] == "stat" {
			sawStat = true
			if e.Data["disposition"] != "lkl" || e.Data["path"] != "/etc/hostname" || e.Data["latency_ns"].(float64) <= 0 || e.Data["nr"].(float64) != float64(syscall.SYS_STAT) {
				t.Errorf("stat event: %v", e.Data)
			}
		}
	}
	if !sawStat {
		t.Errorf("no stat event among %v", evs)
	}
	resumed := readSSE(t, o.base, strconv.FormatUint(evs[9].ID, 10), "", 3)
	if len(resumed) == 0 || resumed[0].ID != evs[10].ID || resumed[0].Data["seq"].(float64) != float64(evs[10].ID) {
		t.Errorf("resume after %d: got %+v, want id %d", evs[9].ID, resumed, evs[10].ID)
	}

	// Pause stops the history; resume restarts it.
	control := func(action string) {
		resp, err := http.Post(o.base+"/api/control", "application/json", strings.NewReader(`{"action":"`+action+`"}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("control %s: %v %v", action, err, resp)
		}
		resp.Body.Close()
	}
	control("pause")
	var paused snapshot
	getJSON(t, o.base+"/api/snapshot", &paused)
	var h1, h2 []snapshot
	getJSON(t, o.base+"/api/history", &h1)
	time.Sleep(2500 * time.Millisecond)
	getJSON(t, o.base+"/api/history", &h2)
	if !paused.Paused || len(h2) != len(h1) || h2[len(h2)-1].TimeNs != h1[len(h1)-1].TimeNs {
		t.Errorf("paused: %v, history %d -> %d", paused.Paused, len(h1), len(h2))
	}
	control("resume")
	time.Sleep(2500 * time.Millisecond)
	getJSON(t, o.base+"/api/history", &h2)
	if h2[len(h2)-1].TimeNs <= h1[len(h1)-1].TimeNs {
		t.Errorf("history did not grow after resume")
	}
	if resp, _ := http.Post(o.base+"/api/control", "application/json", strings.NewReader(`{"action":"explode"}`)); resp == nil || resp.StatusCode != 400 {
		t.Errorf("bad control action accepted: %v", resp)
	}

	var stats map[string]any
	getJSON(t, o.base+"/stats", &stats)
	if stats["syscalls_total"].(float64) < float64(s2.SyscallsTotal) {
		t.Errorf("/stats: %v", stats)
	}

	// Ctrl-C reaches the guest, not kbox: the guest dies of SIGINT and
	// kbox reports 128+2 after shutting the observatory down.
	o.cmd.Process.Signal(syscall.SIGINT)
	if st := o.wait(t, 10*time.Second); st != 130 {
		t.Errorf("status after SIGINT = %d, want 130\n%s", st, o.stderr)
	}
	if _, err := http.Get(o.base + "/stats"); err == nil {
		t.Errorf("observatory still listening after kbox exited")
	}
}

// TestObservatoryTokenAndBind: with --web-token every endpoint needs the
// token, and a non-loopback bind address is warned about.
func TestObservatoryTokenAndBind(t *testing.T) {
	img := imagePath(t)
	o := startObserved(t, "image", "-S", img, "--read-only", "--web=0", "--web-bind", "0.0.0.0", "--web-token", "s3cret", "--", "/bin/sleep", "3")
	if !strings.Contains(o.stderr.String(), "warning: the observatory listens on 0.0.0.0, not loopback") {
		t.Errorf("no non-loopback warning:\n%s", o.stderr)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(o.base, "http://"))
	base := "http://127.0.0.1:" + port
	for _, c := range []struct {
		auth string
		code int
	}{{"", 401}, {"Bearer wrong", 401}, {"Bearer s3cret", 200}} {
		req, _ := http.NewRequest("GET", base+"/api/snapshot", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("auth %q: %d, want %d", c.auth, resp.StatusCode, c.code)
		}
	}
	if st := o.wait(t, 15*time.Second); st != 0 {
		t.Errorf("status %d", st)
	}
}

// TestObservatoryOff: without --web, kbox opens no TCP socket at all.
func TestObservatoryOff(t *testing.T) {
	img := imagePath(t)
	cmd := exec.Command(kboxBin(t), "image", "-S", img, "--read-only", "--", "/bin/sleep", "2")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	time.Sleep(1200 * time.Millisecond)
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid))
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", cmd.Process.Pid, fd.Name()))
		if strings.HasPrefix(l, "socket:[") {
			inodes[strings.Trim(l[7:], "[]")] = true
		}
	}
	for _, f := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", cmd.Process.Pid, f))
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if fs := strings.Fields(line); len(fs) > 9 && inodes[fs[9]] {
				t.Errorf("kbox without --web has a TCP socket: %s", line)
			}
		}
	}
	if len(fds) == 0 {
		t.Fatal("could not list kbox's fds")
	}
}

// TestSlowSSEClient: a client that opens the event stream and then reads
// nothing for 10 s must not slow the guest, which makes 100k dispatched
// syscalls meanwhile. They all fail (ENOENT), so the recorder keeps every
// one: about 20 MB of stream, far beyond the socket buffers, so the stuck
// stream's writer really blocks.
func TestSlowSSEClient(t *testing.T) {
	img := imagePath(t)
	run := func(stuck bool) float64 {
		tail := "1"
		if stuck {
			tail = "9" // the client stays stuck for over 10 s in all
		}
		o := startObserved(t, "image", "-S", img, "--read-only", "--web=0", "--",
			"/bin/sh", "-c", "sleep 1; /opt/tests/bench stat_missing 100000 /no/such/file; sleep "+tail)
		if stuck {
			c, err := net.Dial("tcp", strings.TrimPrefix(o.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(4096)
			fmt.Fprintf(c, "GET /api/events?backlog=100000 HTTP/1.1\r\nHost: kbox\r\n\r\n")
			// From here on it reads nothing until kbox has exited.
			deadline := time.Now().Add(30 * time.Second)
			var st map[string]any
			for {
				time.Sleep(500 * time.Millisecond)
				getJSON(t, o.base+"/stats", &st)
				if st["events_recorded"].(float64) >= 100000 || time.Now().After(deadline) {
					break
				}
			}
			if st["sse_subscribers"].(float64) != 1 || st["events_recorded"].(float64) < 100000 {
				t.Errorf("stuck client not connected, or events not all kept: %v", st)
			}
		}
		if status := o.wait(t, 60*time.Second); status != 0 {
			t.Fatalf("status %d\n%s", status, o.stderr)
		}
		f := strings.Fields(strings.TrimSpace(o.stdout.String()))
		if len(f) != 2 {
			t.Fatalf("bench output %q", o.stdout)
		}
		ns, _ := strconv.ParseFloat(f[1], 64)
		return ns
	}
	base1 := run(false)
	stuck := run(true)
	base2 := run(false)
	base := (base1 + base2) / 2
	t.Logf("stat of a missing file, ns/op: no client %.0f, %.0f; stuck client %.0f (ratio %.2f)", base1, base2, stuck, stuck/base)
	if stuck > 1.5*base {
		t.Errorf("a stuck SSE client slowed the guest: %.0f ns/op vs %.0f", stuck, base)
	}
}

// TestJSONTrace: --trace-file writes one parseable object per dispatched
// syscall of a known workload; --stats counts the same number.
func TestJSONTrace(t *testing.T) {
	img := imagePath(t)
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	_, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--stats", "--trace-file", trace, "--",
		"/bin/sh", "-c", "cat /etc/hostname > /dev/null; /opt/tests/observe 1 2 0")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	m := regexp.MustCompile(`kbox stats: wall \S+, (\d+) syscalls`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no --stats summary:\n%s", stderr)
	}
	total, _ := strconv.Atoi(m[1])
	for _, want := range []string{"TOP SYSCALLS", "dispositions: lkl", "landlock_create_ruleset"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("--stats lacks %q:\n%s", want, stderr)
		}
	}
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type ev struct {
		Seq       uint64 `json:"seq"`
		TimeNs    int64  `json:"time_ns"`
		Pid       int    `json:"pid"`
		Nr        int    `json:"nr"`
		Name      string `json:"name"`
		Disp      string `json:"disposition"`
		Ret       int64  `json:"ret"`
		Errno     int    `json:"errno"`
		LatencyNs int64  `json:"latency_ns"`
		Path      string `json:"path"`
	}
	var evs []ev
	sc := bufio.NewScanner(f)
	tierLines := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"type":"tier",`) {
			// The tier line (docs/observatory.md), first.
			if tierLines++; len(evs) != 0 || sc.Text() != `{"type":"tier","mode":"seccomp","why":"auto: not --trusted, so the tier that confines it"}` {
				t.Fatalf("tier line %q after %d events", sc.Text(), len(evs))
			}
			continue
		}
		var e ev
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %d %q: %v", len(evs)+1, sc.Text(), err)
		}
		evs = append(evs, e)
	}
	if tierLines != 1 {
		t.Errorf("%d tier lines, want 1", tierLines)
	}
	if len(evs) != total {
		t.Fatalf("trace has %d lines, --stats counted %d dispatched syscalls", len(evs), total)
	}
	has := func(pred func(e ev) bool) bool {
		for _, e := range evs {
			if pred(e) {
				return true
			}
		}
		return false
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) || e.TimeNs <= 0 || e.Pid <= 0 || e.Name == "" || e.LatencyNs <= 0 {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	checks := map[string]func(e ev) bool{
		"execve of observe": func(e ev) bool { return e.Name == "execve" && e.Path == "/opt/tests/observe" },
		"open of /etc/hostname": func(e ev) bool {
			return strings.HasPrefix(e.Name, "open") && e.Path == "/etc/hostname" && e.Disp == "lkl" && e.Ret >= 0
		},
		"landlock_create_ruleset ENOSYS twice": func(e ev) bool {
			return e.Name == "landlock_create_ruleset" && e.Disp == "enosys" && e.Errno == 38 && e.Ret == -38
		},
		"stat served by LKL":         func(e ev) bool { return e.Name == "stat" && e.Disp == "lkl" && e.Ret == 0 },
		"open of /etc as directory":  func(e ev) bool { return e.Name == "open" && e.Path == "/etc" && e.Ret >= 1024 },
		"exit_group of the workload": func(e ev) bool { return e.Name == "exit_group" },
	}
	for name, pred := range checks {
		if !has(pred) {
			t.Errorf("trace lacks %s", name)
		}
	}
}

// tierSnap is the snapshot's "tier" (docs/observatory.md).
type tierSnap struct {
	Tier struct {
		Mode  string `json:"mode"`
		Why   string `json:"why"`
		Sites *struct {
			Trapped       int            `json:"trapped"`
			Patched       int            `json:"patched"`
			Inline        int            `json:"inline"`
			StillTrapping int            `json:"still_trapping"`
			Refused       map[string]int `json:"refused"`
			WXRefused     int            `json:"wx_refused"`
		} `json:"sites"`
	} `json:"tier"`
}

// The snapshot names the tier and why, and in the rewrite tier its sites,
// live: rwsites patches a site, then sleeps while the snapshot is read.
// auto gives rwsites the seccomp tier (it can exec), which has no sites.
// kbox before the "tier" section had none: both cases fail there.
func TestObservatoryTier(t *testing.T) {
	img := imagePath(t)
	o := startObserved(t, "image", "-S", img, "--read-only", "--web=0", "--syscall-mode=rewrite", "--", "/opt/tests/rwsites", "wait", "100", "4")
	var snap tierSnap
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		snap = tierSnap{}
		getJSON(t, o.base+"/api/snapshot", &snap)
		if s := snap.Tier.Sites; s != nil && s.Patched > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no patched site in the snapshot: %+v\n%s", snap.Tier, o.stderr)
		}
	}
	s := snap.Tier.Sites
	if snap.Tier.Mode != "rewrite" || snap.Tier.Why != "asked for; not confined" ||
		s.Trapped < s.Patched || s.StillTrapping != s.Trapped-s.Patched || s.Refused == nil || s.WXRefused != 0 {
		t.Errorf("tier %+v, sites %+v", snap.Tier, *s)
	}
	if st := o.wait(t, 30*time.Second); st != 0 || o.stdout.String() != "wait: 100 calls, site patched\n" {
		t.Errorf("status %d, stdout %q\n%s", st, o.stdout, o.stderr)
	}

	o = startObserved(t, "image", "-S", img, "--read-only", "--web=0", "--trusted", "--", "/opt/tests/rwsites", "wait", "100", "3")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		snap = tierSnap{}
		getJSON(t, o.base+"/api/snapshot", &snap)
		if snap.Tier.Mode != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tier in the snapshot\n%s", o.stderr)
		}
	}
	if snap.Tier.Mode != "seccomp" || snap.Tier.Why != "auto: defines execve" || snap.Tier.Sites != nil {
		t.Errorf("seccomp: tier %+v", snap.Tier)
	}
	if st := o.wait(t, 30*time.Second); st != 0 || o.stdout.String() != "wait: 100 calls, site original\n" {
		t.Errorf("seccomp: status %d, stdout %q\n%s", st, o.stdout, o.stderr)
	}
}
