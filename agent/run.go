package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// ---- run

// RunIn is run's input.
type RunIn struct {
	Argv           []string          `json:"argv,omitempty" jsonschema:"the program and its arguments (give argv or command)"`
	Command        string            `json:"command,omitempty" jsonschema:"a shell command line, run with /bin/sh -c (give argv or command)"`
	Stdin          string            `json:"stdin,omitempty" jsonschema:"the program's standard input"`
	StdinBase64    string            `json:"stdin_base64,omitempty" jsonschema:"the program's standard input, base64 (for binary input; not with stdin)"`
	Workdir        string            `json:"workdir,omitempty" jsonschema:"absolute working directory in the image (default /)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment variables added to the guest's clean environment"`
	TimeoutMs      int64             `json:"timeout_ms,omitempty" jsonschema:"kill the whole guest after this many milliseconds (default 60000)"`
	MaxOutputBytes int               `json:"max_output_bytes,omitempty" jsonschema:"keep at most this many bytes of stdout and of stderr, head and tail (default 1 MiB)"`
	Image          string            `json:"image,omitempty" jsonschema:"the name of one of the server's images (its operator's --images directory; default: its --image): an ephemeral run on it"`
	Session        string            `json:"session,omitempty" jsonschema:"a session id from session_open: the program runs in the session's live kernel, beside what earlier runs left running, and its writes stay in the session"`
	Policy         string            `json:"policy,omitempty" jsonschema:"a policy for the run, as TOML text (kbox image --policy, docs/agents.md): it adds restrictions to the operator's policy and removes none"`
	Net            *bool             `json:"net,omitempty" jsonschema:"false: no network for this run; true: the network the server's operator gives runs (an error if none); default: the operator's"`
	Background     bool              `json:"background,omitempty" jsonschema:"in a session: return once the program has started, with a handle for process_output, process_wait and process_signal (no timeout unless timeout_ms is given)"`
}

// RunOut is run's result.
type RunOut struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// The kept output, base64, when it is not valid UTF-8 (stdout and
	// stderr then have U+FFFD in place of the bad bytes).
	StdoutBase64 string     `json:"stdout_base64,omitempty" jsonschema:"the kept stdout, base64, when it is not UTF-8"`
	StderrBase64 string     `json:"stderr_base64,omitempty" jsonschema:"the kept stderr, base64, when it is not UTF-8"`
	Truncated    bool       `json:"truncated"`
	StdoutLen    int64      `json:"stdout_bytes"`
	StderrLen    int64      `json:"stderr_bytes"`
	DurationMs   int64      `json:"duration_ms"`
	Tier         string     `json:"tier"`
	Telemetry    *Telemetry `json:"telemetry,omitempty"`
	AuditHead    string     `json:"audit_head,omitempty"`
	Handle       string     `json:"handle,omitempty" jsonschema:"a background run's handle (its pid in the session)"`
	Warm         bool       `json:"warm,omitempty" jsonschema:"the run took a pre-booted kernel of the server's warm pool"`
}

// Telemetry is the run's syscalls as kbox counted them.
type Telemetry struct {
	Syscalls    uint64                       `json:"syscalls"`
	ByFamily    map[string]map[string]uint64 `json:"by_family" jsonschema:"family -> disposition (lkl, host, emulated, denied, enosys) -> count"`
	ENOSYS      map[string]uint64            `json:"enosys,omitempty" jsonschema:"syscalls answered ENOSYS, by name"`
	Denied      map[string]uint64            `json:"denied,omitempty" jsonschema:"syscalls refused, by name"`
	Policy      map[string]uint64            `json:"policy_refusals,omitempty" jsonschema:"calls refused by the policy, by rule"`
	GuestPeakKB int64                        `json:"guest_peak_rss_kb,omitempty" jsonschema:"the largest peak RSS (VmHWM) seen among the run's processes, sampled every 100 ms, kB"`
	KernelMemKB uint64                       `json:"kernel_mem_peak_kb,omitempty" jsonschema:"the most memory the in-process kernel was seen using (sampled every 100 ms), kB"`
}

