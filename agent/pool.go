package agent

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// ---- the warm pool: pre-booted kernels for one-shot image runs

// A one-shot run on an image boots a kernel, which takes 100 ms and more.
// The warm pool keeps Config.WarmPool kernels booted per image, each a
// `kbox image --ephemeral --serve` process (the session's live kernel,
// live.go, on a copy-on-write overlay that is an unlinked file) with the
// operator's policy, network and audit log. A run the pooled kernel can
// serve as the one-shot path would (no agent policy, the operator's
// network) takes one, runs its program there as a session run, and the
// kernel then ends with all its processes and its overlay: it serves one
// run only, so no run sees another's files or processes. A replacement
// boots in the background.

// warmPool is the server's pool.
type warmPool struct {
	s      *Server
	n      int
	mu     sync.Mutex
	images map[string]*imagePool // by image path
	inUse  map[*warmKernel]bool
	closed bool
	wg     sync.WaitGroup // boots and ends under way
}

// imagePool is one image's kernels.
type imagePool struct {
	img     string
	ready   []*warmKernel
	booting int
	// failures counts boots that failed (or kernels that died idle) in a
	// row; retry is when the next boot may be tried.
	failures int
	retry    time.Time
}

// warmKernel is one pooled kernel and its private directory (its socket,
// nothing else).
type warmKernel struct {
	l   *liveKernel
	dir string
}

func newWarmPool(s *Server, n int) *warmPool {
	return &warmPool{s: s, n: n, images: map[string]*imagePool{}, inUse: map[*warmKernel]bool{}}
}

// alive says the kernel's process still runs.
func (k *warmKernel) alive() bool {
	select {
	case <-k.l.done:
		return false
	default:
		return true
	}
}

// prime starts img's kernels.
func (p *warmPool) prime(img string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.fillLocked(p.imageLocked(img))
	}
}

func (p *warmPool) imageLocked(img string) *imagePool {
	ip := p.images[img]
	if ip == nil {
		ip = &imagePool{img: img}
		p.images[img] = ip
	}
	return ip
}

// take returns a live kernel of img, or nil when none is ready (the
// pool then fills: the first run on an image starts its pool). The
// caller starts the replacement (done, refillAfter).
func (p *warmPool) take(img string) *warmKernel {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	ip := p.imageLocked(img)
	var k *warmKernel
	for k == nil && len(ip.ready) > 0 {
		c := ip.ready[0]
		ip.ready = ip.ready[1:]
		if c.alive() {
			k = c
		} else {
			p.retireLocked(c)
		}
	}
	if k == nil {
		p.fillLocked(ip)
		return nil
	}
	p.inUse[k] = true
	return k
}

// refillAfter is when a run's replacement kernel starts booting if the
// run has not ended before: a boot beside a short run would slow it.
const refillAfter = 50 * time.Millisecond

// fillLocked boots kernels until ip has n, ready or booting.
func (p *warmPool) fillLocked(ip *imagePool) {
	if time.Now().Before(ip.retry) {
		return
	}
	for len(ip.ready)+ip.booting < p.n {
		ip.booting++
		p.wg.Add(1)
		go p.boot(ip)
	}
}

// warmRetry is how long the pool waits after a failed boot, times the
// failures in a row (at most warmRetryMax).
const (
	warmRetry    = time.Second
	warmRetryMax = time.Minute
)

func (p *warmPool) boot(ip *imagePool) {
	defer p.wg.Done()
	k, err := p.s.bootWarm(ip.img)
	p.mu.Lock()
	defer p.mu.Unlock()
	ip.booting--
	if err != nil {
		p.failedLocked(ip)
		return
	}
	if p.closed {
		p.retireLocked(k)
		return
	}
	ip.failures = 0
	ip.ready = append(ip.ready, k)
	go p.watch(ip, k)
}

func (p *warmPool) failedLocked(ip *imagePool) {
	ip.failures++
	ip.retry = time.Now().Add(min(warmRetry*time.Duration(ip.failures), warmRetryMax))
}

// watch removes k from the pool when its process ends there, and boots
// another: a kernel that died in the pool is never handed out.
func (p *warmPool) watch(ip *imagePool, k *warmKernel) {
	<-k.l.done
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(ip.ready, k)
	if i < 0 {
		return // taken, or retired
	}
	ip.ready = slices.Delete(ip.ready, i, i+1)
	p.retireLocked(k)
	p.failedLocked(ip)
	if !p.closed {
		p.fillLocked(ip)
	}
}

// done ends a kernel that served its run on img, and refills img's pool.
func (p *warmPool) done(k *warmKernel, img string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inUse[k] {
		delete(p.inUse, k)
		p.retireLocked(k)
	}
	if !p.closed {
		p.fillLocked(p.imageLocked(img))
	}
}

