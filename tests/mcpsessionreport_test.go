//go:build lkl

package tests

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPSessionTelemetry: a run in a session reports its syscalls, its
// policy refusals and its audit head as a run on an image does; so does
// a background run once it ended (process_wait), and the session's
// snapshot tool gives the last run's telemetry. The audit log holds a
// serve_run and a serve_run_end record for each, and verifies up to
// each head.
func TestMCPSessionTelemetry(t *testing.T) {
	op := writePolicy(t, "[paths]\nhidden = [\"/etc/hostname\"]\n")
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	cs := mcpSession(t, imagePath(t), "--warm-pool", "0", "--policy", op, "--audit", log)
	sid := openSession(t, cs)
	probe := "cat /etc/hostname; echo hostname=$?"
	r := runIn(t, cs, sid, probe)
	if !strings.Contains(r.Stdout, "hostname=1") || r.Telemetry == nil || r.Telemetry.Syscalls == 0 ||
		len(r.Telemetry.ByFamily) == 0 || r.Telemetry.Policy["hidden:/etc/hostname"] != 1 || r.AuditHead == "" {
		t.Fatalf("a session run's result: %+v telemetry %+v", r, r.Telemetry)
	}
	var snap struct {
		Argv      []string `json:"argv"`
		Telemetry *struct {
			Syscalls uint64 `json:"syscalls"`
		} `json:"telemetry"`
	}
	if res := call(t, cs, "snapshot", map[string]any{"session": sid}, &snap); res.IsError || snap.Telemetry == nil || snap.Telemetry.Syscalls == 0 {
		t.Errorf("snapshot of the session's last run: %s %+v", resultText(res), snap)
	}

	var bg struct {
		Handle string `json:"handle"`
	}
	if res := call(t, cs, "run", map[string]any{"session": sid, "command": "sleep 0.2; " + probe, "background": true}, &bg); res.IsError || bg.Handle == "" {
		t.Fatalf("background run: %s", resultText(res))
	}
	var w struct {
		Running   bool `json:"running"`
		ExitCode  int  `json:"exit_code"`
		Telemetry *struct {
			Syscalls uint64            `json:"syscalls"`
			Policy   map[string]uint64 `json:"policy_refusals"`
		} `json:"telemetry"`
		AuditHead string `json:"audit_head"`
	}
	if res := call(t, cs, "process_wait", map[string]any{"session": sid, "handle": bg.Handle, "timeout_ms": 20000}, &w); res.IsError || w.Running ||
		w.Telemetry == nil || w.Telemetry.Syscalls == 0 || w.Telemetry.Policy["hidden:/etc/hostname"] != 1 || w.AuditHead == "" {
		t.Fatalf("process_wait of the background run: %s %+v", resultText(res), w)
	}
	for _, head := range []string{r.AuditHead, w.AuditHead} {
		if out, err := exec.Command(kboxBin(t), "audit", "verify", log, "--head", head).CombinedOutput(); err != nil {
			t.Errorf("kbox audit verify --head %s: %v: %s", head, err, out)
		}
	}
	starts, ends := 0, 0
	for _, rec := range readAuditLog(t, log) {
		switch rec.Type {
		case "serve_run":
			if argv, _ := json.Marshal(rec.Data["argv"]); strings.Contains(string(argv), "hostname=$?") {
				starts++
			}
		case "serve_run_end":
			ends++
		}
	}
	if starts != 2 || ends < 2 {
		t.Errorf("%d serve_run records of the probe and %d serve_run_end, want 2 and at least 2", starts, ends)
	}
}
