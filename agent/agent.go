// Package agent is kbox's Model Context Protocol server (kbox mcp): tools
// that run programs in an image, keep ephemeral sessions of an image
// across calls, read and write a session's files and read the kernel's
// own state (docs/agents.md).
//
// The server boots no kernel itself: LKL boots once per process, so each
// run is a `kbox image` process (--ephemeral on an image, --overlay on a
// session's kept copy-on-write layer) and a session's file calls go to
// one `kbox file --serve` process, stopped before the session's next run.
// A session's calls are serialized; different sessions and image runs go
// in parallel.
package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// Config configures a Server.
type Config struct {
	// Kbox is the kbox binary that runs guests (usually this one).
	Kbox string
	// Image is the image runs use when a call names none ("" for none).
	Image string
	// Audit, when set, is the audit log every run appends to.
	Audit string
	// TmpDir holds the sessions' images ("" for $TMPDIR).
	TmpDir string
	// MaxSessions bounds the sessions open at once (0: 16).
	MaxSessions int
	// Version is reported to clients.
	Version string
}

// Limits of the tools.
const (
	defaultTimeout   = 60 * time.Second
	maxTimeout       = 30 * time.Minute
	defaultMaxOutput = 1 << 20
	maxMaxOutput     = 64 << 20
	// setupGrace is how much longer than its timeout a run may take
	// (boot, write-back) before the server kills kbox itself.
	setupGrace      = 30 * time.Second
	fileCallTimeout = 60 * time.Second
)

// Server holds the sessions.
type Server struct {
	cfg      Config
	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
	last     *lastRun // the server's last run
}

// lastRun is what snapshot and enosys report.
type lastRun struct {
	at        time.Time
	argv      []string
	telemetry *Telemetry
	kernel    json.RawMessage
}

type session struct {
	id   string
	base string
	// baseFile keeps a shared lock on the base while the session lives:
	// no kbox opens it read-write meanwhile.
	baseFile *os.File
	// dir holds the session's kept copy-on-write overlay (kbox image
	// --overlay, cmd/kbox/overlay.go): the base is never written.
	dir     string
	size    int64
	mu      sync.Mutex // one call at a time on the image
	created time.Time
	closed  bool
	last    *lastRun // guarded by Server.mu
	// files is the session's kbox file --serve, started by the first
	// file call and stopped (the image unmounted) before a run.
	files *fileHelper
}

// New makes a Server.
func New(cfg Config) *Server {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 16
	}
	return &Server{cfg: cfg, sessions: map[string]*session{}}
}

// Close removes every session's image.
func (s *Server) Close() {
	s.mu.Lock()
	ss := s.sessions
	s.sessions, s.closed = map[string]*session{}, true
	s.mu.Unlock()
	for _, se := range ss {
		se.mu.Lock()
		se.closed = true
		se.stopFiles()
		os.RemoveAll(se.dir)
		se.baseFile.Close()
		se.mu.Unlock()
	}
}

