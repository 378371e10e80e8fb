package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/kbox-project/kbox/sessiondir"
)

// ---- a session's live kernel

// A session is one `kbox image --serve` process (cmd/kbox/serve.go): its
// kernel boots at session_open and stays up until session_close, so the
// session's runs are guest processes of one kernel (what one run leaves
// running, or in /tmp, the next one sees) and its file calls read that
// kernel's page cache.

// serveRequest and serveAnswer are kbox image --serve's frames
// (cmd/kbox/serve.go: ServeRequest, ServeAnswer).
type serveRequest struct {
	Op        string       `json:"op"`
	Pid       int          `json:"pid,omitempty"`
	Signal    int          `json:"signal,omitempty"`
	Dir       string       `json:"dir,omitempty"`
	Argv      []string     `json:"argv,omitempty"`
	Env       []string     `json:"env,omitempty"`
	Workdir   string       `json:"workdir,omitempty"`
	TimeoutMs int64        `json:"timeout_ms,omitempty"`
	File      *fileRequest `json:"file,omitempty"`
	Report    bool         `json:"report,omitempty"`
}

type serveAnswer struct {
	Error    string      `json:"error"`
	Status   int         `json:"status"`
	TimedOut bool        `json:"timed_out"`
	Pid      int         `json:"pid"`
	Started  bool        `json:"started"`
	File     *fileAnswer `json:"file"`
	Procs    []GuestProc `json:"procs"`
	// A run's with Report (a warm pool's or a session's).
	Telemetry       *Telemetry      `json:"telemetry"`
	AuditHead       string          `json:"audit_head"`
	Kernel          json.RawMessage `json:"kernel"`
	KernelMemPeakKB uint64          `json:"kernel_mem_peak_kb"`
	GuestMaxRSS     int64           `json:"guest_peak_rss_kb"`
}

// telemetry puts a reported run's telemetry and audit head into out, and
// returns the telemetry (nil without a report).
func (a *serveAnswer) telemetry(out *RunOut) *Telemetry {
	out.Telemetry, out.AuditHead = a.Telemetry, a.AuditHead
	if out.Telemetry != nil {
		out.Telemetry.GuestPeakKB, out.Telemetry.KernelMemKB = a.GuestMaxRSS, a.KernelMemPeakKB
	}
	return out.Telemetry
}

// GuestProc is one of a session's processes, as the guest sees it.
type GuestProc struct {
	Pid  int    `json:"pid"`
	PPid int    `json:"ppid" jsonschema:"its parent's pid; 0 for a program a run started"`
	Comm string `json:"comm"`
	Args string `json:"args"`
}

// liveStart bounds a session's boot.
const liveStart = 60 * time.Second

// outputGrace is how long a run's output is still read after its program
// exited, for what it wrote just before: a process it left in the
// background may hold its stdout, and the run does not wait for that.
const outputGrace = 20 * time.Millisecond

// liveKernel is a session's kbox image --serve process.
type liveKernel struct {
	cmd  *exec.Cmd
	sock string
	log  *lockedTail // kbox's own stderr, for errors
	bg   *stream     // the session's log: runs' output after the run returned (process_output, handle "log")
	done chan struct{}
	err  error // the process's end, once done
	// kept is the connection keptCall reuses (nil until the first).
	keptMu sync.Mutex
	kept   *sessiondir.Conn
}

// lockedTail is a headTail that several goroutines write.
type lockedTail struct {
	mu sync.Mutex
	h  *headTail
}

func (t *lockedTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.h.Write(p)
}

func (t *lockedTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.h.String()
}