// report is what kbox image --report writes (cmd/kbox/agent.go).
type report struct {
	Status      int        `json:"status"`
	TimedOut    bool       `json:"timed_out"`
	DurationMs  int64      `json:"duration_ms"`
	Tier        string     `json:"tier"`
	Error       string     `json:"error"`
	Telemetry   *Telemetry `json:"telemetry"`
	AuditHead   string     `json:"audit_head"`
	GuestMaxRSS int64      `json:"guest_peak_rss_kb"`
	// Kernel is the observatory's kernel snapshot as the run ended.
	Kernel          json.RawMessage `json:"kernel"`
	KernelMemPeakKB uint64          `json:"kernel_mem_peak_kb"`
}

func (s *Server) run(ctx context.Context, mreq *mcp.CallToolRequest, in RunIn) (*mcp.CallToolResult, RunOut, error) {
	var out RunOut
	argv := in.Argv
	switch {
	case len(argv) > 0 && in.Command != "":
		return nil, out, toolError("give argv or command, not both")
	case in.Command != "":
		argv = []string{"/bin/sh", "-c", in.Command}
	case len(argv) == 0:
		return nil, out, toolError("give argv (a non-empty list) or command")
	case argv[0] == "":
		return nil, out, toolError("argv[0] is empty")
	}
	if in.Workdir != "" && !strings.HasPrefix(in.Workdir, "/") {
		return nil, out, toolError("workdir %q must be an absolute path in the image", in.Workdir)
	}
	if in.Image != "" && in.Session != "" {
		return nil, out, toolError("give image or session, not both")
	}
	stdin := []byte(in.Stdin)
	if in.StdinBase64 != "" {
		if in.Stdin != "" {
			return nil, out, toolError("give stdin or stdin_base64, not both")
		}
		var err error
		if stdin, err = base64.StdEncoding.DecodeString(in.StdinBase64); err != nil {
			return nil, out, toolError("stdin_base64 is not base64: %v", err)
		}
	}
	timeout := defaultTimeout
	switch {
	case in.TimeoutMs < 0:
		return nil, out, toolError("timeout_ms must be positive")
	case in.TimeoutMs > 0:
		timeout = time.Duration(in.TimeoutMs) * time.Millisecond
	}
	if timeout > maxTimeout {
		return nil, out, toolError("timeout_ms %d is above the limit of %d", in.TimeoutMs, maxTimeout.Milliseconds())
	}
	maxOut := defaultMaxOutput
	switch {
	case in.MaxOutputBytes < 0:
		return nil, out, toolError("max_output_bytes must be positive")
	case in.MaxOutputBytes > maxMaxOutput:
		return nil, out, toolError("max_output_bytes %d is above the limit of %d", in.MaxOutputBytes, maxMaxOutput)
	case in.MaxOutputBytes > 0:
		maxOut = in.MaxOutputBytes
	}
	if in.Session != "" {
		return s.sessionRun(ctx, mreq, in, argv, stdin, timeout, maxOut)
	}
	if in.Background {
		return nil, out, toolError("background: only in a session (session_open)")
	}
	if s.warmable(in) {
		img, err := s.imageOf(in.Image)
		if err != nil {
			return nil, out, err
		}
		env, err := envList(in.Env)
		if err != nil {
			return nil, out, err
		}
		if res, out, ok, err := s.warmRun(ctx, mreq, img, in, argv, env, stdin, timeout, maxOut); ok {
			return res, out, err
		}
	}
	// An agent's tool calls are untrusted code: the seccomp tier, whose
	// guest is a process of its own, never auto's in-process tiers, which
	// cannot confine a program that attacks kbox (docs/security.md).
	args := []string{"image", "--syscall-mode=seccomp"}
	netArgs, err := s.netArgs(in.Net)
	if err != nil {
		return nil, out, err
	}
	repDir, err := os.MkdirTemp(s.cfg.TmpDir, "kbox-run-")
	if err != nil {
		return nil, out, err
	}
	defer os.RemoveAll(repDir)
	// A bad policy, or one that would loosen the operator's, refuses
	// the whole call.
	polArgs, err := s.runPolicy(in.Policy, repDir)
	if err != nil {
		return nil, out, err
	}
	img, err := s.imageOf(in.Image)
	if err != nil {
		return nil, out, err
	}
	args = append(args, "-S", img, "--ephemeral")
	rep := filepath.Join(repDir, "report.json")
	args = append(args, "--report", rep, "--timeout", timeout.String())
	args = append(args, polArgs...)
	args = append(args, netArgs...)
	if in.Workdir != "" {
		args = append(args, "-w", in.Workdir)
	}
	if s.cfg.Audit != "" {
		args = append(args, "--audit", s.cfg.Audit, "--audit-settings", s.settingsID)
	}
	env, err := envList(in.Env)
	if err != nil {
		return nil, out, err
	}
	for _, kv := range env {
		args = append(args, "--env", kv)
	}
	args = append(args, "--")
	args = append(args, argv...)

	ctx, cancel := context.WithTimeout(ctx, timeout+setupGrace)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cfg.Kbox, args...)
	// Cancelled (the client gave up) or past the grace: kbox passes
	// SIGTERM to the guest and writes the image back; SIGKILL if that
	// takes too long.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = bytes.NewReader(stdin)
	// If the server dies, so does the run (and kbox's guests with it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, stderr := newHeadTail(maxOut), newHeadTail(maxOut)
	cmd.Stdout, cmd.Stderr = withProgress(ctx, mreq, stdout, stderr)
	cmd.Env = append(os.Environ(), "KBOX_DEBUG=")
	start := time.Now()
	runErr := cmd.Run()
	out.DurationMs = time.Since(start).Milliseconds()
	var r report
	b, rerr := os.ReadFile(rep)
	if rerr == nil {
		rerr = json.Unmarshal(b, &r)
	}
	if rerr != nil {
		return nil, out, toolError("kbox failed before reporting (%v): %s", runErr, lastLine(stderr.String()))
	}
	if r.Error != "" {
		return nil, out, toolError("kbox: %s", r.Error)
	}
	out.ExitCode, out.TimedOut, out.Tier = r.Status, r.TimedOut, r.Tier
	if r.Status > 128 && r.Status < 128+65 {
		out.Signal = unix.SignalName(syscall.Signal(r.Status - 128))
	}
	out.Stdout, out.Stderr = stdout.String(), stderr.String()
	out.StdoutLen, out.StderrLen = stdout.total, stderr.total
	out.Truncated = stdout.cut() || stderr.cut()
	out.Telemetry = r.Telemetry
	if out.Telemetry != nil {
		out.Telemetry.GuestPeakKB, out.Telemetry.KernelMemKB = r.GuestMaxRSS, r.KernelMemPeakKB
	}
	lr := &lastRun{at: time.Now(), argv: argv, telemetry: out.Telemetry, kernel: r.Kernel}
	s.mu.Lock()
	s.last = lr
	s.mu.Unlock()
	out.AuditHead = r.AuditHead
	return runResult(&out, timeout), out, nil
}