// MCP returns an MCP server with the tools, serving s.
func (s *Server) MCP() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "kbox", Version: s.cfg.Version}, &mcp.ServerOptions{
		Instructions: "kbox runs Linux programs against an in-process Linux kernel booted from an ext4 image, without root, container or VM. " +
			"`run` on an image is ephemeral (the image never changes); open a session for state kept across calls.",
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "run", Description: "Run a program in the image (or a session's image) under kbox. " +
		"A non-zero exit is a normal result; isError only means kbox itself failed."}, s.run)
	mcp.AddTool(srv, &mcp.Tool{Name: "session_open", Description: "Open a session on an image: a private copy-on-write layer over it, kept across run, read_file, write_file, list_dir and stat calls; the image itself is never written."}, s.sessionOpen)
	mcp.AddTool(srv, &mcp.Tool{Name: "session_close", Description: "Close a session and delete its image, saving it first to snapshot when given."}, s.sessionClose)
	mcp.AddTool(srv, &mcp.Tool{Name: "read_file", Description: "Read a file of a session's image through the kernel, without a guest process. Content is base64 (text too when it is UTF-8)."}, s.readFile)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_file", Description: "Write (create or replace) a file in a session's image."}, s.writeFile)
	mcp.AddTool(srv, &mcp.Tool{Name: "list_dir", Description: "List a directory of a session's image with each entry's type, mode and size."}, s.listDir)
	mcp.AddTool(srv, &mcp.Tool{Name: "stat", Description: "Metadata of a path in a session's image (symlinks not followed)."}, s.stat)
	mcp.AddTool(srv, &mcp.Tool{Name: "snapshot", Description: "The observatory's snapshot of the last run (of the session, or of the server): its syscalls by family and disposition and the in-process kernel's telemetry (memory, context switches, page faults, softirqs) as the run ended."}, s.snapshot)
	mcp.AddTool(srv, &mcp.Tool{Name: "enosys", Description: "The syscalls the last run (of the session, or of the server) got ENOSYS for, by name: what kbox does not implement yet."}, s.enosys)
	mcp.AddTool(srv, &mcp.Tool{Name: "kernel_read", Description: "Read a file of the in-process kernel's own /proc (meminfo, stat, vmstat, slabinfo, ...) or /sys, read-only."}, s.kernelRead)
	return srv
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

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
	Image          string            `json:"image,omitempty" jsonschema:"path of an ext4 image on the host: an ephemeral run on it"`
	Session        string            `json:"session,omitempty" jsonschema:"a session id from session_open: the run's writes stay in the session"`
	Policy         string            `json:"policy,omitempty" jsonschema:"a policy for the run (kbox image --policy, docs/agents.md): a host path of a TOML file, or the TOML itself (text with a newline)"`
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

// toolError is a failure of the call itself: the client sees isError.
func toolError(format string, a ...any) error { return fmt.Errorf(format, a...) }

func (s *Server) session(id string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[id]
	if se == nil {
		return nil, toolError("no session %q (open one with session_open)", id)
	}
	return se, nil
}

// lockSession returns the session, locked for one call.
func (s *Server) lockSession(id string) (*session, error) {
	se, err := s.session(id)
	if err != nil {
		return nil, err
	}
	se.mu.Lock()
	if se.closed {
		se.mu.Unlock()
		return nil, toolError("session %q was closed", id)
	}
	return se, nil
}

func (s *Server) imageOf(img string) (string, error) {
	if img == "" {
		img = s.cfg.Image
	}
	if img == "" {
		return "", toolError("no image: give image (or session), or start kbox mcp with --image")
	}
	fi, err := os.Stat(img)
	if err != nil {
		return "", toolError("image %s: %v", img, err)
	}
	if !fi.Mode().IsRegular() {
		return "", toolError("image %s is not a regular file", img)
	}
	return img, nil
}

