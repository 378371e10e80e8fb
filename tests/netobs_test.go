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
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbox-project/kbox/web/webtest"
	"golang.org/x/net/dns/dnsmessage"
)

// The user-mode stack's decisions (allowed, refused and by what rule,
// published) reach the observatory (/api/net, the SSE "net" events), the
// JSON trace and the audit log (docs/networking.md, docs/observatory.md,
// docs/agents.md).

// netDecision is a decision as /api/net, SSE and the trace give it.
type netDecision struct {
	Type    string `json:"type"`
	Seq     uint64 `json:"seq"`
	TimeNs  int64  `json:"time_ns"`
	Proto   string `json:"proto"`
	Verdict string `json:"verdict"`
	Inbound bool   `json:"inbound"`
	Guest   string `json:"guest"`
	Dest    string `json:"dest"`
	Real    string `json:"real"`
	Rule    string `json:"rule"`
	Why     string `json:"why"`
}

// checkDecisions finds the allowed connection to 10.0.2.2:allowed and
// the refused one to 10.0.2.2:refused among ds, with their rules, real
// destinations and the guest's source.
func checkDecisions(t *testing.T, where string, ds []netDecision, allowed, refused int) {
	t.Helper()
	var okA, okR bool
	for _, d := range ds {
		if d.Proto != "tcp" || d.Inbound || !strings.HasPrefix(d.Guest, "10.0.2.15:") {
			continue
		}
		switch {
		case d.Dest == fmt.Sprintf("10.0.2.2:%d", allowed) && d.Verdict == "allowed" &&
			d.Real == fmt.Sprintf("127.0.0.1:%d", allowed) && d.Rule == fmt.Sprintf("allow 127.0.0.1/32:%d", allowed):
			okA = true
		case d.Dest == fmt.Sprintf("10.0.2.2:%d", refused) && d.Verdict == "refused" &&
			d.Real == fmt.Sprintf("127.0.0.1:%d", refused) && d.Rule == "guarded 127.0.0.0/8":
			okR = true
		}
	}
	if !okA || !okR {
		t.Errorf("%s: allowed connection to :%d found %v, refused one to :%d found %v in %+v", where, allowed, okA, refused, okR, ds)
	}
}

// TestNetDecisionsObserved: a connection allowed by --net-allow and one
// refused (no rule: the host's loopback is guarded) are each a decision
// in /api/net, a "net" event on the SSE stream and a "net" line of the
// JSON trace, with the rule, the real destination and the guest's
// source; the guest sees the refusal as ECONNREFUSED.
func TestNetDecisionsObserved(t *testing.T) {
	body := "decided " + strconv.Itoa(os.Getpid())
	port, _ := httpServer(t, body)
	refused := freePort(t)
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	o := startObserved(t, "image", "-S", imagePath(t), "--read-only", "--net", "--net-allow", fmt.Sprintf("127.0.0.1:%d", port), "--web=0", "--trace-file", trace, "--",
		"/bin/sh", "-c", fmt.Sprintf("sleep 2; wget -qO- http://10.0.2.2:%d/; echo; wget -qO- http://10.0.2.2:%d/ 2>&1; echo wget=$?; sleep 3", port, refused))

	// The live stream, opened before the guest connects.
	resp, err := http.Get(o.base + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sse := make(chan netDecision, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = line[7:]
			case strings.HasPrefix(line, "data: ") && event == "net":
				var d netDecision
				if json.Unmarshal([]byte(line[6:]), &d) == nil {
					sse <- d
				}
			}
		}
		close(sse)
	}()
	var streamed []netDecision
	timeout := time.After(60 * time.Second)
