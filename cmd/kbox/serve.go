package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/rootfs"
	"github.com/kbox-project/kbox/seccomp/supervisor"
	"github.com/kbox-project/kbox/sessiondir"
	"github.com/kbox-project/kbox/web"
	"golang.org/x/sys/unix"
)

// `kbox image --serve SOCKET`: a live session. The kernel boots once and
// stays up; each connection to SOCKET asks for one thing, which runs in
// that kernel: a program, started as a new guest process of the session
// (seccomp tier, supervisor/spawn.go) while earlier ones still run, or a
// file operation (kbox file's, served in this process). kbox mcp keeps
// one per session (docs/agents.md).
//
// Framing, both ways: a 4-byte length (little-endian) and that many bytes
// of JSON. A run request carries the program's stdin, stdout and stderr as
// three fds (SCM_RIGHTS) with its first bytes; its answer comes when the
// program has exited, and closing the connection first kills it.

// ServeRequest is one request on a session's socket.
type ServeRequest struct {
	// run, close, discard (close, throwing away what was written since
	// the last checkpoint: a rollback's), or one of kbox file's ops
	Op string `json:"op"`
	// run
	Argv      []string `json:"argv,omitempty"`
	Env       []string `json:"env,omitempty"` // NAME=VALUE over the session's
	Workdir   string   `json:"workdir,omitempty"`
	TimeoutMs int64    `json:"timeout_ms,omitempty"`
	// file ops
	File *FileRequest `json:"file,omitempty"`
	// signal: a run's process group
	Pid    int `json:"pid,omitempty"`
	Signal int `json:"signal,omitempty"`
	// checkpoint: a new directory for the checkpoint's chain
	Dir string `json:"dir,omitempty"`
	// Report (run): the answer carries the run's telemetry and audit
	// head, and the audit log gets the run's records (servereport.go).
	Report bool `json:"report,omitempty"`
}

// ServeAnswer is its answer.
type ServeAnswer struct {
	Error    string      `json:"error,omitempty"`
	Status   int         `json:"status"` // run: as kbox image's (128+N for signal N)
	TimedOut bool        `json:"timed_out,omitempty"`
	Pid      int         `json:"pid,omitempty"`
	Started  bool        `json:"started,omitempty"` // a run's first frame
	File     *FileAnswer `json:"file,omitempty"`
	Procs    []GuestProc `json:"procs,omitempty"`
	// A run's with Report (servereport.go).
	Telemetry       *Telemetry          `json:"telemetry,omitempty"`
	AuditHead       string              `json:"audit_head,omitempty"`
	Kernel          *web.KernelSnapshot `json:"kernel,omitempty"`
	KernelMemPeakKB uint64              `json:"kernel_mem_peak_kb,omitempty"`
	GuestMaxRSS     int64               `json:"guest_peak_rss_kb,omitempty"`
}

// GuestProc is one of a session's processes (op ps).
type GuestProc struct {
	Pid  int    `json:"pid"`
	PPid int    `json:"ppid"` // as the guest sees it: 0 for a run
	Comm string `json:"comm"`
	Args string `json:"args"`
}

// checkServe refuses what a session cannot be given: a command (each
// run names its own) and an in-process tier (a session's programs are
// anybody's, so they run confined).
func checkServe(o *ImageOptions) error {
	if o.Agent.Serve == "" {
		return nil
	}
	switch {
	case o.CommandFrom != "":
		return usagef("--serve runs no command (each request names its program): give none")
	case o.SyscallMode != "auto" && o.SyscallMode != "seccomp":
		return usagef("--serve runs its programs in the seccomp tier, not --syscall-mode=%s", o.SyscallMode)
	case o.Agent.Timeout > 0:
		return usagef("--serve with --timeout: each run has its own (timeout_ms)")
	}
	o.SyscallMode, o.TierWhy = "seccomp", "--serve: a session's programs are confined"
	return nil
}

// requestWait bounds how long a connection may take to send its request.
const requestWait = 30 * time.Second