func (s *Server) run(ctx context.Context, _ *mcp.CallToolRequest, in RunIn) (*mcp.CallToolResult, RunOut, error) {
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
	// An agent's tool calls are untrusted code: the seccomp tier, whose
	// guest is a process of its own, never auto's in-process tiers, which
	// cannot confine a program that attacks kbox (docs/security.md).
	args := []string{"image", "--syscall-mode=seccomp"}
	var se *session
	if in.Session != "" {
		var err error
		if se, err = s.lockSession(in.Session); err != nil {
			return nil, out, err
		}
		defer se.mu.Unlock()
		// The run's kernel needs the image to itself.
		if err := se.stopFiles(); err != nil {
			return nil, out, err
		}
		args = append(args, "-S", se.base, "--overlay", se.dir)
	} else {
		img, err := s.imageOf(in.Image)
		if err != nil {
			return nil, out, err
		}
		args = append(args, "-S", img, "--ephemeral")
	}
	repDir, err := os.MkdirTemp(s.cfg.TmpDir, "kbox-run-")
	if err != nil {
		return nil, out, err
	}
	defer os.RemoveAll(repDir)
	rep := filepath.Join(repDir, "report.json")
	args = append(args, "--report", rep, "--timeout", timeout.String())
	if in.Policy != "" {
		// Inline TOML has a newline; a path has none. A bad policy
		// refuses the whole call.
		file := in.Policy
		if strings.Contains(in.Policy, "\n") {
			file = filepath.Join(repDir, "policy.toml")
			if err := os.WriteFile(file, []byte(in.Policy), 0o600); err != nil {
				return nil, out, err
			}
		}
		if _, err := policy.Load(file); err != nil {
			return nil, out, toolError("%v", err)
		}
		args = append(args, "--policy", file)
	}
	if in.Workdir != "" {
		args = append(args, "-w", in.Workdir)
	}
	if s.cfg.Audit != "" {
		args = append(args, "--audit", s.cfg.Audit)
	}
	names := make([]string, 0, len(in.Env))
	for k := range in.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(in.Env[k], 0) {
			return nil, out, toolError("bad env name %q", k)
		}
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		args = append(args, "--env", k+"="+in.Env[k])
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
	cmd.Stdout, cmd.Stderr = stdout, stderr
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
	if !utf8.ValidString(out.Stdout) {
		out.StdoutBase64 = base64.StdEncoding.EncodeToString([]byte(out.Stdout))
	}
	if !utf8.ValidString(out.Stderr) {
		out.StderrBase64 = base64.StdEncoding.EncodeToString([]byte(out.Stderr))
	}
	out.StdoutLen, out.StderrLen = stdout.total, stderr.total
	out.Truncated = stdout.cut() || stderr.cut()
	out.Telemetry = r.Telemetry
	if out.Telemetry != nil {
		out.Telemetry.GuestPeakKB, out.Telemetry.KernelMemKB = r.GuestMaxRSS, r.KernelMemPeakKB
	}
	lr := &lastRun{at: time.Now(), argv: argv, telemetry: out.Telemetry, kernel: r.Kernel}
	s.mu.Lock()
	s.last = lr
	if se != nil {
		se.last = lr
	}
	s.mu.Unlock()
	out.AuditHead = r.AuditHead
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
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
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

// ---- sessions

// SessionOpenIn is session_open's input.
type SessionOpenIn struct {
	Image string `json:"image,omitempty" jsonschema:"path of an ext4 image on the host (default: the server's --image); it is copied, never changed"`
}

// SessionOpenOut is session_open's result.
type SessionOpenOut struct {
	Session string  `json:"session"`
	Image   string  `json:"image"`
	Bytes   int64   `json:"bytes" jsonschema:"the image's size"`
	OpenMs  float64 `json:"open_ms"`
}

func (s *Server) sessionOpen(_ context.Context, _ *mcp.CallToolRequest, in SessionOpenIn) (*mcp.CallToolResult, SessionOpenOut, error) {
	var out SessionOpenOut
	img, err := s.imageOf(in.Image)
	if err != nil {
		return nil, out, err
	}
	s.mu.Lock()
	n, closed := len(s.sessions), s.closed
	s.mu.Unlock()
	if closed {
		return nil, out, toolError("the server is closing")
	}
	if n >= s.cfg.MaxSessions {
		return nil, out, toolError("%d sessions are open, the limit: close one first", n)
	}
	start := time.Now()
	f, err := os.Open(img)
	if err != nil {
		return nil, out, toolError("image: %v", err)
	}
	// A shared lock for the session's life: no kbox writes the image
	// meanwhile, any number of sessions and ephemeral runs share it.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, out, toolError("image %s is open read-write by a kbox: %v", img, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, out, err
	}
	dir, err := os.MkdirTemp(s.cfg.TmpDir, "kbox-session-")
	if err != nil {
		f.Close()
		return nil, out, err
	}
	se := &session{id: newID(), base: img, baseFile: f, dir: dir, size: fi.Size(), created: time.Now()}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		os.RemoveAll(dir)
		f.Close()
		return nil, out, toolError("the server is closing")
	}
	s.sessions[se.id] = se
	s.mu.Unlock()
	out = SessionOpenOut{Session: se.id, Image: img, Bytes: se.size, OpenMs: float64(time.Since(start).Microseconds()) / 1000}
	return nil, out, nil
}

// SessionCloseIn is session_close's input.
type SessionCloseIn struct {
	Session  string `json:"session"`
	Snapshot string `json:"snapshot,omitempty" jsonschema:"save the session's image to this host path first (a new file)"`
}

// SessionCloseOut is session_close's result.
type SessionCloseOut struct {
	Closed   bool   `json:"closed"`
	Snapshot string `json:"snapshot,omitempty"`
}

