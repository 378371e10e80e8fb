package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// ---- a session's background programs

// A `run` with background: true in a session returns once the program
// has started, with its pid as a handle; process_output, process_wait
// and process_signal act on it, process_list lists the session's
// processes.

// streamMax is how much of a background program's stdout (and stderr)
// is kept: the oldest bytes go first.
const streamMax = 8 << 20

// stream is one output stream of a background program, read by offset.
type stream struct {
	mu      sync.Mutex
	buf     []byte
	base    int64         // the offset of buf[0]: what was dropped before it
	changed chan struct{} // closed and replaced at each write
}

func newStream() *stream { return &stream{changed: make(chan struct{})} }

func (s *stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	if over := len(s.buf) - streamMax; over > 0 {
		s.buf = append(s.buf[:0], s.buf[over:]...)
		s.base += int64(over)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return len(p), nil
}

// read returns up to limit bytes from offset, the next offset, whether
// bytes before offset were dropped, and a channel closed at the next
// write.
func (s *stream) read(off int64, limit int) ([]byte, int64, bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dropped := off < s.base
	off = max(off, s.base)
	i := min(int(off-s.base), len(s.buf))
	j := min(i+limit, len(s.buf))
	return append([]byte(nil), s.buf[i:j]...), s.base + int64(j), dropped, s.changed
}

// bgProc is a background program of a session.
type bgProc struct {
	pid      int
	argv     []string
	out, err *stream
	done     chan struct{}
	ans      *serveAnswer // once done
	fail     error        // once done: kbox could not run it
}

func (p *bgProc) status() (running bool, exit int, sig string, timedOut bool) {
	select {
	case <-p.done:
	default:
		return true, 0, "", false
	}
	if p.ans == nil {
		return false, -1, "", false
	}
	if p.ans.Status > 128 && p.ans.Status < 128+65 {
		sig = unix.SignalName(syscall.Signal(p.ans.Status - 128))
	}
	return false, p.ans.Status, sig, p.ans.TimedOut
}

// startBackground starts req in the session and returns once it runs.
// The caller holds se.mu.
func (s *Server) startBackground(se *session, req *serveRequest, stdin []byte) (*bgProc, error) {
	p := &bgProc{argv: req.Argv, out: newStream(), err: newStream(), done: make(chan struct{})}
	started := make(chan int, 1)
	live := se.live
	go func() {
		defer close(p.done)
		a, err := live.run(context.Background(), req, stdin, p.out, p.err, func(pid int) { started <- pid })
		p.ans, p.fail = a, err
		if err == nil && a.Error != "" {
			p.fail = toolError("kbox: %s", a.Error)
		}
	}()
	select {
	case pid := <-started:
		p.pid = pid
	case <-p.done:
		if p.fail == nil {
			p.fail = toolError("the program ended before it started")
		}
		return nil, p.fail
	}
	s.mu.Lock()
	if se.procs == nil {
		se.procs = map[int]*bgProc{}
	}
	se.procs[p.pid] = p
	s.mu.Unlock()
	return p, nil
}

// logHandle names the session's log in process_output: what runs'
// programs wrote to a run's stdout or stderr after the run returned
// (background processes it left), both streams in one.
const logHandle = "log"

// procOf finds a background program of session sid by handle; the
// session's log is one that never ends.
func (s *Server) procOf(sid, handle string) (*session, *bgProc, error) {
	se, err := s.lockSession(sid)
	if err != nil {
		return nil, nil, err
	}
	se.release()
	if handle == logHandle {
		return se, &bgProc{out: se.live.bg, err: newStream(), done: make(chan struct{})}, nil
	}
	pid, err := strconv.Atoi(handle)
	s.mu.Lock()
	p := se.procs[pid]
	s.mu.Unlock()
	if err != nil || p == nil {
		return nil, nil, toolError("no background program %q in session %s (a handle is what run with background: true returned)", handle, sid)
	}
	return se, p, nil
}

// ProcessOutputIn is process_output's input.
type ProcessOutputIn struct {
	Session      string `json:"session"`
	Handle       string `json:"handle" jsonschema:"what run with background: true returned, or log: what runs' programs wrote to a run's output after the run returned (in stdout)"`
	StdoutOffset int64  `json:"stdout_offset,omitempty" jsonschema:"read stdout from this byte (the last call's stdout_next)"`
	StderrOffset int64  `json:"stderr_offset,omitempty" jsonschema:"read stderr from this byte (the last call's stderr_next)"`
	MaxBytes     int    `json:"max_bytes,omitempty" jsonschema:"at most this many bytes of each stream (default 64 KiB, at most 1 MiB)"`
	WaitMs       int64  `json:"wait_ms,omitempty" jsonschema:"wait up to this long (at most 30000) for output past the offsets, or the end"`
}

// ProcessOutputOut is its result.
type ProcessOutputOut struct {
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	StdoutNext int64  `json:"stdout_next"`
	StderrNext int64  `json:"stderr_next"`
	Dropped    bool   `json:"dropped" jsonschema:"output before the offsets asked for was dropped (8 MiB of each stream is kept)"`
	Running    bool   `json:"running"`
	ExitCode   int    `json:"exit_code,omitempty"`
	Signal     string `json:"signal,omitempty"`
}

func (s *Server) processOutput(ctx context.Context, _ *mcp.CallToolRequest, in ProcessOutputIn) (*mcp.CallToolResult, ProcessOutputOut, error) {
	var out ProcessOutputOut
	limit := 64 << 10
	switch {
	case in.MaxBytes < 0 || in.MaxBytes > 1<<20:
		return nil, out, toolError("max_bytes must be from 1 to %d", 1<<20)
	case in.MaxBytes > 0:
		limit = in.MaxBytes
	}
	if in.WaitMs < 0 || in.WaitMs > 30000 || in.StdoutOffset < 0 || in.StderrOffset < 0 {
		return nil, out, toolError("wait_ms must be from 0 to 30000, and offsets not negative")
	}
	_, p, err := s.procOf(in.Session, in.Handle)
	if err != nil {
		return nil, out, err
	}
	deadline := time.NewTimer(time.Duration(in.WaitMs) * time.Millisecond)
	defer deadline.Stop()
	for {
		o, on, d1, oc := p.out.read(in.StdoutOffset, limit)
		e, en, d2, ec := p.err.read(in.StderrOffset, limit)
		running, code, sig, _ := p.status()
		if len(o) > 0 || len(e) > 0 || !running || in.WaitMs == 0 {
			out = ProcessOutputOut{Stdout: string(o), Stderr: string(e), StdoutNext: on, StderrNext: en,
				Dropped: d1 || d2, Running: running, ExitCode: code, Signal: sig}
			return nil, out, nil
		}
		select {
		case <-oc:
		case <-ec:
		case <-p.done:
		case <-deadline.C:
			in.WaitMs = 0
		case <-ctx.Done():
			return nil, out, ctx.Err()
		}
	}
}

// ProcessWaitIn is process_wait's input.
type ProcessWaitIn struct {
	Session   string `json:"session"`
	Handle    string `json:"handle"`
	TimeoutMs int64  `json:"timeout_ms,omitempty" jsonschema:"wait at most this long (default 60000, at most 1800000); running is then true"`
}

// ProcessWaitOut is its result.
type ProcessWaitOut struct {
	Running  bool   `json:"running"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out" jsonschema:"the run's own timeout_ms killed it"`
	// Once it ended: its syscalls while it ran (the session kernel's
	// counts, so what other processes did meanwhile too) and the hash
	// of its serve_run_end audit record.
	Telemetry *Telemetry `json:"telemetry,omitempty"`
	AuditHead string     `json:"audit_head,omitempty"`
}

func (s *Server) processWait(ctx context.Context, _ *mcp.CallToolRequest, in ProcessWaitIn) (*mcp.CallToolResult, ProcessWaitOut, error) {
	var out ProcessWaitOut
	wait := defaultTimeout
	switch {
	case in.TimeoutMs < 0 || in.TimeoutMs > maxTimeout.Milliseconds():
		return nil, out, toolError("timeout_ms must be from 0 to %d", maxTimeout.Milliseconds())
	case in.TimeoutMs > 0:
		wait = time.Duration(in.TimeoutMs) * time.Millisecond
	}
	if in.Handle == logHandle {
		return nil, out, toolError("the session's log is no program")
	}
	_, p, err := s.procOf(in.Session, in.Handle)
	if err != nil {
		return nil, out, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-ctx.Done():
		return nil, out, ctx.Err()
	}
	if p.fail != nil {
		return nil, out, p.fail
	}
	out.Running, out.ExitCode, out.Signal, out.TimedOut = p.status()
	if !out.Running && p.ans != nil {
		var ro RunOut
		out.Telemetry = p.ans.telemetry(&ro)
		out.AuditHead = ro.AuditHead
	}
	return nil, out, nil
}

// ProcessSignalIn is process_signal's input.
type ProcessSignalIn struct {
	Session string `json:"session"`
	Handle  string `json:"handle"`
	Signal  string `json:"signal,omitempty" jsonschema:"a signal name (TERM, SIGKILL, INT...) or number (default TERM); it goes to the program's process group"`
}

// ProcessSignalOut is its result.
type ProcessSignalOut struct {
	Sent bool `json:"sent"`
}

func (s *Server) processSignal(ctx context.Context, _ *mcp.CallToolRequest, in ProcessSignalIn) (*mcp.CallToolResult, ProcessSignalOut, error) {
	var out ProcessSignalOut
	sig, err := parseSignal(in.Signal)
	if err != nil {
		return nil, out, err
	}
	if in.Handle == logHandle {
		return nil, out, toolError("the session's log is no program")
	}
	se, p, err := s.procOf(in.Session, in.Handle)
	if err != nil {
		return nil, out, err
	}
	if running, _, _, _ := p.status(); !running {
		return nil, out, toolError("program %s has exited", in.Handle)
	}
	a, err := se.live.keptCall(ctx, &serveRequest{Op: "signal", Pid: p.pid, Signal: int(sig)})
	if err != nil {
		return nil, out, err
	}
	if a.Error != "" {
		return nil, out, toolError("%s", a.Error)
	}
	out.Sent = true
	return nil, out, nil
}

func parseSignal(v string) (unix.Signal, error) {
	if v == "" {
		return unix.SIGTERM, nil
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 1 || n > 64 {
			return 0, toolError("signal %d: want 1 to 64", n)
		}
		return unix.Signal(n), nil
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, toolError("unknown signal %q", v)
}

// ProcessListIn is process_list's input.
type ProcessListIn struct {
	Session string `json:"session"`
}

// ProcessListOut is its result.
type ProcessListOut struct {
	Processes []GuestProc `json:"processes"`
}

func (s *Server) processList(ctx context.Context, _ *mcp.CallToolRequest, in ProcessListIn) (*mcp.CallToolResult, ProcessListOut, error) {
	var out ProcessListOut
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.release()
	a, err := se.live.keptCall(ctx, &serveRequest{Op: "ps"})
	if err != nil {
		return nil, out, err
	}
	if a.Error != "" {
		return nil, out, toolError("%s", a.Error)
	}
	out.Processes = a.Procs
	if out.Processes == nil {
		out.Processes = []GuestProc{}
	}
	var b strings.Builder
	for _, p := range out.Processes {
		fmt.Fprintf(&b, "%d %d %s\n", p.Pid, p.PPid, p.Args)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
}
