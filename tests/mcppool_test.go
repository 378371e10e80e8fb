//go:build lkl

package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The warm pool of kbox mcp (--warm-pool, agent/pool.go): one-shot runs
// on an image served by a pre-booted kernel, which then ends.

type warmResult struct {
	runResult
	StderrLen int64 `json:"stderr_bytes"`
	Warm      bool  `json:"warm"`
}

func runCall(t *testing.T, cs *mcp.ClientSession, args map[string]any) warmResult {
	t.Helper()
	var r warmResult
	if res := call(t, cs, "run", args, &r); res.IsError {
		t.Fatalf("run %v: %s", args, resultText(res))
	}
	return r
}

// warmCall calls run until a pooled kernel serves it (a run that finds
// the pool empty, still refilling, takes the one-shot path).
func warmCall(t *testing.T, cs *mcp.ClientSession, args map[string]any) warmResult {
	t.Helper()
	for i := 0; ; i++ {
		if r := runCall(t, cs, args); r.Warm {
			return r
		}
		if i == 100 {
			t.Fatalf("no run of %v was served warm", args)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMCPWarmPoolSameResult: a run served by the pool gives what the
// one-shot path gives: exit status, signal, output and its truncation,
// timeout, tier, telemetry.
func TestMCPWarmPoolSameResult(t *testing.T) {
	img := imagePath(t)
	warm := mcpSession(t, img, "--warm-pool", "1")
	cold := mcpSession(t, img, "--warm-pool", "0")
	cases := []struct {
		name string
		args map[string]any
	}{
		{"echo", map[string]any{"argv": []string{"/bin/echo", "hello", "world"}}},
		{"exit 7", map[string]any{"command": "echo out; echo err >&2; exit 7"}},
		{"stdin", map[string]any{"argv": []string{"/bin/cat"}, "stdin": "line 1\nline 2\n"}},
		{"env and workdir", map[string]any{"command": "pwd; echo $FOO; echo $PWD", "workdir": "/etc", "env": map[string]string{"FOO": "bar"}}},
		{"signal", map[string]any{"command": "echo before; kill -TERM $$; echo after"}},
		{"truncated", map[string]any{"command": "seq 1 20000; seq 1 3000 >&2", "max_output_bytes": 1000}},
		{"not found", map[string]any{"argv": []string{"/no/such/program"}}},
		{"timeout", map[string]any{"command": "echo start; sleep 30; echo never", "timeout_ms": 1000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := warmCall(t, warm, c.args)
			o := runCall(t, cold, c.args)
			if o.Warm {
				t.Fatalf("a run of a server with --warm-pool 0 says it was warm")
			}
			if w.ExitCode != o.ExitCode || w.Signal != o.Signal || w.TimedOut != o.TimedOut || w.Stdout != o.Stdout ||
				w.Truncated != o.Truncated || w.StdoutLen != o.StdoutLen || w.Tier != o.Tier {
				t.Errorf("warm:\n%+v\none-shot:\n%+v", w, o)
			}
			// kbox's own line on a timeout is in the one-shot run's
			// stderr (kbox image's); the guest's is the same.
			if c.name != "timeout" && (w.Stderr != o.Stderr || w.StderrLen != o.StderrLen) {
				t.Errorf("stderr: warm %q (%d bytes), one-shot %q (%d bytes)", w.Stderr, w.StderrLen, o.Stderr, o.StderrLen)
			}
			// A program that does not exist makes no syscall.
			if w.Telemetry == nil || o.Telemetry == nil || (w.Telemetry.Syscalls > 0) != (o.Telemetry.Syscalls > 0) ||
				(len(w.Telemetry.ByFamily) > 0) != (len(o.Telemetry.ByFamily) > 0) {
				t.Errorf("telemetry: warm %+v, one-shot %+v", w.Telemetry, o.Telemetry)
			}
			t.Logf("warm %d ms, one-shot %d ms", w.DurationMs, o.DurationMs)
		})
	}
	// The warm server's last run (the timeout's, a second long): the
	// kernel's snapshot as it ended, its memory and the guest's peak RSS
	// sampled while it ran.
	var snap struct {
		Telemetry struct {
			KernelMemKB uint64 `json:"kernel_mem_peak_kb"`
			GuestPeakKB int64  `json:"guest_peak_rss_kb"`
		} `json:"telemetry"`
		Kernel struct {
			Available bool `json:"available"`
			MemKB     struct {
				UsedKB uint64 `json:"used_kb"`
			} `json:"mem_kb"`
		} `json:"kernel"`
	}
	if res := call(t, warm, "snapshot", map[string]any{}, &snap); res.IsError || !snap.Kernel.Available || snap.Kernel.MemKB.UsedKB == 0 ||
		snap.Telemetry.KernelMemKB == 0 || snap.Telemetry.GuestPeakKB == 0 {
		t.Errorf("snapshot of a pooled run: %s %+v", resultText(res), snap)
	}
}

// warmDirs lists the pool's kernels' directories under tmp.
func warmDirs(tmp string) []string {
	m, _ := filepath.Glob(filepath.Join(tmp, "kbox-warm-*"))
	return m
}

// poolKernels lists the kbox --serve processes whose command line holds
// tmp.
func poolKernels(tmp string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err == nil && strings.Contains(string(b), tmp) && strings.Contains(string(b), "\x00--serve\x00") {
			out = append(out, filepath.Base(d)+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// waitNone waits up to 10 s until list returns nothing.
func waitNone(t *testing.T, what string, list func() []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(list()) > 0 {
		if time.Now().After(deadline) {
			t.Errorf("%s still there: %v", what, list())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMCPWarmPoolIsolation: a pooled kernel serves one run and ends with
// its processes and files; the next run is served by another one (the
// pool refills), and sees nothing of the first.
func TestMCPWarmPoolIsolation(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	tmp := t.TempDir()
	cs := mcpSession(t, img, "--warm-pool", "1", "--tmp-dir", tmp)
	r := warmCall(t, cs, map[string]any{"command": "echo one > /tmp/pool-f; echo one > /root/pool-g; sleep 3151 >/dev/null 2>&1 & echo started"})
	if r.ExitCode != 0 || r.Stdout != "started\n" {
		t.Fatalf("first run: %+v", r)
	}
	// The kernel that served it has ended: its background process, its
	// directory.
	waitNone(t, "the first run's background process", func() []string { return processesWith("3151") })
	probe := "ls /tmp/pool-f /root/pool-g 2>&1; pidof sleep; echo pidof=$?"
	for i := 0; i < 2; i++ { // the second and the third run: the pool refilled twice
		r = warmCall(t, cs, map[string]any{"command": probe})
		if strings.Count(r.Stdout, "No such file") != 2 || !strings.HasSuffix(r.Stdout, "pidof=1\n") {
			t.Errorf("run %d after the first saw what it left: %q", i+2, r.Stdout)
		}
	}
	waitNone(t, "the used kernels' directories", func() []string {
		if d := warmDirs(tmp); len(d) > 1 {
			return d
		}
		return nil
	})
	if after := fileSum(t, img); after != before {
		t.Errorf("the image changed under pooled runs")
	}
}

// TestMCPWarmPoolPolicyAndAudit: a run with an agent's policy does not
// take a pooled kernel (which has the operator's alone) and gets its
// policy; a pooled run gets the operator's policy, its refusals counted,
// and an audit head that the log verifies, whose records carry the
// settings' hash.
func TestMCPWarmPoolPolicyAndAudit(t *testing.T) {
	op := writePolicy(t, "[paths]\nhidden = [\"/etc/hostname\"]\n")
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	cs := mcpSession(t, imagePath(t), "--warm-pool", "1", "--policy", op, "--audit", log)
	probe := "cat /etc/hostname; echo hostname=$?; cat /etc/passwd >/dev/null; echo passwd=$?"
	w := warmCall(t, cs, map[string]any{"command": probe})
	if !strings.Contains(w.Stdout, "hostname=1") || !strings.Contains(w.Stdout, "passwd=0") ||
		w.Telemetry == nil || w.Telemetry.Policy["hidden:/etc/hostname"] != 1 {
		t.Errorf("a pooled run under the operator's policy: %+v %+v", w.runResult, w.Telemetry)
	}
	time.Sleep(2 * time.Second) // the pool has refilled: the next run could be warm
	a := runCall(t, cs, map[string]any{"command": probe, "policy": "[paths]\nhidden = [\"/etc/passwd\"]\n"})
	if a.Warm || !strings.Contains(a.Stdout, "hostname=1") || !strings.Contains(a.Stdout, "passwd=1") ||
		a.Telemetry == nil || a.Telemetry.Policy["hidden:/etc/passwd"] != 1 {
		t.Errorf("a run with an agent's policy: warm %v %+v %+v", a.Warm, a.runResult, a.Telemetry)
	}
	if w.AuditHead == "" {
		t.Fatalf("a pooled run has no audit head")
	}
	out, err := exec.Command(kboxBin(t), "audit", "verify", log, "--head", w.AuditHead).CombinedOutput()
	if err != nil {
		t.Errorf("kbox audit verify --head of the pooled run: %v: %s", err, out)
	}
	settings, runs := "", 0
	for _, rec := range readAuditLog(t, log) {
		if rec.Type == "mcp_start" {
			settings = rec.Settings
		}
		if rec.Type == "serve_run" {
			runs++
			argv, _ := json.Marshal(rec.Data["argv"])
			if rec.Settings == "" || rec.Settings != settings || !strings.Contains(string(argv), "hostname=$?") || rec.Data["image_sha256"] == nil {
				t.Errorf("the pooled run's record: %s", rec.line)
			}
		}
	}
	if runs != 1 {
		t.Errorf("%d serve_run records, want 1 (the pooled run)", runs)
	}
}

// TestMCPWarmPoolClose: the server's end ends every pooled kernel, the
// one just used too, and leaves no process or directory of theirs.
func TestMCPWarmPoolClose(t *testing.T) {
	tmp := t.TempDir()
	cs := mcpSession(t, imagePath(t), "--warm-pool", "2", "--tmp-dir", tmp)
	warmCall(t, cs, map[string]any{"command": "sleep 3152 >/dev/null 2>&1 & echo ok"})
	deadline := time.Now().Add(30 * time.Second)
	for len(poolKernels(tmp)) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(poolKernels(tmp)); n < 2 {
		t.Fatalf("%d pooled kernels, want 2", n)
	}
	cs.Close()
	if p := poolKernels(tmp); len(p) > 0 {
		t.Errorf("pooled kernels outlived the server: %v", p)
	}
	if p := processesWith("3152"); len(p) > 0 {
		t.Errorf("a pooled run's process outlived the server: %v", p)
	}
	if d, _ := os.ReadDir(tmp); len(d) > 0 {
		t.Errorf("left in --tmp-dir: %v", d)
	}
}