func (s *Server) sessionClose(_ context.Context, _ *mcp.CallToolRequest, in SessionCloseIn) (*mcp.CallToolResult, SessionCloseOut, error) {
	var out SessionCloseOut
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.mu.Unlock()
	if err := se.stopFiles(); err != nil {
		return nil, out, err
	}
	if in.Snapshot != "" {
		if !filepath.IsAbs(in.Snapshot) {
			return nil, out, toolError("snapshot %q: want an absolute host path", in.Snapshot)
		}
		if _, err := os.Lstat(in.Snapshot); err == nil {
			return nil, out, toolError("snapshot %s exists already", in.Snapshot)
		}
		if err := se.saveImage(in.Snapshot); err != nil {
			os.Remove(in.Snapshot)
			return nil, out, toolError("snapshot: %v", err)
		}
		out.Snapshot = in.Snapshot
	}
	s.mu.Lock()
	delete(s.sessions, se.id)
	s.mu.Unlock()
	se.closed = true
	os.RemoveAll(se.dir)
	se.baseFile.Close()
	out.Closed = true
	return nil, out, nil
}

// ---- files

// fileRequest and fileAnswer are kbox file's (cmd/kbox/file.go).
type fileRequest struct {
	Op     string  `json:"op"`
	Path   string  `json:"path"`
	Offset int64   `json:"offset,omitempty"`
	Limit  int64   `json:"limit,omitempty"`
	Data   string  `json:"data,omitempty"`
	Mode   *uint32 `json:"mode,omitempty"`
	Mkdirs bool    `json:"mkdirs,omitempty"`
}

// FileStat is one file's metadata.
type FileStat struct {
	Path    string `json:"path"`
	Type    string `json:"type" jsonschema:"file, dir, symlink, fifo, socket, char, block"`
	Mode    string `json:"mode" jsonschema:"permission bits, octal"`
	Size    int64  `json:"size"`
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
	Nlink   uint32 `json:"nlink"`
	MtimeNs int64  `json:"mtime_ns"`
	Ino     uint64 `json:"ino"`
}

type fileAnswer struct {
	Error   string     `json:"error"`
	Errno   string     `json:"errno"`
	Data    string     `json:"data"`
	Size    int64      `json:"size"`
	EOF     bool       `json:"eof"`
	Written int64      `json:"written"`
	Stat    *FileStat  `json:"stat"`
	Entries []FileStat `json:"entries"`
	Cut     bool       `json:"cut"`
}

// fileCall runs kbox file on image.
func (s *Server) fileCall(ctx context.Context, image string, req fileRequest) (*fileAnswer, error) {
	if !strings.HasPrefix(req.Path, "/") {
		return nil, toolError("path %q must be absolute (a path in the image)", req.Path)
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(ctx, fileCallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cfg.Kbox, "file", image)
	cmd.Stdin = bytes.NewReader(body)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, toolError("kbox file: %v: %s", err, lastLine(stderr.String()))
	}
	var a fileAnswer
	if err := json.Unmarshal(stdout.Bytes(), &a); err != nil {
		return nil, toolError("kbox file: bad answer: %v", err)
	}
	return fileResult(req, &a)
}

// fileResult turns an answer's error into the tool's.
func fileResult(req fileRequest, a *fileAnswer) (*fileAnswer, error) {
	if a.Error != "" {
		msg := fmt.Sprintf("%s %s: %s", req.Op, req.Path, a.Error)
		if a.Errno != "" {
			msg += " (" + a.Errno + ")"
		}
		return nil, errors.New(msg)
	}
	return a, nil
}

// ReadFileIn is read_file's input.
type ReadFileIn struct {
	Session string `json:"session"`
	Path    string `json:"path" jsonschema:"absolute path in the session's image"`
	Offset  int64  `json:"offset,omitempty"`
	Limit   int64  `json:"limit,omitempty" jsonschema:"at most this many bytes (default and maximum 16 MiB)"`
}

// ReadFileOut is read_file's result.
type ReadFileOut struct {
	Path          string `json:"path"`
	ContentBase64 string `json:"content_base64"`
	Text          string `json:"text,omitempty" jsonschema:"the content, when it is valid UTF-8"`
	Bytes         int    `json:"bytes" jsonschema:"bytes returned"`
	Size          int64  `json:"size" jsonschema:"the file's size"`
	EOF           bool   `json:"eof"`
}

