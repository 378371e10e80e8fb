// Package agent is kbox's Model Context Protocol server (kbox mcp): tools
// that run programs in an image, keep ephemeral sessions of an image
// across calls, read and write a session's files and read the kernel's
// own state (docs/agents.md).
//
// The server boots no kernel itself: LKL boots once per process, so a
// run on an image is a `kbox image --ephemeral` process, and a session is
// one `kbox image --overlay --serve` process, its live kernel, which runs
// every program and file call of the session (live.go). A session's calls
// are serialized; different sessions and image runs go in parallel.
//
// The server's Config is the operator's: the images a call may name, the
// policy and network every run gets, where snapshots go. A tool's
// arguments are the agent's requests within it, never a host path
// (operator.go).
package agent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config configures a Server: the operator's settings.
type Config struct {
	// Kbox is the kbox binary that runs guests (usually this one).
	Kbox string
	// Image is the image runs use when a call names none ("" for none).
	Image string
	// Images is a directory of images calls name by bare name ("" for
	// none: calls use Image only).
	Images string
	// Snapshots is the directory session_close saves snapshots to, by
	// bare name ("" for none: snapshots are refused);
	// SnapshotsOverwrite lets a snapshot replace one of the same name.
	Snapshots          string
	SnapshotsOverwrite bool
	// Policy is the operator's policy file's bytes (TOML, nil for none):
	// every run and session's file calls get it, and an agent's policy
	// only adds to it (policy.Merge).
	Policy []byte
	// CheckPolicy, when set, checks a policy as kbox image would (its
	// syscall names against the syscall table).
	CheckPolicy func(*policy.Policy) error
	// Net is the network every run gets.
	Net Net
	// Audit, when set, is the audit log every run appends to.
	Audit string
	// TmpDir holds the sessions' images ("" for $TMPDIR).
	TmpDir string
	// MaxSessions bounds the sessions open at once (0: 16).
	MaxSessions int
	// SessionIdle closes a session no call used for this long (0: 30
	// minutes; negative: never).
	SessionIdle time.Duration
	// WarmPool is how many kernels are kept booted per image for one-shot
	// runs (pool.go; 0: none).
	WarmPool int
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
	cfg Config
	// policy is cfg.Policy parsed (nil for none); dir holds its copy the
	// runs and file helpers read (policyFile), so every run gets the
	// bytes the settings hash covers.
	policy     *policy.Policy
	dir        string
	policyFile string
	settings   Settings
	settingsID string // the settings' SHA-256

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
	quit     chan struct{} // closed by Close
	last     *lastRun      // the server's last run
	pool     *warmPool     // nil without Config.WarmPool
	primed   sync.Once
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
	lastUse atomic.Int64 // unix ns of the last call's end (reapIdle)
	closed  bool
	last    *lastRun // guarded by Server.mu
	// live is the session's kernel (live.go): every run and file call
	// of the session goes to it.
	live *liveKernel
	// policy, net, workdir and env are what the agent asked at
	// session_open.
	policy  string
	net     *bool
	workdir string
	env     []string
	// procs are the background runs by pid (process.go), guarded by
	// Server.mu.
	procs map[int]*bgProc
	// top, when set, is the directory that holds dir (a fork's), removed
	// with it.
	top string
}

// New makes a Server.
func New(cfg Config) (*Server, error) {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 16
	}
	if cfg.SessionIdle == 0 {
		cfg.SessionIdle = defaultSessionIdle
	}
	s := &Server{cfg: cfg, sessions: map[string]*session{}, quit: make(chan struct{})}
	if cfg.WarmPool > 0 {
		s.pool = newWarmPool(s, cfg.WarmPool)
	}
	if err := s.operatorSettings(); err != nil {
		s.Close()
		return nil, err
	}
	if cfg.SessionIdle > 0 {
		go s.reapIdle()
	}
	return s, nil
}

// defaultSessionIdle is how long a session no call uses stays open.
const defaultSessionIdle = 30 * time.Minute

// reapIdle closes the sessions no call used for cfg.SessionIdle, until
// the server closes.
func (s *Server) reapIdle() {
	every := min(s.cfg.SessionIdle/4, time.Minute)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		var idle []*session
		s.mu.Lock()
		for _, se := range s.sessions {
			if time.Since(se.used()) > s.cfg.SessionIdle {
				idle = append(idle, se)
			}
		}
		s.mu.Unlock()
		for _, se := range idle {
			if se.mu.TryLock() { // a call in progress is not idle
				s.endSession(se)
				se.mu.Unlock()
			}
		}
	}
}

// endSession ends a session's kernel and removes it. The caller holds
// se.mu.
func (s *Server) endSession(se *session) error {
	err := se.live.close()
	s.mu.Lock()
	delete(s.sessions, se.id)
	s.mu.Unlock()
	se.closed = true
	os.RemoveAll(se.dir)
	if se.top != "" {
		os.RemoveAll(se.top)
	}
	se.baseFile.Close()
	return err
}

// Close ends every session and pooled kernel and removes their images.
func (s *Server) Close() {
	if s.pool != nil {
		s.pool.close()
	}
	s.mu.Lock()
	ss := s.sessions
	if !s.closed {
		close(s.quit)
	}
	s.sessions, s.closed = map[string]*session{}, true
	s.mu.Unlock()
	if s.dir != "" {
		defer os.RemoveAll(s.dir)
	}
	for _, se := range ss {
		se.mu.Lock()
		s.endSession(se)
		se.mu.Unlock()
	}
}