// retireLocked ends k in the background: its processes are ended, its
// overlay (an unlinked file) goes with its process, then its directory.
func (p *warmPool) retireLocked(k *warmKernel) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		k.l.close()
		os.RemoveAll(k.dir)
	}()
}

// close ends every kernel of the pool, the ones serving a run too, and
// waits until they and their directories are gone.
func (p *warmPool) close() {
	p.mu.Lock()
	p.closed = true
	for _, ip := range p.images {
		for _, k := range ip.ready {
			p.retireLocked(k)
		}
		ip.ready = nil
	}
	for k := range p.inUse {
		p.retireLocked(k)
	}
	clear(p.inUse)
	p.mu.Unlock()
	p.wg.Wait()
}

// bootWarm boots a kernel for img's pool: a session's kernel on an
// ephemeral overlay, with the operator's policy, network and audit log.
func (s *Server) bootWarm(img string) (*warmKernel, error) {
	dir, err := os.MkdirTemp(s.cfg.TmpDir, "kbox-warm-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "kbox.sock")
	args := []string{"image", "--syscall-mode=seccomp", "-S", img, "--ephemeral", "--serve", sock}
	polArgs, err := s.runPolicy("", dir)
	if err == nil {
		var netArgs []string
		if netArgs, err = s.netArgs(nil); err == nil {
			args = append(append(args, polArgs...), netArgs...)
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if s.cfg.Audit != "" {
		args = append(args, "--audit", s.cfg.Audit, "--audit-settings", s.settingsID)
	}
	l, err := s.bootServe(args, sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	k := &warmKernel{l: l, dir: dir}
	// A kernel's first programs are slow (the image's blocks, the
	// shadows of the shell and its loader are read in): the pool runs
	// the shell first, so that a run does not pay for it.
	ctx, cancel := context.WithTimeout(context.Background(), liveStart)
	defer cancel()
	for range warmUpRuns {
		if _, err := l.run(ctx, &serveRequest{Op: "run", Argv: warmUp}, nil, io.Discard, io.Discard, nil); err != nil {
			l.close()
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return k, nil
}

// warmUp is what a pooled kernel runs before it is handed out,
// warmUpRuns times.
var warmUp = []string{"/bin/sh", "-c", "true"}

var warmUpRuns = 2

// warmable says whether a one-shot run can go to a pooled kernel: one
// started with the operator's settings serves it as the one-shot path
// would.
func (s *Server) warmable(in RunIn) bool {
	return s.pool != nil && in.Policy == "" && (in.Net == nil || *in.Net == s.cfg.Net.Enabled)
}

// warmRun runs argv in a pooled kernel of img. served is false when no
// kernel was ready, or the one taken failed before the program started:
// the caller then takes the one-shot path.
func (s *Server) warmRun(ctx context.Context, mreq *mcp.CallToolRequest, img string, in RunIn, argv, env []string, stdin []byte, timeout time.Duration, maxOut int) (res *mcp.CallToolResult, out RunOut, served bool, err error) {
	k := s.pool.take(img)
	if k == nil {
		return nil, out, false, nil
	}
	refill := time.AfterFunc(refillAfter, func() { s.pool.prime(img) })
	defer func() {
		refill.Stop()
		s.pool.done(k, img)
	}()
	req := &serveRequest{Op: "run", Argv: argv, Env: env, Workdir: in.Workdir, TimeoutMs: timeout.Milliseconds(), Report: true}
	ctx, cancel := context.WithTimeout(ctx, timeout+setupGrace)
	defer cancel()
	stdout, stderr := newHeadTail(maxOut), newHeadTail(maxOut)
	start := time.Now()
	pout, perr := withProgress(ctx, mreq, stdout, stderr)
	started := false
	a, err := k.l.run(ctx, req, stdin, pout, perr, func(int) { started = true })
	out.DurationMs = time.Since(start).Milliseconds()
	if err != nil {
		if !started && ctx.Err() == nil {
			return nil, RunOut{}, false, nil
		}
		return nil, out, true, err
	}
	if a.Error != "" {
		return nil, out, true, toolError("kbox: %s", a.Error)
	}
	out.ExitCode, out.TimedOut, out.Tier, out.Warm = a.Status, a.TimedOut, "seccomp", true
	if a.Status > 128 && a.Status < 128+65 {
		out.Signal = unix.SignalName(syscall.Signal(a.Status - 128))
	}
	out.Stdout, out.Stderr = stdout.String(), stderr.String()
	out.StdoutLen, out.StderrLen = stdout.total, stderr.total
	out.Truncated = stdout.cut() || stderr.cut()
	lr := &lastRun{at: time.Now(), argv: argv, telemetry: a.telemetry(&out), kernel: a.Kernel}
	s.mu.Lock()
	s.last = lr
	s.mu.Unlock()
	return runResult(&out, timeout), out, true, nil
}