func (s *Server) readFile(ctx context.Context, _ *mcp.CallToolRequest, in ReadFileIn) (*mcp.CallToolResult, ReadFileOut, error) {
	var out ReadFileOut
	if in.Offset < 0 || in.Limit < 0 {
		return nil, out, toolError("offset and limit must not be negative")
	}
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.mu.Unlock()
	a, err := s.sessionFileCall(ctx, se, fileRequest{Op: "read", Path: in.Path, Offset: in.Offset, Limit: in.Limit})
	if err != nil {
		return nil, out, err
	}
	data, _ := base64.StdEncoding.DecodeString(a.Data)
	out = ReadFileOut{Path: in.Path, ContentBase64: a.Data, Bytes: len(data), Size: a.Size, EOF: a.EOF}
	text := fmt.Sprintf("%s: %d bytes (binary; content_base64 has them)", in.Path, len(data))
	if utf8.Valid(data) {
		out.Text = string(data)
		text = out.Text
	}
	// The text rendering is the content itself, not the structured
	// result again: that would carry the bytes four times.
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// WriteFileIn is write_file's input.
type WriteFileIn struct {
	Session       string `json:"session"`
	Path          string `json:"path" jsonschema:"absolute path in the session's image"`
	Content       string `json:"content,omitempty" jsonschema:"the new content as text (give content or content_base64)"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the new content, base64"`
	Mode          string `json:"mode,omitempty" jsonschema:"permission bits in octal, e.g. 0755 (default 0644)"`
	Mkdirs        bool   `json:"mkdirs,omitempty" jsonschema:"create missing parent directories"`
}

// WriteFileOut is write_file's result.
type WriteFileOut struct {
	Path    string `json:"path"`
	Written int64  `json:"written"`
}

func (s *Server) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in WriteFileIn) (*mcp.CallToolResult, WriteFileOut, error) {
	var out WriteFileOut
	data := in.ContentBase64
	switch {
	case in.Content != "" && in.ContentBase64 != "":
		return nil, out, toolError("give content or content_base64, not both")
	case in.ContentBase64 != "":
		if _, err := base64.StdEncoding.DecodeString(in.ContentBase64); err != nil {
			return nil, out, toolError("content_base64 is not base64: %v", err)
		}
	default:
		data = base64.StdEncoding.EncodeToString([]byte(in.Content))
	}
	var mode *uint32
	if in.Mode != "" {
		m, err := strconv.ParseUint(in.Mode, 8, 32)
		if err != nil || m > 0o7777 {
			return nil, out, toolError("mode %q: want octal permission bits such as 0644", in.Mode)
		}
		mode = new(uint32(m))
	}
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.mu.Unlock()
	a, err := s.sessionFileCall(ctx, se, fileRequest{Op: "write", Path: in.Path, Data: data, Mode: mode, Mkdirs: in.Mkdirs})
	if err != nil {
		return nil, out, err
	}
	return nil, WriteFileOut{Path: in.Path, Written: a.Written}, nil
}

// ListDirIn is list_dir's input.
type ListDirIn struct {
	Session string `json:"session"`
	Path    string `json:"path" jsonschema:"absolute path of a directory in the session's image"`
	Limit   int64  `json:"limit,omitempty" jsonschema:"at most this many entries (default and maximum 10000)"`
}

// ListDirOut is list_dir's result.
type ListDirOut struct {
	Path    string     `json:"path"`
	Entries []FileStat `json:"entries"`
	Cut     bool       `json:"cut" jsonschema:"more entries than the limit"`
}

func (s *Server) listDir(ctx context.Context, _ *mcp.CallToolRequest, in ListDirIn) (*mcp.CallToolResult, ListDirOut, error) {
	var out ListDirOut
	if in.Limit < 0 {
		return nil, out, toolError("limit must not be negative")
	}
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, out, err
	}
	defer se.mu.Unlock()
	a, err := s.sessionFileCall(ctx, se, fileRequest{Op: "list", Path: in.Path, Limit: in.Limit})
	if err != nil {
		return nil, out, err
	}
	out = ListDirOut{Path: in.Path, Entries: a.Entries, Cut: a.Cut}
	if out.Entries == nil {
		out.Entries = []FileStat{}
	}
	return nil, out, nil
}

// StatIn is stat's input.
type StatIn struct {
	Session string `json:"session"`
	Path    string `json:"path" jsonschema:"absolute path in the session's image"`
}

