//go:build lkl

package tests

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCP: an MCP run of /bin/true end to end (client call to
// result) against a bare `kbox image --read-only -- /bin/true`,
// interleaved, median of 9 each; and read_file of a 4 KB file in an open
// session, median of 50 (docs/agents.md, issue 15's targets: 1.5x and
// 2 ms).
func BenchmarkMCP(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	ctx := context.Background()
	cmd := exec.Command(bin, "mcp", "--image", img)
	c := mcp.NewClient(&mcp.Implementation{Name: "kbox-bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	callOK := func(name string, args map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", name, err, res)
		}
		return res
	}
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
	callOK("read_file", map[string]any{"session": sid, "path": "/bench4k"}) // the session's kernel is up
	var reads []float64
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		callOK("read_file", map[string]any{"session": sid, "path": "/bench4k"})
		reads = append(reads, float64(time.Since(t0).Microseconds())/1000)
	}
	callOK("session_close", map[string]any{"session": sid})
	b.Logf("MCP run /bin/true: median wall %.1f ms; bare kbox image --read-only -- /bin/true %.1f ms; ratio %.2f",
		median(viaMCP), median(bare), median(viaMCP)/median(bare))
	b.Logf("MCP read_file 4 KB in a session: median %.2f ms; a call doing nothing: median %.2f ms", median(reads), median(empty))
	b.ReportMetric(median(viaMCP), "mcp_run_ms")
	b.ReportMetric(median(bare), "bare_run_ms")
	b.ReportMetric(median(reads), "read_file_ms")
	b.ReportMetric(median(empty), "empty_call_ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSessions: a live session (issue 33's figures) through the
// SDK's client over stdio: session_open, `run` of /bin/true in the
// session (p50 and p99 of 100), read_file of 4 KB (median of 50), and an
// idle session's kbox process: its private memory (smaps_rollup) and
// threads.
func BenchmarkSessions(b *testing.B) {
	img := imagePath(b)
	ctx := context.Background()
	cmd := exec.Command(kboxBin(b), "mcp", "--image", img)
	c := mcp.NewClient(&mcp.Implementation{Name: "kbox-bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	callOK := func(name string, args map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", name, err, res)
		}
		return res
	}
	t0 := time.Now()
	res := callOK("session_open", map[string]any{})
	open := float64(time.Since(t0).Microseconds()) / 1000
	sid := res.StructuredContent.(map[string]any)["session"].(string)
	var runs []float64
	for i := 0; i < 101; i++ {
		t0 := time.Now()
		callOK("run", map[string]any{"session": sid, "argv": []string{"/bin/true"}})
		if i > 0 { // the first exec of the program reads it from the image
			runs = append(runs, float64(time.Since(t0).Microseconds())/1000)
		}
	}
	callOK("write_file", map[string]any{"session": sid, "path": "/tmp/bench4k", "content": strings.Repeat("x", 4096)})
	var reads []float64
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		callOK("read_file", map[string]any{"session": sid, "path": "/tmp/bench4k"})
		reads = append(reads, float64(time.Since(t0).Microseconds())/1000)
	}
	var privKB, threads int
	if pids := serveProcesses(img); len(pids) == 1 {
		privKB, threads = privateKB(pids[0]), threadCount(pids[0])
	}
	// Checkpoint, rollback and fork after 24 MB written to the image
	// (the test image has room for that much).
	callOK("run", map[string]any{"session": sid, "command": "dd if=/dev/urandom of=/root/big bs=1M count=24 2>/dev/null && sync"})
	ms := func(name string, args map[string]any) float64 {
		t0 := time.Now()
		callOK(name, args)
		return float64(time.Since(t0).Microseconds()) / 1000
	}
	cp := ms("session_checkpoint", map[string]any{"session": sid, "name": "c"})
	rb := ms("session_rollback", map[string]any{"session": sid, "name": "c"})
	t0 = time.Now()
	res = callOK("session_fork", map[string]any{"session": sid})
	fork := float64(time.Since(t0).Microseconds()) / 1000
	fid := res.StructuredContent.(map[string]any)["session"].(string)
	first := ms("run", map[string]any{"session": fid, "argv": []string{"/bin/true"}})
	callOK("session_close", map[string]any{"session": fid})
	callOK("session_close", map[string]any{"session": sid})
	b.Logf("session_open %.1f ms; run /bin/true in a session: p50 %.2f ms, p99 %.2f ms; read_file 4 KB: median %.2f ms; idle session: %d kB private, %d threads",
		open, percentile(runs, 50), percentile(runs, 99), median(reads), privKB, threads)
	b.Logf("after 24 MB written: session_checkpoint %.1f ms, session_rollback %.1f ms, session_fork %.1f ms and its first run %.1f ms", cp, rb, fork, first)
	b.ReportMetric(cp, "checkpoint_ms")
	b.ReportMetric(rb, "rollback_ms")
	b.ReportMetric(fork, "fork_ms")
	b.ReportMetric(open, "open_ms")
	b.ReportMetric(percentile(runs, 50), "run_p50_ms")
	b.ReportMetric(percentile(runs, 99), "run_p99_ms")
	b.ReportMetric(median(reads), "read_file_ms")
	b.ReportMetric(float64(privKB), "idle_private_kB")
	b.ReportMetric(0, "ns/op")
}