// maxServeFrame bounds a frame: a write_file's data, base64, in JSON.
const maxServeFrame = 2*fileWriteMax + 1<<20

// sessionServer serves one session's socket.
type sessionServer struct {
	ln     *net.UnixListener
	spawns *supervisor.Spawns
	root   *rootfs.Root
	binds  []*guestpath.Bind
	fp     *filePolicy
	o      *ImageOptions
	env    []string // the session's environment
	files  sync.Mutex
	// wg counts the requests being served; conns are the connections
	// open, closed for reading at close.
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[*net.UnixConn]struct{}
	closed bool
	eng    *dispatch.Engine
	kept   *keptOverlay // nil unless --overlay
	ag     *agentRun    // the agent options (nil for none)
	// settle: a second after the last call ends, the session settles
	// as a run does (settle.go); active counts the calls being served.
	settle *time.Timer
	active atomic.Int32
}

// listenSession makes the session's socket (mode 0600: kbox's user alone).
func listenSession(o *ImageOptions, sp *supervisor.Spawns, root *rootfs.Root, binds []*guestpath.Bind, env []string, eng *dispatch.Engine, ag *agentRun) (*sessionServer, error) {
	old := unix.Umask(0o077)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: o.Agent.Serve, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("--serve: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	s := &sessionServer{ln: ln, spawns: sp, root: root, binds: binds, o: o, env: env,
		fp: newFilePolicy(o.Agent.Policy, root), eng: eng, kept: ag.keptOverlay(), ag: ag,
		conns: map[*net.UnixConn]struct{}{}}
	s.settle = time.AfterFunc(time.Hour, func() {
		if s.active.Load() == 0 {
			settleNow()
		}
	})
	s.settle.Stop()
	return s, nil
}