// startLive boots the session's kernel: the operator's policy, network
// and audit log, and what the agent asked within them at session_open,
// hold for all of the session's runs.
func (s *Server) startLive(se *session, agentPolicy string, net *bool) (*liveKernel, error) {
	sock := filepath.Join(se.dir, "kbox.sock")
	args := []string{"image", "--syscall-mode=seccomp", "-S", se.base, "--overlay", se.dir, "--serve", sock}
	polArgs, err := s.runPolicy(agentPolicy, se.dir)
	if err != nil {
		return nil, err
	}
	netArgs, err := s.netArgs(net)
	if err != nil {
		return nil, err
	}
	args = append(append(args, polArgs...), netArgs...)
	if se.workdir != "" {
		args = append(args, "-w", se.workdir)
	}
	for _, kv := range se.env {
		args = append(args, "--env", kv)
	}
	if s.cfg.Audit != "" {
		args = append(args, "--audit", s.cfg.Audit, "--audit-settings", s.settingsID)
	}
	return s.bootServe(args, sock)
}

// bootServe starts kbox with args (a kbox image --serve SOCK) and waits
// until it serves.
func (s *Server) bootServe(args []string, sock string) (*liveKernel, error) {
	cmd := exec.Command(s.cfg.Kbox, args...)
	// If the server dies, so does the session (and its guests with it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "KBOX_DEBUG=")
	l := &liveKernel{cmd: cmd, sock: sock, log: &lockedTail{h: newHeadTail(64 << 10)},
		bg: newStream(), done: make(chan struct{})}
	cmd.Stderr = l.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, toolError("start the session's kernel: %v", err)
	}
	go func() {
		l.err = cmd.Wait()
		close(l.done)
	}()
	ready := make(chan bool, 1)
	go func() {
		r := bufio.NewReader(out)
		line, err := r.ReadString('\n')
		ready <- err == nil && line == "{\"ready\":true}\n"
		io.Copy(io.Discard, r) // kbox prints nothing else on stdout
	}()
	select {
	case ok := <-ready:
		if ok {
			return l, nil
		}
	case <-time.After(liveStart):
	}
	cmd.Process.Kill()
	<-l.done
	return nil, toolError("the session's kernel did not start: %s", lastLine(l.log.String()))
}

// lost is the error of a call whose connection failed: the kernel has
// gone, or is going (its process is reaped a moment after it died).
func (l *liveKernel) lost(err error) error {
	select {
	case <-l.done:
		return toolError("the session's kernel has ended (%v): %s; the session is lost, close it", l.err, lastLine(l.log.String()))
	case <-time.After(2 * time.Second):
		return toolError("the session's kernel: %v", err)
	}
}

// call sends req with fds and waits for the answer or ctx; closing the
// connection early kills a run. A run's first frame (started) goes to
// onStart.
func (l *liveKernel) call(ctx context.Context, req *serveRequest, fds []int, onStart func(pid int)) (*serveAnswer, error) {
	return l.answer(sessiondir.Call(ctx, l.sock, req, fds, onStart))
}

// answer decodes a call's answer (a file call's bytes are its raw part),
// or says why there is none.
func (l *liveKernel) answer(body, raw []byte, err error) (*serveAnswer, error) {
	var ce *sessiondir.ConnError
	switch {
	case errors.As(err, &ce):
		return nil, l.lost(ce.Err)
	case err != nil:
		return nil, toolError("%v", err)
	}
	var a serveAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, toolError("the session's kernel answered badly: %v", err)
	}
	if a.File != nil {
		a.File.Raw = raw
	}
	return &a, nil
}

// keptCall sends a request without fds (a file call, ps, signal) on the
// kept connection, or on a connection of its own when another call is
// using that one.
func (l *liveKernel) keptCall(ctx context.Context, req *serveRequest) (*serveAnswer, error) {
	if !l.keptMu.TryLock() {
		return l.call(ctx, req, nil, nil)
	}
	defer l.keptMu.Unlock()
	if l.kept == nil || l.kept.Broken() {
		c, err := sessiondir.Dial(ctx, l.sock)
		if err != nil {
			return l.answer(nil, nil, err)
		}
		l.kept = c
	}
	return l.answer(l.kept.Call(ctx, req))
}

