//go:build lkl

package tests

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCP: an MCP run of /bin/true end to end (client call to
// result) against a bare `kbox image --read-only -- /bin/true`,
// interleaved, median of 9 each; and read_file of 1 B, 4 KB and 64 KB in
// an open session, interleaved with the SDK alone answering the same
// result from memory (tests/mcpfloor), and the text alone (docs/agents.md).
func BenchmarkMCP(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	ctx := context.Background()
	// The one-shot path: no warm pool (BenchmarkSessions measures it).
	cs, callOK := benchClient(b, "--image", img, "--warm-pool", "0")
	// The MCP round trip alone: a call that does no work (enosys before
	// any run answers "no run yet" at once).
	var empty []float64
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "enosys", Arguments: map[string]any{}}); err != nil {
			b.Fatal(err)
		}
		empty = append(empty, float64(time.Since(t0).Microseconds())/1000)
	}
	var bare, viaMCP []float64
	for i := 0; i < 9; i++ {
		t0 := time.Now()
		if err := exec.Command(bin, "image", "-S", img, "--read-only", "--", "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, float64(time.Since(t0).Microseconds())/1000)
		t0 = time.Now()
		callOK("run", map[string]any{"argv": []string{"/bin/true"}})
		viaMCP = append(viaMCP, float64(time.Since(t0).Microseconds())/1000)
	}
	res := callOK("session_open", map[string]any{})
	sid := res.StructuredContent.(map[string]any)["session"].(string)
	callOK("write_file", map[string]any{"session": sid, "path": "/bench4k", "content": strings.Repeat("x", 4096)})
	callOK("write_file", map[string]any{"session": sid, "path": "/bench1", "content": "x"})
	callOK("write_file", map[string]any{"session": sid, "path": "/bench64k", "content": strings.Repeat("x", 65536)})
	callOK("read_file", map[string]any{"session": sid, "path": "/bench4k"}) // the session's kernel is up
	// The floor, in the same minutes: the SDK alone, answering a result of
	// read_file's shape from memory (tests/mcpfloor).
	floorCall := mcpFloor(b)
	floorCall("noop", nil)
	// What the size costs: the file's bytes go three times into the
	// result (text, base64, the text rendering), each JSON-encoded and
	// decoded by the SDK on both ends.
	readMs := func(path string, size, n int) (kbox, floor float64) {
		var d, f []float64
		for i := 0; i < n; i++ {
			t0 := time.Now()
			callOK("read_file", map[string]any{"session": sid, "path": path})
			d = append(d, float64(time.Since(t0).Microseconds())/1000)
			t0 = time.Now()
			floorCall("read_file", map[string]any{"path": path, "size": size})
			f = append(f, float64(time.Since(t0).Microseconds())/1000)
		}
		return median(d), median(f)
	}
	read4k, floor4k := readMs("/bench4k", 4096, 50)
	read1, floor1 := readMs("/bench1", 1, 50)
	read64k, floor64k := readMs("/bench64k", 65536, 20)
	var noop, text4k []float64
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		floorCall("noop", nil)
		noop = append(noop, float64(time.Since(t0).Microseconds())/1000)
		t0 = time.Now()
		floorCall("read_text", map[string]any{"path": "/bench4k", "size": 4096})
		text4k = append(text4k, float64(time.Since(t0).Microseconds())/1000)
	}
	callOK("session_close", map[string]any{"session": sid})
	b.Logf("MCP run /bin/true: median wall %.1f ms; bare kbox image --read-only -- /bin/true %.1f ms; ratio %.2f",
		median(viaMCP), median(bare), median(viaMCP)/median(bare))
	b.Logf("MCP read_file in a session: 4 KB median %.2f ms, 1 byte %.2f ms, 64 KB %.2f ms; a call doing nothing: median %.2f ms", read4k, read1, read64k, median(empty))
	b.Logf("floor (the SDK alone, tests/mcpfloor): 4 KB %.2f ms, 1 byte %.2f ms, 64 KB %.2f ms; 4 KB as text alone %.2f ms; a call doing nothing %.2f ms",
		floor4k, floor1, floor64k, median(text4k), median(noop))
	b.ReportMetric(median(viaMCP), "mcp_run_ms")
	b.ReportMetric(median(bare), "bare_run_ms")
	b.ReportMetric(read4k, "read_file_ms")
	b.ReportMetric(read1, "read_file_1B_ms")
	b.ReportMetric(read64k, "read_file_64k_ms")
	b.ReportMetric(floor4k, "floor_read_4k_ms")
	b.ReportMetric(median(text4k), "floor_text_4k_ms")
	b.ReportMetric(median(noop), "floor_noop_ms")
	b.ReportMetric(median(empty), "empty_call_ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSessions: a live session (issue 33's figures) through the
// SDK's client over stdio (sessionRows), and an idle session's kbox
// process: its private memory (smaps_rollup) and threads; one-shot runs
// through the warm pool (warmPoolRows); the CLI verbs.
func BenchmarkSessions(b *testing.B) {
	warmPoolRows(b)
	img := gibImage(b)
	_, callOK := benchClient(b, "--image", img)
	sessionRows(b, "stdio", callOK, func() {
		var privKB, threads int
		if pids := serveProcesses(img); len(pids) == 1 {
			privKB, threads = privateKB(pids[0]), threadCount(pids[0])
		}
		b.Logf("idle session: %d kB private, %d threads", privKB, threads)
		b.ReportMetric(float64(privKB), "idle_private_kB")
	})
	// The CLI verbs (kbox session) after 100 MB written to a 1 GiB image.
	cliCp, cliRb, _, _ := sessionCLIFigures(b)
	b.ReportMetric(cliCp, "cli_checkpoint_100M_ms")
	b.ReportMetric(cliRb, "cli_rollback_100M_ms")
	b.ReportMetric(0, "ns/op")
}

// sessionRows: session_open, `run` of /bin/true in the session (p50 and
// p99 of 100), read_file of 4 KB (median of 50) and a call doing nothing
// (enosys, interleaved with it), idle() while the session is idle, then
// checkpoint, rollback and fork after 100 MB written (and synced) to the
// session's image, a 1 GiB one (gibImage), each reported with the
// transport's name.
func sessionRows(b *testing.B, transport string, callOK func(string, map[string]any) *mcp.CallToolResult, idle func()) {
	ms := func(name string, args map[string]any) (float64, *mcp.CallToolResult) {
		t0 := time.Now()
		res := callOK(name, args)
		return float64(time.Since(t0).Microseconds()) / 1000, res
	}
	open, res := ms("session_open", map[string]any{})
	sid := res.StructuredContent.(map[string]any)["session"].(string)
	runs := sessionRuns(callOK, sid, 100)
	callOK("write_file", map[string]any{"session": sid, "path": "/tmp/bench4k", "content": strings.Repeat("x", 4096)})
	// read_file interleaved with a call that does no work (enosys of a
	// session: its last run's list), the transport's own round trip.
	var reads, noops []float64
	for i := 0; i < 50; i++ {
		d, _ := ms("read_file", map[string]any{"session": sid, "path": "/tmp/bench4k"})
		reads = append(reads, d)
		d, _ = ms("enosys", map[string]any{"session": sid})
		noops = append(noops, d)
	}
	if idle != nil {
		idle()
	}
	callOK("run", map[string]any{"session": sid, "command": "dd if=/dev/urandom of=/root/big bs=1M count=100 2>/dev/null && sync"})
	cp, _ := ms("session_checkpoint", map[string]any{"session": sid, "name": "c"})
	rb, _ := ms("session_rollback", map[string]any{"session": sid, "name": "c"})
	fork, res := ms("session_fork", map[string]any{"session": sid})
	fid := res.StructuredContent.(map[string]any)["session"].(string)
	first, _ := ms("run", map[string]any{"session": fid, "argv": []string{"/bin/true"}})
	callOK("session_close", map[string]any{"session": fid})
	callOK("session_close", map[string]any{"session": sid})
	b.Logf("%s: session_open %.1f ms; run /bin/true in a session: p50 %.2f ms, p99 %.2f ms; read_file 4 KB: median %.2f ms (a call doing nothing: %.2f ms)",
		transport, open, percentile(runs, 50), percentile(runs, 99), median(reads), median(noops))
	b.Logf("%s: after 100 MB written: session_checkpoint %.1f ms, session_rollback %.1f ms, session_fork %.1f ms and its first run %.1f ms", transport, cp, rb, fork, first)
	for name, v := range map[string]float64{"checkpoint_ms": cp, "rollback_ms": rb, "fork_ms": fork, "open_ms": open,
		"run_p50_ms": percentile(runs, 50), "run_p99_ms": percentile(runs, 99), "read_file_ms": median(reads), "noop_ms": median(noops)} {
		b.ReportMetric(v, transport+"_"+name)
	}
}

// BenchmarkSessionsHTTP: sessionRows through the SDK's client over
// streamable HTTP (`kbox mcp --listen` on 127.0.0.1, with a token).
func BenchmarkSessionsHTTP(b *testing.B) {
	url := listenMCP(b, exec.Command(kboxBin(b), "mcp", "--image", gibImage(b), "--warm-pool", "0", "--listen", "127.0.0.1:0", "--token", "bench-token"))
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "kbox-bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerRT{"bench-token"}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	sessionRows(b, "http", func(name string, args map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", name, err, res)
		}
		return res
	}, nil)
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSessionRun: run of /bin/true in a live session, 200 calls
// after the session's boot with nothing else running (BenchmarkSessions'
// row follows its warm-pool rows, whose boots may still run).
func BenchmarkSessionRun(b *testing.B) {
	_, callOK := benchClient(b, "--image", imagePath(b), "--warm-pool", "0")
	res := callOK("session_open", map[string]any{})
	sid := res.StructuredContent.(map[string]any)["session"].(string)
	runs := sessionRuns(callOK, sid, 200)
	b.Logf("run /bin/true in a session, alone: p50 %.2f ms, p99 %.2f ms", percentile(runs, 50), percentile(runs, 99))
	b.ReportMetric(percentile(runs, 50), "run_p50_ms")
	b.ReportMetric(percentile(runs, 99), "run_p99_ms")
	b.ReportMetric(0, "ns/op")
}