// run accepts connections once the spawner serves, until close.
func (s *sessionServer) run() {
	<-s.spawns.Ready()
	fmt.Fprintln(os.Stdout, `{"ready":true}`)
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go func() {
			s.conn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// close stops accepting and waits a while for the requests being served
// (their runs have ended with the session). A connection waiting for its
// next request is shut for reading.
func (s *sessionServer) close() {
	s.settle.Stop()
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.CloseRead()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// begin counts a request being served, unless the server is closing.
func (s *sessionServer) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	s.active.Add(1)
	return true
}

// end uncounts a request; the session settles a second after the last.
func (s *sessionServer) end() {
	if s.active.Add(-1) == 0 {
		s.settle.Reset(time.Second)
	}
	s.wg.Done()
}

// conn serves c's requests, one after another: a client keeps a
// connection for its file calls (sessiondir.Conn). The first request
// must come within requestWait; a run, close or discard is the last.
func (s *sessionServer) conn(c *net.UnixConn) {
	c.SetReadDeadline(time.Now().Add(requestWait))
	for first := true; ; first = false {
		req, fds, err := readFrame(c)
		if err != nil {
			closeFDs(fds)
			if first || !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				writeFrame(c, &ServeAnswer{Error: "bad request: " + err.Error()})
			}
			return
		}
		if first {
			c.SetReadDeadline(time.Time{})
		}
		if !s.begin() {
			closeFDs(fds)
			return
		}
		ans := s.serve(c, req, fds)
		werr := writeFrame(c, ans)
		s.end()
		switch {
		case werr != nil, req.Op == "run", req.Op == "close", req.Op == "discard":
			return
		}
	}
}

func (s *sessionServer) serve(c *net.UnixConn, req *ServeRequest, fds []int) *ServeAnswer {
	switch req.Op {
	case "run":
		return s.runOne(c, req, fds)
	}
	closeFDs(fds)
	switch req.Op {
	case "close", "discard":
		if req.Op == "discard" && s.ag != nil {
			s.ag.discard.Store(true)
		}
		s.spawns.Close()
		return &ServeAnswer{}
	case "signal":
		ans := &ServeAnswer{}
		if err := s.spawns.Signal(req.Pid, unix.Signal(req.Signal)); err != nil {
			ans.Error = err.Error()
		}
		return ans
	case "ps":
		return &ServeAnswer{Procs: s.procs()}
	case "checkpoint":
		ans := &ServeAnswer{}
		if err := s.checkpoint(req.Dir); err != nil {
			ans.Error = "checkpoint: " + err.Error()
		}
		return ans
	}
	return s.fileOp(req)
}

func (s *sessionServer) fileOp(req *ServeRequest) *ServeAnswer {
	if req.File == nil || req.File.Op != req.Op {
		return &ServeAnswer{Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
	if err := req.File.check(); err != nil {
		return &ServeAnswer{Error: err.Error()}
	}
	// One at a time: a file op runs as kbox's root in LKL, on this
	// goroutine's thread.
	s.files.Lock()
	defer s.files.Unlock()
	return &ServeAnswer{File: req.File.serve(s.root, s.fp)}
}

// runOne starts req's program with fds as its stdio and waits for it.
func (s *sessionServer) runOne(c *net.UnixConn, req *ServeRequest, fds []int) (ans *ServeAnswer) {
	if len(fds) != 3 {
		closeFDs(fds)
		return &ServeAnswer{Error: fmt.Sprintf("a run needs 3 fds (stdin, stdout, stderr), got %d", len(fds))}
	}
	stdio := [3]*os.File{}
	for i, fd := range fds {
		stdio[i] = os.NewFile(uintptr(fd), "stdio")
		defer stdio[i].Close() // the program has its own once started
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return &ServeAnswer{Error: "no program (argv)"}
	}
	wd := req.Workdir
	if wd == "" {
		wd = s.o.WorkDir
	}
	if !strings.HasPrefix(wd, "/") {
		return &ServeAnswer{Error: fmt.Sprintf("workdir %q is not absolute", wd)}
	}
	for _, kv := range req.Env {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return &ServeAnswer{Error: fmt.Sprintf("bad env entry %q: want NAME=VALUE", kv)}
		}
	}
	if req.Report {
		rr := s.ag.beginServeRun(req, wd)
		defer func() { rr.end(ans) }()
	}
	env := withEnv(withEnv(s.env, req.Env), []string{"PWD=" + wd})
	search := guestPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	s.files.Lock() // the lookup runs as kbox's root in LKL, as file ops do
	path, err := findProgram(req.Argv[0], wd, search, s.binds, s.eng.Opt.HostRoutes)
	s.files.Unlock()
	if err != nil {
		fmt.Fprintf(stdio[2], "kbox: %s: %v\n", req.Argv[0], err)
		return &ServeAnswer{Status: exitNotFound}
	}
	sp, err := s.spawns.Start(path, wd, req.Argv, env, stdio)
	if err != nil {
		return &ServeAnswer{Error: err.Error()}
	}
	pid, err := sp.Started()
	if err != nil {
		return &ServeAnswer{Error: err.Error()}
	}
	// A first frame says it runs: the client may signal it meanwhile.
	if err := writeFrame(c, &ServeAnswer{Pid: pid, Started: true}); err != nil {
		sp.Kill(unix.SIGKILL)
		<-sp.Done()
		return &ServeAnswer{Error: err.Error()}
	}
	// The client hanging up (or cancelling) kills the run.
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		c.Read(b[:])
		close(gone)
	}()
	var timeout <-chan time.Time
	if req.TimeoutMs > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMs) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	ans = &ServeAnswer{Pid: pid}
	select {
	case <-sp.Done():
	case <-timeout:
		ans.TimedOut = true
		sp.Kill(unix.SIGKILL)
		<-sp.Done()
	case <-gone:
		sp.Kill(unix.SIGKILL)
		<-sp.Done()
	}
	ws, err := sp.Status()
	if err != nil {
		ans.Error = err.Error()
		return ans
	}
	if ws.Signaled() {
		ans.Status = 128 + int(ws.Signal())
	} else {
		ans.Status = ws.ExitStatus()
	}
	return ans
}