// closeKept closes the kept connection, once the session has ended.
func (l *liveKernel) closeKept() {
	l.keptMu.Lock()
	defer l.keptMu.Unlock()
	if l.kept != nil {
		l.kept.Close()
		l.kept = nil
	}
}

// file serves one file call.
func (l *liveKernel) file(ctx context.Context, req fileRequest) (*fileAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, fileCallTimeout)
	defer cancel()
	a, err := l.keptCall(ctx, &serveRequest{Op: req.Op, File: &req})
	if err != nil {
		return nil, err
	}
	if a.Error != "" {
		return nil, toolError("%s", a.Error)
	}
	if a.File == nil {
		return nil, toolError("the session's kernel gave no answer to %s", req.Op)
	}
	return fileResult(req, a.File)
}

// run runs one program in the session and returns its answer, with its
// output in stdout and stderr.
func (l *liveKernel) run(ctx context.Context, req *serveRequest, stdin []byte, stdout, stderr io.Writer, onStart func(pid int)) (*serveAnswer, error) {
	var pipes [3][2]*os.File
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			for _, p := range pipes[:i] {
				p[0].Close()
				p[1].Close()
			}
			return nil, err
		}
		pipes[i] = [2]*os.File{r, w}
	}
	// The program's ends: 0 reads, 1 and 2 write.
	theirs := []*os.File{pipes[0][0], pipes[1][1], pipes[2][1]}
	go func() {
		pipes[0][1].Write(stdin)
		pipes[0][1].Close()
	}()
	outs := []*switchWriter{{w: stdout, bg: l.bg}, {w: stderr, bg: l.bg}}
	var wg sync.WaitGroup
	for i, r := range []*os.File{pipes[1][0], pipes[2][0]} {
		wg.Add(1)
		go func() {
			io.Copy(outs[i], r)
			r.Close()
			wg.Done()
		}()
	}
	fds := []int{int(theirs[0].Fd()), int(theirs[1].Fd()), int(theirs[2].Fd())}
	a, err := l.call(ctx, req, fds, onStart)
	for _, f := range theirs {
		f.Close()
	}
	eof := make(chan struct{})
	go func() {
		wg.Wait()
		close(eof)
	}()
	select {
	case <-eof:
	case <-time.After(outputGrace):
	}
	for _, o := range outs {
		o.detach() // later output goes to the session's log
	}
	return a, err
}

// switchWriter writes to w until detached, then to bg.
type switchWriter struct {
	mu       sync.Mutex
	w        io.Writer
	bg       io.Writer
	detached bool
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached {
		return s.bg.Write(p)
	}
	return s.w.Write(p)
}

func (s *switchWriter) detach() {
	s.mu.Lock()
	s.detached = true
	s.mu.Unlock()
}

// close ends the session's kernel: its processes are ended, what they
// wrote goes to the overlay, and the image is unmounted. An error means
// the overlay may not hold everything.
func (l *liveKernel) close() error { return l.end("close") }

// discard ends the session's kernel for a rollback: its processes are
// ended, and the rest (the image's unmount, the overlay's map) is left to
// its exit, what it wrote since its last checkpoint being thrown away.
func (l *liveKernel) discard() error { return l.end("discard") }

func (l *liveKernel) end(op string) error {
	if l == nil {
		return nil // a fork's kernel that never booted
	}
	defer l.closeKept()
	select {
	case <-l.done:
	default:
		ctx, cancel := context.WithTimeout(context.Background(), fileCallTimeout)
		_, err := l.call(ctx, &serveRequest{Op: op}, nil, nil)
		cancel()
		if err != nil {
			l.cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-l.done:
		case <-time.After(fileCallTimeout):
			l.cmd.Process.Kill()
			<-l.done
			return errors.New("the session's kernel did not end in time: killed")
		}
	}
	if l.err != nil {
		return fmt.Errorf("the session's kernel failed: %v: %s", l.err, lastLine(l.log.String()))
	}
	return nil
}