// MCP returns an MCP server with the tools, serving s. The warm pool of
// the default image starts booting here, after New (and the audit log's
// mcp_start record).
func (s *Server) MCP() *mcp.Server {
	s.primed.Do(func() {
		if s.pool != nil && s.cfg.Image != "" {
			s.pool.prime(s.cfg.Image)
		}
	})
	srv := mcp.NewServer(&mcp.Implementation{Name: "kbox", Version: s.cfg.Version}, &mcp.ServerOptions{
		Instructions: "kbox runs Linux programs against an in-process Linux kernel booted from an ext4 image, without root, container or VM. " +
			"`run` on an image is ephemeral (the image never changes); open a session for state kept across calls. " +
			"The server's operator chose the images (named by bare name), the policy and the network: a call's policy can only add restrictions, and `net: false` turns the network off.",
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "run", Description: "Run a program in the image (or a session's image) under kbox. " +
		"A non-zero exit is a normal result; isError only means kbox itself failed."}, s.run)
	mcp.AddTool(srv, &mcp.Tool{Name: "session_open", Description: "Open a session on an image: a live kernel on a private copy-on-write layer over it, kept across run, read_file, write_file, list_dir and stat calls until session_close. " +
		"Processes a run leaves in the background keep running, and /tmp is kept, for the session's later calls; the image itself is never written."}, s.sessionOpen)
	mcp.AddTool(srv, &mcp.Tool{Name: "session_close", Description: "Close a session and delete its image, saving it first as the named snapshot in the server's snapshot directory when given."}, s.sessionClose)
	addBulkTool(srv, &mcp.Tool{Name: "read_file", Description: "Read a file of a session's image through the kernel, without a guest process. Text that is valid UTF-8 is the result's content; other bytes are content_base64 (encoding says which)."}, s.readFile)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_file", Description: "Write (create or replace) a file in a session's image."}, s.writeFile)
	mcp.AddTool(srv, &mcp.Tool{Name: "list_dir", Description: "List a directory of a session's image with each entry's type, mode and size."}, s.listDir)
	mcp.AddTool(srv, &mcp.Tool{Name: "stat", Description: "Metadata of a path in a session's image (symlinks not followed)."}, s.stat)
	mcp.AddTool(srv, &mcp.Tool{Name: "snapshot", Description: "The observatory's snapshot of the last run (of the session, or of the server): its syscalls by family and disposition and the in-process kernel's telemetry (memory, context switches, page faults, softirqs) as the run ended."}, s.snapshot)
	mcp.AddTool(srv, &mcp.Tool{Name: "enosys", Description: "The syscalls the last run (of the session, or of the server) got ENOSYS for, by name: what kbox does not implement yet."}, s.enosys)
	mcp.AddTool(srv, &mcp.Tool{Name: "session_checkpoint", Description: "Record the session's image as it is now under a name (its processes keep running; /tmp is not part of it)."}, s.sessionCheckpoint)
	mcp.AddTool(srv, &mcp.Tool{Name: "session_rollback", Description: "Return the session's image to a checkpoint: every process of the session is ended and the session goes on, on a new kernel."}, s.sessionRollback)
	mcp.AddTool(srv, &mcp.Tool{Name: "session_fork", Description: "Open a new session whose image starts as this session's is now (its processes and /tmp are not copied; its kernel boots at its first call); the two then diverge."}, s.sessionFork)
	mcp.AddTool(srv, &mcp.Tool{Name: "process_output", Description: "Read a background run's stdout and stderr from the offsets given (the last call's *_next), waiting up to wait_ms for more."}, s.processOutput)
	mcp.AddTool(srv, &mcp.Tool{Name: "process_wait", Description: "Wait for a background run to exit; its exit code."}, s.processWait)
	mcp.AddTool(srv, &mcp.Tool{Name: "process_signal", Description: "Send a signal to a background run's process group."}, s.processSignal)
	mcp.AddTool(srv, &mcp.Tool{Name: "process_list", Description: "The session's processes, as the guest's /proc shows them."}, s.processList)
	mcp.AddTool(srv, &mcp.Tool{Name: "kernel_read", Description: "Read a file of the in-process kernel's own /proc (meminfo, stat, vmstat, slabinfo, ...) or /sys, read-only."}, s.kernelRead)
	return srv
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
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

// used is when a call last used the session, or when it opened.
func (se *session) used() time.Time {
	if ns := se.lastUse.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return se.created
}

// release ends a call on the session (lockSession began it).
func (se *session) release() {
	se.lastUse.Store(time.Now().UnixNano())
	se.mu.Unlock()
}

// lockSession returns the session, locked for one call, its kernel up:
// a fork's boots at its first call (sessionFork).
func (s *Server) lockSession(id string) (*session, error) {
	se, err := s.lockSessionCold(id)
	if err != nil || se.live != nil {
		return se, err
	}
	if se.live, err = s.startLive(se, se.policy, se.net); err != nil {
		s.endSession(se)
		se.mu.Unlock()
		return nil, toolError("the session's kernel did not start: %v; the session is closed", err)
	}
	return se, nil
}

// lockSessionCold is lockSession without starting a fork's kernel: for
// the calls that end it.
func (s *Server) lockSessionCold(id string) (*session, error) {
	se, err := s.session(id)
	if err != nil {
		return nil, err
	}
	se.mu.Lock()
	if se.closed {
		se.mu.Unlock()
		return nil, toolError("session %q was closed", id)
	}
	se.lastUse.Store(time.Now().UnixNano())
	return se, nil
}