func (s *Server) stat(ctx context.Context, _ *mcp.CallToolRequest, in StatIn) (*mcp.CallToolResult, FileStat, error) {
	se, err := s.lockSession(in.Session)
	if err != nil {
		return nil, FileStat{}, err
	}
	defer se.mu.Unlock()
	a, err := s.sessionFileCall(ctx, se, fileRequest{Op: "stat", Path: in.Path})
	if err != nil {
		return nil, FileStat{}, err
	}
	if a.Stat == nil {
		return nil, FileStat{}, toolError("kbox file: no stat in its answer")
	}
	return nil, *a.Stat, nil
}

// KernelReadIn is kernel_read's input.
type KernelReadIn struct {
	Path    string `json:"path" jsonschema:"a file of the kernel's /proc or /sys, e.g. /proc/meminfo, /proc/vmstat, /proc/slabinfo, /sys/block/vda/size"`
	Session string `json:"session,omitempty" jsonschema:"boot the kernel on this session's image (default: the server's image)"`
	Image   string `json:"image,omitempty" jsonschema:"boot the kernel on this image"`
}

// KernelReadOut is kernel_read's result.
type KernelReadOut struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

func (s *Server) kernelRead(ctx context.Context, _ *mcp.CallToolRequest, in KernelReadIn) (*mcp.CallToolResult, KernelReadOut, error) {
	var out KernelReadOut
	var img string
	if in.Session != "" {
		se, err := s.lockSession(in.Session)
		if err != nil {
			return nil, out, err
		}
		defer se.mu.Unlock()
		a, err := s.sessionFileCall(ctx, se, fileRequest{Op: "kernel_read", Path: in.Path})
		if err != nil {
			return nil, out, err
		}
		data, _ := base64.StdEncoding.DecodeString(a.Data)
		return nil, KernelReadOut{Path: in.Path, Text: string(data)}, nil
	} else {
		var err error
		if img, err = s.imageOf(in.Image); err != nil {
			return nil, out, err
		}
	}
	a, err := s.fileCall(ctx, img, fileRequest{Op: "kernel_read", Path: in.Path})
	if err != nil {
		return nil, out, err
	}
	data, _ := base64.StdEncoding.DecodeString(a.Data)
	return nil, KernelReadOut{Path: in.Path, Text: string(data)}, nil
}

// ---- the last run's observations

// LastRunIn is snapshot's and enosys's input.
type LastRunIn struct {
	Session string `json:"session,omitempty" jsonschema:"the session whose last run to report (default: the server's last run)"`
}

// SnapshotOut is snapshot's result.
type SnapshotOut struct {
	Argv      []string       `json:"argv"`
	EndedAt   string         `json:"ended_at"`
	Telemetry *Telemetry     `json:"telemetry"`
	Kernel    map[string]any `json:"kernel,omitempty" jsonschema:"the observatory's kernel snapshot (GET /api/snapshot, field kernel) as the run ended"`
}

// ENOSYSOut is enosys's result.
type ENOSYSOut struct {
	Argv   []string          `json:"argv"`
	ENOSYS map[string]uint64 `json:"enosys" jsonschema:"syscall name -> times answered ENOSYS"`
}

func (s *Server) lastRun(sid string) (*lastRun, error) {
	if sid != "" {
		if _, err := s.session(sid); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lr := s.last
	if sid != "" {
		lr = s.sessions[sid].last
	}
	if lr == nil {
		return nil, toolError("no run yet")
	}
	return lr, nil
}

func (s *Server) snapshot(_ context.Context, _ *mcp.CallToolRequest, in LastRunIn) (*mcp.CallToolResult, SnapshotOut, error) {
	lr, err := s.lastRun(in.Session)
	if err != nil {
		return nil, SnapshotOut{}, err
	}
	out := SnapshotOut{Argv: lr.argv, EndedAt: lr.at.UTC().Format(time.RFC3339Nano), Telemetry: lr.telemetry}
	if len(lr.kernel) > 0 {
		json.Unmarshal(lr.kernel, &out.Kernel)
	}
	return nil, out, nil
}

func (s *Server) enosys(_ context.Context, _ *mcp.CallToolRequest, in LastRunIn) (*mcp.CallToolResult, ENOSYSOut, error) {
	lr, err := s.lastRun(in.Session)
	if err != nil {
		return nil, ENOSYSOut{}, err
	}
	out := ENOSYSOut{Argv: lr.argv, ENOSYS: map[string]uint64{}}
	if lr.telemetry != nil && lr.telemetry.ENOSYS != nil {
		out.ENOSYS = lr.telemetry.ENOSYS
	}
	return nil, out, nil
}

// ---- a session's file helper

// fileHelper is a `kbox file --serve` process on a session's image.
type fileHelper struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	dec    *json.Decoder
	stderr *bytes.Buffer
	done   chan error
}