collect:
	for len(streamed) < 2 {
		select {
		case d, ok := <-sse:
			if !ok {
				break collect
			}
			streamed = append(streamed, d)
		case <-timeout:
			break collect
		}
	}
	checkDecisions(t, "SSE", streamed, port, refused)

	var sum struct {
		Allowed   uint64        `json:"allowed"`
		Refused   uint64        `json:"refused"`
		Decisions []netDecision `json:"decisions"`
	}
	getJSON(t, o.base+"/api/net", &sum)
	if sum.Allowed != 1 || sum.Refused != 1 {
		t.Errorf("/api/net: allowed %d refused %d, want 1 and 1", sum.Allowed, sum.Refused)
	}
	checkDecisions(t, "/api/net", sum.Decisions, port, refused)

	if st := o.wait(t, 60*time.Second); st != 0 {
		t.Fatalf("status %d\n%s", st, o.stderr)
	}
	out := o.stdout.String()
	if !strings.Contains(out, body) || !strings.Contains(out, "Connection refused") || !strings.Contains(out, "wget=1") {
		t.Errorf("guest output %q: want the body, then wget's connection refused", out)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var traced []netDecision
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, `{"type":"net"`) {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var d netDecision
		if err := dec.Decode(&d); err != nil {
			t.Errorf("trace line %q: %v", line, err)
		}
		traced = append(traced, d)
	}
	if len(traced) != 2 {
		t.Errorf("trace has %d net lines, want 2", len(traced))
	}
	checkDecisions(t, "trace", traced, port, refused)
}