// envList checks a run's environment and returns it as NAME=VALUE, in
// name order.
func envList(m map[string]string) ([]string, error) {
	names := make([]string, 0, len(m))
	for k := range m {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(m[k], 0) {
			return nil, toolError("bad env name %q", k)
		}
		names = append(names, k)
	}
	sort.Strings(names)
	env := make([]string, len(names))
	for i, k := range names {
		env[i] = k + "=" + m[k]
	}
	return env, nil
}

// sessionRun runs a program in a session's live kernel: a new guest
// process beside what earlier runs left running.
func (s *Server) sessionRun(ctx context.Context, mreq *mcp.CallToolRequest, in RunIn, argv []string, stdin []byte, timeout time.Duration, maxOut int) (*mcp.CallToolResult, RunOut, error) {
	var out RunOut
	switch {
	case in.Policy != "":
		return nil, out, toolError("policy: a session's policy is given at session_open, for all its runs")
	case in.Net != nil:
		return nil, out, toolError("net: a session's network is chosen at session_open, for all its runs")
	}
	env, err := envList(in.Env)
	if err != nil {
		return nil, out, err
	}
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.release()
	// Report: the session's kbox counts the run's syscalls and appends
	// its serve_run records to the audit log. Its kernel is the
	// session's, so the counts include what background processes did
	// meanwhile.
	req := &serveRequest{Op: "run", Argv: argv, Env: env, Workdir: in.Workdir, TimeoutMs: timeout.Milliseconds(), Report: true}
	if in.Background {
		req.TimeoutMs = in.TimeoutMs
		p, err := s.startBackground(se, req, stdin)
		if err != nil {
			return nil, out, err
		}
		out.Handle, out.Tier = strconv.Itoa(p.pid), "seccomp"
		text := fmt.Sprintf("started in the background: handle %s (process_output, process_wait, process_signal)", out.Handle)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+setupGrace)
	defer cancel()
	stdout, stderr := newHeadTail(maxOut), newHeadTail(maxOut)
	start := time.Now()
	pout, perr := withProgress(ctx, mreq, stdout, stderr)
	a, err := se.live.run(ctx, req, stdin, pout, perr, nil)
	out.DurationMs = time.Since(start).Milliseconds()
	if err != nil {
		return nil, out, err
	}
	if a.Error != "" {
		return nil, out, toolError("kbox: %s", a.Error)
	}
	out.ExitCode, out.TimedOut, out.Tier = a.Status, a.TimedOut, "seccomp"
	if a.Status > 128 && a.Status < 128+65 {
		out.Signal = unix.SignalName(syscall.Signal(a.Status - 128))
	}
	out.Stdout, out.Stderr = stdout.String(), stderr.String()
	out.StdoutLen, out.StderrLen = stdout.total, stderr.total
	out.Truncated = stdout.cut() || stderr.cut()
	lr := &lastRun{at: time.Now(), argv: argv, telemetry: a.telemetry(&out), kernel: a.Kernel}
	s.mu.Lock()
	s.last, se.last = lr, lr
	s.mu.Unlock()
	return runResult(&out, timeout), out, nil
}