// FIFREEZE and FITHAW (linux/fs.h).
const (
	fiFreeze = 0xc0045877
	fiThaw   = 0xc0045878
)

// checkpoint records the session's disk, as the guests left it so far,
// in dir: what they wrote through shadows goes to the kernel, the
// image's file system is frozen (its dirty data written, new writes
// held) while the top layer is sealed and a new one started, then
// thawed; dir gets the chain of sealed layers. Nothing is copied. /tmp is
// not part of it: it is the session's scratch disk, not the image.
func (s *sessionServer) checkpoint(dir string) error {
	if s.kept == nil {
		return errors.New("the session has no kept overlay (--overlay)")
	}
	s.files.Lock() // LKL calls as kbox's root, as file ops
	defer s.files.Unlock()
	if err := s.eng.Shadows.FlushAll(); err != nil {
		return err
	}
	fd, err := lkl.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer lkl.Close(fd)
	if _, e := lkl.Syscall6(lkl.SysIoctl, uintptr(fd), fiFreeze, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("freeze the image's file system: %w", e)
	}
	chain, err := s.kept.seal(s.root.Disk)
	if err == nil {
		err = sessiondir.WriteCheckpoint(dir, chain)
	}
	if _, e := lkl.Syscall6(lkl.SysIoctl, uintptr(fd), fiThaw, 0, 0, 0, 0); e != 0 && err == nil {
		err = fmt.Errorf("thaw the image's file system: %w", e)
	}
	return err
}

// procs lists the session's guest processes: the spawner's descendants.
func (s *sessionServer) procs() []GuestProc {
	spawner := s.spawns.Spawner()
	var out []GuestProc
	queue := procfs.ChildrenOf(spawner)
	seen := map[int]bool{}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		dir := "/proc/" + strconv.Itoa(pid)
		comm, err1 := os.ReadFile(dir + "/comm")
		args, err2 := os.ReadFile(dir + "/cmdline")
		ppid, _ := procStatusPPid(dir)
		if err1 != nil || err2 != nil {
			continue // gone meanwhile
		}
		if ppid == spawner {
			ppid = 0
		}
		out = append(out, GuestProc{Pid: pid, PPid: ppid, Comm: strings.TrimSpace(string(comm)),
			Args: strings.TrimSpace(strings.ReplaceAll(string(args), "\x00", " "))})
		queue = append(queue, procfs.ChildrenOf(pid)...)
	}
	slices.SortFunc(out, func(a, b GuestProc) int { return a.Pid - b.Pid })
	return out
}

func procStatusPPid(dir string) (int, bool) {
	b, err := os.ReadFile(dir + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return n, err == nil
		}
	}
	return 0, false
}

// readFrame reads one request and the fds sent with its first bytes.
func readFrame(c *net.UnixConn) (*ServeRequest, []int, error) {
	// The head first, with the fds a run's request carries: a kept
	// connection's next frame stays unread until it is asked for.
	var head [sessiondir.HeadLen]byte
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := c.ReadMsgUnix(head[:], oob)
	var fds []int
	if oobn > 0 {
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if got, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, got...)
				}
			}
		}
	}
	if err == nil && n == 0 {
		err = io.EOF
	}
	if err == nil && n < len(head) {
		_, err = io.ReadFull(c, head[n:])
	}
	if err != nil {
		return nil, fds, err
	}
	body, _, err := sessiondir.ReadBody(c, head, maxServeFrame)
	if err != nil {
		return nil, fds, err
	}
	var req ServeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fds, err
	}
	return &req, fds, nil
}

// writeFrame writes a's frame: a file call's content (File.Raw) as its
// raw bytes.
func writeFrame(w io.Writer, a *ServeAnswer) error {
	var raw []byte
	if a.File != nil {
		raw = a.File.Raw
	}
	b, err := sessiondir.AppendFrame(nil, a, raw)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