// TestNetAudit: with --audit and --net, each outgoing decision (allowed,
// refused) and each connection to a published port is a net_connection
// record; `kbox audit verify` passes.
func TestNetAudit(t *testing.T) {
	port, _ := httpServer(t, "audited")
	refused, hp := freePort(t), freePort(t)
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	done := publishedRun(t, netArgs(t, "--audit", log, "--net-allow", fmt.Sprintf("127.0.0.1:%d", port), "-P", fmt.Sprintf("%d:8080", hp), "--",
		"/bin/sh", "-c", fmt.Sprintf("wget -qO- http://10.0.2.2:%d/; echo; wget -qO- http://10.0.2.2:%d/ 2>&1; /opt/tests/inet serve 0.0.0.0 8080 1", port, refused))...)
	// The guest serves once its wgets are done: until then a connection
	// to the published port is reset (a refused inbound record).
	var served bool
	for deadline := time.Now().Add(60 * time.Second); !served && time.Now().Before(deadline); {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", hp), 5*time.Second); err == nil {
			c.SetDeadline(time.Now().Add(30 * time.Second))
			c.Write([]byte("ping"))
			c.(*net.TCPConn).CloseWrite()
			got, _ := io.ReadAll(c)
			c.Close()
			served = strings.HasPrefix(string(got), "ping")
		}
		if !served {
			time.Sleep(300 * time.Millisecond)
		}
	}
	var r [3]string
	select {
	case r = <-done:
	case <-time.After(2 * kboxTimeout):
		t.Fatalf("kbox did not end (served %v)", served)
	}
	if r[2] != "0" || !served {
		t.Fatalf("served %v, status %s\nstdout: %s\nstderr: %s", served, r[2], r[0], r[1])
	}
	if out, errOut, status := runKbox(t, "audit", "verify", log); status != 0 {
		t.Fatalf("audit verify: status %d\n%s%s", status, out, errOut)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, refusedRec, inbound bool
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct {
			Type string            `json:"type"`
			Data map[string]string `json:"data"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Type != "net_connection" {
			continue
		}
		d := rec.Data
		switch {
		case d["direction"] == "out" && d["verdict"] == "allowed" && d["dest"] == fmt.Sprintf("10.0.2.2:%d", port) &&
			d["real"] == fmt.Sprintf("127.0.0.1:%d", port) && d["rule"] == fmt.Sprintf("allow 127.0.0.1/32:%d", port) && strings.HasPrefix(d["guest"], "10.0.2.15:"):
			allowed = true
		case d["direction"] == "out" && d["verdict"] == "refused" && d["dest"] == fmt.Sprintf("10.0.2.2:%d", refused) && d["rule"] == "guarded 127.0.0.0/8":
			refusedRec = true
		case d["direction"] == "in" && d["verdict"] == "allowed" && d["dest"] == "10.0.2.15:8080" && strings.HasPrefix(d["peer"], "127.0.0.1:") && d["rule"] == "published":
			inbound = true
		}
	}
	if !allowed || !refusedRec || !inbound {
		t.Errorf("net_connection records: allowed %v, refused %v, inbound %v\n%s", allowed, refusedRec, inbound, b)
	}
}

// fakeDNS answers A queries for names from a table on 127.0.0.1 (never
// the host's resolver); NXDOMAIN for the rest.
func fakeDNS(t *testing.T, names map[string][4]byte) string {
	t.Helper()
	addr, _ := countedDNS(t, names)
	return addr
}

// countedDNS is fakeDNS that also counts the queries it answered.
func countedDNS(t *testing.T, names map[string][4]byte) (string, *atomic.Int64) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var queries atomic.Int64
	go func() {
		buf := make([]byte, 512)
		for {
			n, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var m dnsmessage.Message
			if m.Unpack(buf[:n]) != nil || len(m.Questions) != 1 {
				continue
			}
			queries.Add(1)
			q := m.Questions[0]
			m.Header.Response, m.Header.Authoritative = true, true
			if ip, ok := names[q.Name.String()]; !ok {
				m.Header.RCode = dnsmessage.RCodeNameError
			} else if q.Type == dnsmessage.TypeA {
				m.Answers = []dnsmessage.Resource{{Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
					Body: &dnsmessage.AResource{A: ip}}}
			}
			out, _ := m.Pack()
			pc.WriteTo(out, a)
		}
	}()
	return pc.LocalAddr().String(), &queries
}

// TestNetAllowHost: --net-allow-host NAME:PORT allows the addresses NAME
// resolves to through the DNS upstream (a fake one: web.kbox.test is
// 127.0.0.1), on that port only; a name that does not resolve stops the
// run before the guest.
func TestNetAllowHost(t *testing.T) {
	body := "by host rule " + strconv.Itoa(os.Getpid())
	port, hits := httpServer(t, body)
	other, _ := httpServer(t, "other port")
	dns := fakeDNS(t, map[string][4]byte{"web.kbox.test.": {127, 0, 0, 1}})
	p, q := strconv.Itoa(port), strconv.Itoa(other)
	script := "wget -qO- http://10.0.2.2:" + p + "/; echo; wget -qO- http://10.0.2.2:" + q + "/ 2>&1; echo other=$?"
	runCases(t, nil, []guestCase{
		{name: "allowed", args: netArgs(t, "--dns", dns, "--net-allow-host", "web.kbox.test:"+p, "--", "/bin/sh", "-c", script),
			want: []string{body, "Connection refused", "other=1"}, not: []string{"other port"}},
		{name: "deny-all", args: netArgs(t, "--dns", dns, "--net-deny-all", "--net-allow-host", "web.kbox.test:"+p, "--", "/bin/sh", "-c", script),
			want: []string{body, "Connection refused", "other=1"}},
		{name: "without", args: netArgs(t, "--dns", dns, "--", "/bin/sh", "-c", script),
			want: []string{"Connection refused", "other=1"}, not: []string{body}},
	})
	if hits.Load() != 2 {
		t.Errorf("the server had %d requests, want 2", hits.Load())
	}
	_, errOut, status := runKbox(t, netArgs(t, "--dns", dns, "--net-allow-host", "nothere.kbox.test", "--", "/bin/echo", "ran")...)
	if status == 0 || !strings.Contains(errOut, "nothere.kbox.test") {
		t.Errorf("unresolvable name: status %d, stderr %s", status, errOut)
	}
}

// TestDashboardNetPanel: the dashboard of a kbox running with --net, in
// headless Chromium: the network panel shows eth0's counters from LKL
// (bytes moved by a real wget), TCP's active opens, and the stack's two
// decisions (allowed with its rule, refused with its rule), with peers.
func TestDashboardNetPanel(t *testing.T) {
	if webtest.FindChromium() == "" {
		t.Skip("SKIP (needs chromium): apt-get install chromium")
	}
	port, _ := httpServer(t, "panel")
	refused := freePort(t)
	o := startObserved(t, "image", "-S", imagePath(t), "--read-only", "--net", "--net-allow", fmt.Sprintf("127.0.0.1:%d", port), "--web=0", "--",
		"/bin/sh", "-c", fmt.Sprintf("sleep 2; wget -qO- http://10.0.2.2:%d/100000 >/dev/null; wget -qO- http://10.0.2.2:%d/; sleep 30", port, refused))
	b := webtest.Open(t, o.base+"/")
	var st webtest.NetPanelState
	ok := func(s webtest.NetPanelState) bool {
		return s.Allowed == "1" && s.Refused == "1" && len(s.Rows) == 2 && len(s.Eth0) == 7 && s.Eth0[1] != "0" && s.Points >= 2
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if st = b.NetPanel(); ok(st) {
			break
		}
	}
	shot := b.Screenshot("kbox-dashboard-net.png")
	t.Logf("state %+v\nscreenshot: %s", st, shot)
	if !ok(st) {
		t.Fatalf("network panel: %+v", st)
	}
	wantRefused := "2|refused|tcp|10.0.2.15:"
	if !strings.HasPrefix(st.Rows[0], wantRefused) || !strings.HasSuffix(st.Rows[0], fmt.Sprintf("|10.0.2.2:%d|127.0.0.1:%d|guarded 127.0.0.0/8", refused, refused)) ||
		!strings.HasPrefix(st.Rows[1], "1|allowed|tcp|10.0.2.15:") || !strings.HasSuffix(st.Rows[1], fmt.Sprintf("|10.0.2.2:%d|127.0.0.1:%d|allow 127.0.0.1/32:%d", port, port, port)) {
		t.Errorf("decision rows %q", st.Rows)
	}
	if a, err := strconv.Atoi(st.Active); err != nil || a < 2 {
		t.Errorf("TCP ActiveOpens %q, want at least the guest's 2 connects", st.Active)
	}
}

// TestNetIPv6: the guest's eth0 has fd00:6b62:6f78::15/64 and a default
// route via fd00:6b62:6f78::2, the gateway that stands for the host's
// ::1: a host server on [::1]:PORT is reached with --net-allow
// [::1]:PORT, with the same output as the same program run natively
// against ::1, and refused (ECONNREFUSED) without the rule, on another
// port, and at the metadata address; the decisions name the rules.
func TestNetIPv6(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("SKIP (the host has no IPv6 loopback, so no host server on ::1): %v", err)
	}
	body := "over IPv6 " + strconv.Itoa(os.Getpid())
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	p := strconv.Itoa(port)
	const gw6 = "fd00:6b62:6f78::2"

	native, err := exec.Command(buildNative(t, "inet6.c"), "::1", p).Output()
	if err != nil {
		t.Fatalf("native inet6: %v\n%s", err, native)
	}
	want := "connected, own address family AF_INET6\nbody: " + body + "\n"
	if string(native) != want {
		t.Fatalf("native run: %q, want %q", native, want)
	}
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	runCases(t, nil, []guestCase{
		{name: "allowed", args: netArgs(t, "--net-allow", "[::1]:"+p, "--trace-file", trace, "--", "/opt/tests/inet6", gw6, p), want: []string{want}},
		{name: "addresses", args: netArgs(t, "--", "/bin/sh", "-c", "grep eth0 /proc/net/if_inet6; grep -c '^00000000000000000000000000000000 00 .* fd006b626f7800000000000000000002 ' /proc/net/ipv6_route"),
			want: []string{"fd006b626f7800000000000000000015 02 40 00 80     eth0", "\n1\n"}},
		{name: "no-allow", args: netArgs(t, "--", "/opt/tests/inet6", gw6, p), status: 1, want: []string{"connect: Connection refused\n"}},
		{name: "other-port", args: netArgs(t, "--net-allow", "[::1]:1", "--", "/opt/tests/inet6", gw6, p), status: 1, want: []string{"connect: Connection refused\n"}},
		{name: "metadata", args: netArgs(t, "--net-allow", "[::1]:"+p, "--", "/opt/tests/inet6", "fd00:ec2::254", "80"), status: 1, want: []string{"connect: Connection refused\n"}},
	})
	if hits.Load() != 2 {
		t.Errorf("the host server had %d requests, want 2 (native and allowed)", hits.Load())
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	wantLine := `"verdict":"allowed","inbound":false,"guest":"[fd00:6b62:6f78::15]:`
	wantRule := fmt.Sprintf(`"dest":"[%s]:%d","real":"[::1]:%d","rule":"allow [::1/128]:%d"`, gw6, port, port, port)
	if !strings.Contains(string(b), wantLine) || !strings.Contains(string(b), wantRule) {
		t.Errorf("the trace lacks the allowed IPv6 decision (%s ... %s):\n%s", wantLine, wantRule, b)
	}
}
