//go:build lkl

package tests

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sinkServer reads each TCP connection to its end and answers the byte
// count as text (inet bulk's peer), on 127.0.0.1.
func sinkServer(b testing.TB) int {
	return tcpServer(b, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		fmt.Fprintf(c, "%d", n)
	})
}

// cpuSeconds is the user and system time of a finished process and its
// waited-for children (kbox's: the guest's too).
func cpuSeconds(ps *os.ProcessState) float64 {
	return (ps.UserTime() + ps.SystemTime()).Seconds()
}

var benchNumber = regexp.MustCompile(`: ([0-9.]+) (MB/s|us each|per s)`)

// inetFigure is the figure tests/guest/inet printed for row name.
func inetFigure(b *testing.B, name, out string) float64 {
	m := benchNumber.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("%s: output %q", name, out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// BenchmarkNet: issue 14's rows (in the seccomp tier, where they were
// first measured: auto would now run inet in the rewrite tier), each the
// same tests/guest/inet run under
// kbox --net (guest → 10.0.2.2, the host's 127.0.0.1) and natively over
// loopback in the same run, median of 3 runs each: bulk TCP guest → host
// (256 MB, with CPU per GB), 64-byte request/response round trips, and
// connections per second. KBOX_BENCH_ROWS=a,b runs only those rows
// (net_bulk, net_rtt, net_conns).
func BenchmarkNet(b *testing.B) {
	img := imagePath(b)
	inet := dumpFromImage(b, img, "/opt/tests/inet")
	sink, echo := sinkServer(b), echoServerB(b)
	const runs = 3
	rows := []struct {
		name, mode, n string
		port          int
		unit          string
		higherBetter  bool
	}{
		{"net_bulk", "bulk", "256", sink, "MB/s", true},
		{"net_rtt", "rtt", "2000", echo, "us", false},
		{"net_conns", "conns", "500", echo, "conn/s", true},
	}
	for _, r := range rows {
		if f := os.Getenv("KBOX_BENCH_ROWS"); f != "" && !strings.Contains(","+f+",", ","+r.name+",") {
			continue
		}
		p := strconv.Itoa(r.port)
		parse := func(out string) float64 { return inetFigure(b, r.name, out) }
		var native, guest, ncpu, gcpu []float64
		for i := 0; i < runs; i++ {
			cmd := exec.Command(inet, r.mode, "127.0.0.1", p, r.n)
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("native %s: %v %s", r.name, err, out)
			}
			native = append(native, parse(string(out)))
			ncpu = append(ncpu, cpuSeconds(cmd.ProcessState))
			gout, gerr, status, ps := runKboxWithin(b, 5*time.Minute, "image", "-S", img, "--read-only", "--syscall-mode=seccomp", "--net", "--net-allow", "127.0.0.1:"+p, "--",
				"/opt/tests/inet", r.mode, "10.0.2.2", p, r.n)
			if status != 0 {
				b.Fatalf("kbox %s: status %d %s %s", r.name, status, gout, gerr)
			}
			guest = append(guest, parse(gout))
			gcpu = append(gcpu, cpuSeconds(ps))
		}
		n, g := median(native), median(guest)
		ratio := g / n // kbox's share of native (throughput) or its multiple (latency)
		b.Logf("%-10s native %9.1f %s   kbox %9.1f %s   ratio %6.3f", r.name, n, r.unit, g, r.unit, ratio)
		b.ReportMetric(ratio, r.name+"_ratio")
		if r.mode == "bulk" {
			gb := 256.0 / 1024
			// CPU per GB: the client process natively; kbox with its
			// guest (both stacks, the pumps, the device). The sink is
			// the same host server in both.
			b.Logf("%-10s CPU per GB: native client %.2f s   kbox+guest %.2f s (whole run, boot included)", r.name, median(ncpu)/gb, median(gcpu)/gb)
			b.ReportMetric(median(gcpu)/gb, r.name+"_kbox_cpu_s_per_GB")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// echoServerB is echoServer's TCP half for a benchmark.
func echoServerB(b *testing.B) int {
	return tcpServer(b, func(c net.Conn) {
		c.(*net.TCPConn).SetNoDelay(true)
		io.Copy(c, c)
	})
}

// BenchmarkNetFloor: the floor of a round trip made of thread hand-offs
// on this machine (scripts/net_floor.c: a token passed round a ring of
// HOPS threads by futex wake-ups, no data), for 2 hops (a native
// request/response), 8 and 16 (what a 64-byte round trip through kbox's
// network crosses: perf counts about 16 context switches per round trip
// in kbox). Median of 3, µs per round trip.
func BenchmarkNetFloor(b *testing.B) {
	floor := filepath.Join(b.TempDir(), "net_floor")
	if out, err := exec.Command("cc", "-O2", "-pthread", "-o", floor, filepath.Join(repoRoot(), "scripts", "net_floor.c")).CombinedOutput(); err != nil {
		b.Skipf("net_floor not built (%v): %s", err, out)
	}
	var line []string
	for _, hops := range []string{"2", "8", "16"} {
		var v []float64
		for i := 0; i < 3; i++ {
			out, err := exec.Command(floor, hops, "5000").Output()
			if err != nil {
				b.Fatalf("net_floor %s: %v", hops, err)
			}
			v = append(v, parseBench(b, string(out)))
		}
		line = append(line, hops+" hops "+strconv.FormatFloat(median(v), 'f', 1, 64))
		b.ReportMetric(median(v), "floor_hops"+hops+"_us")
	}
	b.Logf("floor (scripts/net_floor.c, µs per round trip): %s", strings.Join(line, "   "))
	b.ReportMetric(0, "ns/op")
}

// BenchmarkNetExit: how soon a guest's close reaches a host server, and
// the end of a --net run. tests/guest/inet conns makes three connections,
// each writing a byte, reading the server's echo and closing; the server
// times each from its echo to the guest's end of stream (the FIN). The
// run's end is the start-up trace's leave, which waits until what the
// guest wrote and closed last has reached the host (inet's Drain, the
// network's Quiesce). 15 runs: medians, and the worst.
func BenchmarkNetExit(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	var mu sync.Mutex
	var eof []float64
	p := strconv.Itoa(tcpServer(b, func(c net.Conn) {
		var one [1]byte
		if _, err := io.ReadFull(c, one[:]); err != nil {
			return
		}
		t0 := time.Now()
		c.Write(one[:])
		if _, err := io.Copy(io.Discard, c); err == nil {
			mu.Lock()
			eof = append(eof, float64(time.Since(t0).Microseconds())/1000)
			mu.Unlock()
		}
	}))
	leaveRE := regexp.MustCompile(` leave ([\d.]+)`)
	var leave, wall []float64
	for i := 0; i < 15; i++ {
		w, _, trace := tracedRun(b, bin, "image", "-S", img, "--read-only", "--net", "--net-allow", "127.0.0.1:"+p, "--",
			"/opt/tests/inet", "conns", "10.0.2.2", p, "3")
		m := leaveRE.FindStringSubmatch(trace)
		if m == nil {
			b.Fatalf("no leave in the start-up trace: %s", lastLines(trace, 3))
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		leave, wall = append(leave, v), append(wall, w)
	}
	mu.Lock()
	if len(eof) == 0 {
		mu.Unlock()
		b.Fatal("the server saw no connection end")
	}
	e, ew := median(eof), slices.Max(eof)
	mu.Unlock()
	b.Logf("--net run of 3 connections: the guest's FIN at the host %.2f ms after the echo (median; worst %.1f ms); the run's end (leave) median %.1f ms, worst %.1f ms; wall median %.1f ms", e, ew, median(leave), slices.Max(leave), median(wall))
	b.ReportMetric(e, "fin_after_echo_ms")
	b.ReportMetric(ew, "fin_after_echo_worst_ms")
	b.ReportMetric(median(leave), "leave_ms")
	b.ReportMetric(slices.Max(leave), "leave_worst_ms")
	b.ReportMetric(median(wall), "wall_ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkNetCloses: close-delimited replies on the guest's loopback
// (tests/guest/closes: a server thread answers each request on a new
// connection and closes it, the client reads to the end, as with an
// HTTP/1.0 server), natively and in each tier, median of 3 runs of 200
// requests: how soon a close reaches its peer.
func BenchmarkNetCloses(b *testing.B) {
	img := imagePath(b)
	closes := dumpFromImage(b, img, "/opt/tests/closes")
	us := regexp.MustCompile(`: ([\d.]+) us each`)
	parse := func(what, out string) float64 {
		m := us.FindStringSubmatch(out)
		if m == nil {
			b.Fatalf("%s: output %q", what, out)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	res := map[string][]float64{}
	for i := 0; i < 3; i++ {
		out, err := exec.Command(closes, "200").Output()
		if err != nil {
			b.Fatalf("native: %v", err)
		}
		res["native"] = append(res["native"], parse("native", string(out)))
		for _, tier := range tiers {
			out, errOut, status := runKboxEnv(b, kboxEnv{}, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "--", "/opt/tests/closes", "200")
			if status != 0 {
				b.Fatalf("%s: status %d: %s", tier, status, errOut)
			}
			res[tier] = append(res[tier], parse(tier, out))
		}
	}
	n := median(res["native"])
	line := fmt.Sprintf("close-delimited requests on the guest's loopback: native %.1f us", n)
	for _, tier := range tiers {
		m := median(res[tier])
		line += fmt.Sprintf("   %s %.1f us (%.1fx)", tier, m, m/n)
		b.ReportMetric(m, tier+"_us")
	}
	b.Log(line)
	b.ReportMetric(n, "native_us")
	b.ReportMetric(0, "ns/op")
}