// runResult completes out (base64 copies of output that is not UTF-8) and
// returns the tool's text result.
func runResult(out *RunOut, timeout time.Duration) *mcp.CallToolResult {
	if !utf8.ValidString(out.Stdout) {
		out.StdoutBase64 = base64.StdEncoding.EncodeToString([]byte(out.Stdout))
	}
	if !utf8.ValidString(out.Stderr) {
		out.StderrBase64 = base64.StdEncoding.EncodeToString([]byte(out.Stderr))
	}
	text := fmt.Sprintf("exit %d", out.ExitCode)
	if out.TimedOut {
		text += fmt.Sprintf(" (timed out after %v, killed)", timeout)
	} else if out.Signal != "" {
		text += " (" + out.Signal + ")"
	}
	text += fmt.Sprintf(" in %d ms", out.DurationMs)
	if out.Stdout != "" {
		text += "\n--- stdout ---\n" + out.Stdout
	}
	if out.Stderr != "" {
		text += "\n--- stderr ---\n" + out.Stderr
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "no message"
	}
	return s
}

// headTail keeps the first and last max/2 bytes written, and counts all.
type headTail struct {
	max   int
	head  []byte
	tail  []byte // a ring once full
	pos   int
	total int64
}

func newHeadTail(max int) *headTail { return &headTail{max: max} }

func (h *headTail) Write(p []byte) (int, error) {
	n := len(p)
	h.total += int64(n)
	hmax := h.max - h.max/2
	if k := min(hmax-len(h.head), len(p)); k > 0 {
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	tmax := h.max / 2
	if tmax == 0 {
		return n, nil
	}
	if len(p) >= tmax {
		h.tail = append(h.tail[:0], p[len(p)-tmax:]...)
		h.pos = 0
		return n, nil
	}
	for len(p) > 0 {
		if len(h.tail) < tmax {
			k := min(tmax-len(h.tail), len(p))
			h.tail = append(h.tail, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(h.tail[h.pos:], p)
		h.pos = (h.pos + k) % tmax
		p = p[k:]
	}
	return n, nil
}

func (h *headTail) cut() bool { return h.total > int64(len(h.head)+len(h.tail)) }

// String is the output kept: whole, or head, a marker and tail.
func (h *headTail) String() string {
	tail := append(append([]byte{}, h.tail[h.pos:]...), h.tail[:h.pos]...)
	if !h.cut() {
		return string(h.head) + string(tail)
	}
	return fmt.Sprintf("%s\n[... kbox: %d bytes cut ...]\n%s", h.head, h.total-int64(len(h.head)+len(tail)), tail)
}