// sessionFileCall serves req through the session's file helper, starting
// it if needed. The caller holds se.mu.
func (s *Server) sessionFileCall(ctx context.Context, se *session, req fileRequest) (*fileAnswer, error) {
	if !strings.HasPrefix(req.Path, "/") {
		return nil, toolError("path %q must be absolute (a path in the image)", req.Path)
	}
	if se.files == nil {
		h, err := s.startFiles(se)
		if err != nil {
			return nil, err
		}
		se.files = h
	}
	a, err := se.files.call(ctx, req)
	if err != nil {
		se.files.kill()
		se.files = nil
		return nil, err
	}
	return fileResult(req, a)
}

func (s *Server) startFiles(se *session) (*fileHelper, error) {
	cmd := exec.Command(s.cfg.Kbox, "file", "--serve", "--overlay", se.dir, se.base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	h := &fileHelper{cmd: cmd, in: in, dec: json.NewDecoder(out), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = h.stderr
	if err := cmd.Start(); err != nil {
		return nil, toolError("kbox file --serve: %v", err)
	}
	var ready struct{ Ready bool }
	if err := h.dec.Decode(&ready); err != nil || !ready.Ready {
		in.Close()
		cmd.Wait()
		return nil, toolError("kbox file --serve did not start: %s", lastLine(h.stderr.String()))
	}
	return h, nil
}

// call sends one request and waits for its answer, or for ctx.
func (h *fileHelper) call(ctx context.Context, req fileRequest) (*fileAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, fileCallTimeout)
	defer cancel()
	res := make(chan error, 1)
	var a fileAnswer
	go func() {
		b, _ := json.Marshal(req)
		if _, err := h.in.Write(append(b, '\n')); err != nil {
			res <- err
			return
		}
		res <- h.dec.Decode(&a)
	}()
	select {
	case err := <-res:
		if err != nil {
			return nil, toolError("kbox file --serve: %v: %s", err, lastLine(h.stderr.String()))
		}
		return &a, nil
	case <-ctx.Done():
		return nil, toolError("kbox file --serve: %v", ctx.Err())
	}
}

func (h *fileHelper) kill() {
	h.cmd.Process.Kill()
	h.in.Close()
	h.cmd.Wait()
}

// stopFiles ends the session's file helper: stdin closes, it unmounts the
// image and exits. An unmount that failed is an error: writes may be lost.
func (se *session) stopFiles() error {
	h := se.files
	if h == nil {
		return nil
	}
	se.files = nil
	h.in.Close()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return toolError("the session's file helper failed to unmount its image: %v: %s", err, lastLine(h.stderr.String()))
		}
		return nil
	case <-time.After(fileCallTimeout):
		h.cmd.Process.Kill()
		<-done
		return toolError("the session's file helper did not unmount its image in %v: killed", fileCallTimeout)
	}
}

// saveImage writes the session's image to out, a new file: a sparse copy
// of the base with the overlay's written blocks over it. The session's
// kernels must all have stopped.
func (se *session) saveImage(out string) error {
	if _, err := os.Stat(filepath.Join(se.dir, "busy")); err == nil {
		return errors.New("the session's image is incomplete: a kbox on it was killed")
	}
	var ranges [][2]int64
	bits, err := os.ReadFile(filepath.Join(se.dir, "dirty"))
	switch {
	case err == nil:
		if len(bits) != lkl.COWMapLen(se.size) {
			return fmt.Errorf("the session's block map has %d bytes, want %d", len(bits), lkl.COWMapLen(se.size))
		}
		ranges = lkl.DirtyRanges(bits, se.size)
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if err := SparseCopy(se.baseFile, out); err != nil {
		return err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if len(ranges) > 0 {
		ov, err := os.Open(filepath.Join(se.dir, "overlay"))
		if err != nil {
			return err
		}
		defer ov.Close()
		if err := CopyRanges(ov, f, ranges); err != nil {
			return err
		}
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	return f.Sync()
}