// sessionRuns times n runs of /bin/true in session sid, in ms, after a
// first one that reads the program from the image.
func sessionRuns(callOK func(string, map[string]any) *mcp.CallToolResult, sid string, n int) []float64 {
	var runs []float64
	for i := 0; i <= n; i++ {
		t0 := time.Now()
		callOK("run", map[string]any{"session": sid, "argv": []string{"/bin/true"}})
		if i > 0 {
			runs = append(runs, float64(time.Since(t0).Microseconds())/1000)
		}
	}
	return runs
}

// BenchmarkSessionsMany: 50 sessions open at once on one server, each
// running 10 small commands concurrently with the others: failures, p50
// and p99 of a run, and the sessions' private memory together.
func BenchmarkSessionsMany(b *testing.B) {
	const n, runs = 50, 10
	img := imagePath(b)
	ctx := context.Background()
	cs, _ := benchClient(b, "--image", img, "--max-sessions", "64")
	var mu sync.Mutex
	var lat []float64
	var ids []string
	failures := 0
	fail := func(err error, res *mcp.CallToolResult) bool {
		if err != nil || res.IsError {
			mu.Lock()
			failures++
			mu.Unlock()
			return true
		}
		return false
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_open", Arguments: map[string]any{}})
			if fail(err, res) {
				return
			}
			mu.Lock()
			ids = append(ids, res.StructuredContent.(map[string]any)["session"].(string))
			mu.Unlock()
		}()
	}
	wg.Wait()
	openAll := time.Since(t0).Seconds()
	privKB := 0
	for _, pid := range serveProcesses(img) {
		privKB += privateKB(pid)
	}
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < runs; j++ {
				t := time.Now()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"session": id, "command": "echo $$ > /tmp/pid; cat /tmp/pid >/dev/null"}})
				if fail(err, res) {
					continue
				}
				mu.Lock()
				lat = append(lat, float64(time.Since(t).Microseconds())/1000)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_close", Arguments: map[string]any{"session": id}})
	}
	b.Logf("%d sessions opened in %.1f s (4 at a time), %d MB private together; %d runs, %d failures; a run: p50 %.1f ms, p99 %.1f ms",
		len(ids), openAll, privKB>>10, len(lat), failures, percentile(lat, 50), percentile(lat, 99))
	b.ReportMetric(float64(failures), "failures")
	b.ReportMetric(percentile(lat, 50), "run_p50_ms")
	b.ReportMetric(percentile(lat, 99), "run_p99_ms")
	b.ReportMetric(0, "ns/op")
}

// mcpFloor builds and starts tests/mcpfloor with kbox mcp's GOGC
// (mcpGCPercent in cmd/kbox/mcp.go) under the SDK's client over stdio,
// and returns a call that fails the benchmark on an error.
func mcpFloor(b *testing.B) func(string, map[string]any) {
	bin := filepath.Join(b.TempDir(), "mcpfloor")
	build := exec.Command("go", "build", "-o", bin, "./tests/mcpfloor")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build mcpfloor: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "GOGC=400")
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "kbox-bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("connect mcpfloor: %v", err)
	}
	b.Cleanup(func() { cs.Close() })
	return func(name string, args map[string]any) {
		if args == nil {
			args = map[string]any{}
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("mcpfloor %s: %v %v", name, err, res)
		}
	}
}

// benchClient starts `kbox mcp ARGS...` with the SDK's client over stdio;
// callOK calls a tool and fails the benchmark on an error. The server
// ends with the benchmark.
func benchClient(b *testing.B, args ...string) (*mcp.ClientSession, func(string, map[string]any) *mcp.CallToolResult) {
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "kbox-bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(kboxBin(b), append([]string{"mcp"}, args...)...)}, nil)
	if err != nil {
		b.Fatalf("connect: %v", err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs, func(name string, args map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", name, err, res)
		}
		return res
	}
}

// warmPoolRows: one-shot `run /bin/true` on an image through a warm pool
// of one kernel (kbox mcp --warm-pool 1), calls arriving at one per
// second (20 calls) and at ten per second (30 calls; each takes a kernel
// and boots its replacement, so some find the pool empty and take the
// one-shot path): p50 and p99 of each, and how many were served warm;
// and an idle pooled kernel's private memory (smaps_rollup), its
// process and its guest processes (the spawner) together.
func warmPoolRows(b *testing.B) {
	img := imagePath(b)
	tmp := b.TempDir()
	_, callOK := benchClient(b, "--image", img, "--warm-pool", "1", "--tmp-dir", tmp)
	time.Sleep(3 * time.Second) // the pool's first kernel boots
	var privKB int
	for _, pid := range warmKernels(tmp) {
		privKB = privateKB(pid)
		for _, c := range descendants(pid) {
			privKB += privateKB(c)
		}
	}
	rate := func(n int, every time.Duration) (lat []float64, warm int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		t := time.NewTicker(every)
		defer t.Stop()
		for i := 0; i < n; i++ {
			<-t.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				res := callOK("run", map[string]any{"argv": []string{"/bin/true"}})
				ms := float64(time.Since(t0).Microseconds()) / 1000
				w, _ := res.StructuredContent.(map[string]any)["warm"].(bool)
				mu.Lock()
				lat = append(lat, ms)
				if w {
					warm++
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		return lat, warm
	}
	one, warm1 := rate(20, time.Second)
	time.Sleep(2 * time.Second)
	ten, warm10 := rate(30, 100*time.Millisecond)
	b.Logf("one-shot run /bin/true through a warm pool of 1: at 1/s p50 %.1f ms, p99 %.1f ms (%d of %d warm); at 10/s p50 %.1f ms, p99 %.1f ms (%d of %d warm); an idle pooled kernel: %d kB private",
		percentile(one, 50), percentile(one, 99), warm1, len(one), percentile(ten, 50), percentile(ten, 99), warm10, len(ten), privKB)
	b.ReportMetric(percentile(one, 50), "pool_1ps_p50_ms")
	b.ReportMetric(percentile(ten, 50), "pool_10ps_p50_ms")
	b.ReportMetric(percentile(ten, 99), "pool_10ps_p99_ms")
	b.ReportMetric(float64(privKB), "pool_idle_private_kB")
}

// warmKernels lists the pids of the warm pool's kbox processes, whose
// directories are in tmp.
func warmKernels(tmp string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if slices.Contains(args, "--serve") && slices.Contains(args, "--ephemeral") && strings.Contains(string(b), tmp) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			out = append(out, pid)
		}
	}
	return out
}

// descendants lists pid's descendants.
func descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
				out = append(out, descendants(c)...)
			}
		}
	}
	return out
}
