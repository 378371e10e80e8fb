package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/audit"
	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
	"github.com/kbox-project/kbox/sessiondir"
	"github.com/kbox-project/kbox/trap"
	"github.com/kbox-project/kbox/web"
	"golang.org/x/sys/unix"
)

// The options of `kbox image` for running agents' tool calls
// (docs/agents.md): an ephemeral image, its snapshot, the audit log, a
// wall-time limit and a machine-readable report of the run.

// AgentOptions are --ephemeral, --snapshot, --audit, --timeout, --report.
type AgentOptions struct {
	Ephemeral bool
	Snapshot  string
	Audit     string
	Timeout   time.Duration
	// Report is a file kbox writes the run's result to, as JSON (kbox
	// mcp reads it).
	Report string
	// Env is --env NAME=VALUE: set in the guest's environment.
	Env []string
	// Overlay is --overlay DIR: a kept copy-on-write layer (overlay.go).
	Overlay string
	// Policy is --policy FILE, compiled (policy.go).
	Policy *dispatch.Policy
	// AuditSettings is --audit-settings SHA256: every audit record
	// carries it (kbox mcp's settings, agent/settings.go).
	AuditSettings string
	// Serve is --serve SOCKET: a live session (serve.go).
	Serve string
}

func (a *AgentOptions) any() bool {
	return a.Ephemeral || a.Snapshot != "" || a.Audit != "" || a.Timeout > 0 || a.Report != "" || a.Overlay != "" || a.Policy != nil || a.AuditSettings != "" || a.Serve != ""
}

const agentUsage = `      --ephemeral               writes go to a private copy-on-write layer and
                                never reach IMAGE, which is only read
      --snapshot OUT            with --ephemeral: save the image as the run left
                                it to OUT (implies --ephemeral)
      --audit FILE              append a hash-chained JSON Lines audit record of
                                the run (start, every exec, end) to FILE
      --audit-settings SHA256   with --audit: every record carries SHA256 as
                                settings_sha256 (kbox mcp's settings)
      --timeout DURATION        kill the whole guest after DURATION (e.g. 10s)
      --report FILE             write the run's result and telemetry as JSON
      --env NAME=VALUE          set NAME in the guest's environment, repeatable
      --overlay DIR             like --ephemeral, but the copy-on-write layer is
                                kept in DIR across runs (kbox mcp's sessions)
      --serve SOCKET            a live session: run no command, keep the kernel
                                up and start each program asked for on SOCKET
                                in it, until asked to close (docs/agents.md)
      --policy FILE             enforce a policy file (TOML: paths, syscalls,
                                limits, network; docs/agents.md); repeatable:
                                each later one only adds restrictions
`

func init() {
	imageOpts = append(imageOpts,
		optSpec{"", "ephemeral", false, false, func(o *ImageOptions, _ string, _ bool) error { o.Agent.Ephemeral = true; return nil }},
		optSpec{"", "snapshot", true, false, func(o *ImageOptions, v string, _ bool) error {
			if v == "" {
				return usagef("empty --snapshot path")
			}
			o.Agent.Snapshot, o.Agent.Ephemeral = v, true
			return nil
		}},
		optSpec{"", "audit", true, false, func(o *ImageOptions, v string, _ bool) error {
			if v == "" {
				return usagef("empty --audit path")
			}
			o.Agent.Audit = v
			return nil
		}},
		optSpec{"", "audit-settings", true, false, func(o *ImageOptions, v string, _ bool) error {
			if b, err := hex.DecodeString(v); err != nil || len(b) != sha256.Size || strings.ToLower(v) != v {
				return usagef("bad --audit-settings %q: want a SHA-256 in lowercase hex", v)
			}
			o.Agent.AuditSettings = v
			return nil
		}},
		optSpec{"", "timeout", true, false, func(o *ImageOptions, v string, _ bool) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return usagef("bad --timeout %q: want a positive duration such as 500ms or 10s", v)
			}
			o.Agent.Timeout = d
			return nil
		}},
		optSpec{"", "env", true, false, func(o *ImageOptions, v string, _ bool) error {
			if name, _, ok := strings.Cut(v, "="); !ok || name == "" || strings.ContainsRune(v, 0) {
				return usagef("bad --env %q: want NAME=VALUE", v)
			}
			o.Agent.Env = append(o.Agent.Env, v)
			return nil
		}},
		optSpec{"", "overlay", true, false, func(o *ImageOptions, v string, _ bool) error {
			if v == "" {
				return usagef("empty --overlay directory")
			}
			o.Agent.Overlay = v
			return nil
		}},
		optSpec{"", "serve", true, false, func(o *ImageOptions, v string, _ bool) error {
			if v == "" {
				return usagef("empty --serve socket path")
			}
			o.Agent.Serve = v
			return nil
		}},
		optSpec{"", "report", true, false, func(o *ImageOptions, v string, _ bool) error {
			if v == "" {
				return usagef("empty --report path")
			}
			o.Agent.Report = v
			return nil
		}},
	)
}

// agentRun is one run's agent state; nil when no agent option was given.
type agentRun struct {
	o        *ImageOptions
	base     string       // the image as given
	baseLock *os.File     // the base, shared-locked, for an ephemeral run
	overlay  *os.File     // the ephemeral run's writes
	kept     *keptOverlay // --overlay
	dirty    *lkl.COWMap  // the blocks written to the overlay
	left     bool         // the kernel was left running (discardsWrites)
	baseSize int64
	copyTime time.Duration // preparing the overlay
	log      *audit.Log
	startRec map[string]any // the audit log's run_start data
	start    time.Time
	pol      policyRun // --policy's refusals (policy.go)
	netAud   netAudit  // --net's records (netaudit.go)

	timedOut atomic.Bool
	// discard: the session's writes since its last checkpoint are thrown
	// away (serve's discard, a rollback's): kbox leaves the kernel as an
	// ephemeral run does, and the overlay's map is not saved.
	discard  atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
	eng      *dispatch.Engine

	counts [nrSlots][web.NumDispositions]atomic.Uint64

	// With --report: the kernel's telemetry, sampled while the guest
	// runs (memPeakKB) and once more at its end (kernel).
	sampler   *web.Sampler
	sampled   chan struct{}
	memPeakKB uint64
	guestHWM  int64 // the largest VmHWM seen among guest processes, kB
	kernel    *web.KernelSnapshot
}

// kernelSampleEvery is how often --report samples the kernel's memory.
const kernelSampleEvery = 100 * time.Millisecond

const nrSlots = 1024

// startAgent prepares what o's agent options ask for before the image is
// opened: the ephemeral copy (o.Image then names it) and the audit log's
// run-start record.
func startAgent(o *ImageOptions) (*agentRun, error) {
	if !o.Agent.any() {
		return nil, nil
	}
	a := &agentRun{o: o, base: o.Image, start: time.Now(), stop: make(chan struct{})}
	if o.Agent.Overlay != "" {
		if o.ReadOnly || o.Agent.Ephemeral {
			return nil, usagef("--overlay with --read-only, --ephemeral or --snapshot: give one")
		}
		k, err := openKeptOverlay(o.Agent.Overlay, o.Image)
		if err != nil {
			return nil, err
		}
		a.kept = k
	}
	if o.Agent.Ephemeral {
		if o.ReadOnly {
			return nil, usagef("--ephemeral and --read-only: give one (an ephemeral image is writable and thrown away)")
		}
		if err := a.makeEphemeral(); err != nil {
			a.abort()
			return nil, err
		}
	}
	if o.Agent.AuditSettings != "" && o.Agent.Audit == "" {
		return nil, usagef("--audit-settings needs --audit")
	}
	if o.Agent.Audit != "" {
		var id [8]byte
		rand.Read(id[:])
		l, err := audit.Open(o.Agent.Audit, hex.EncodeToString(id[:]))
		if err != nil {
			a.abort()
			return nil, err
		}
		a.log = l
		if o.Agent.AuditSettings != "" {
			l.SetSettings(o.Agent.AuditSettings)
		}
		data := map[string]any{
			"argv": o.Command, "image": a.base, "workdir": o.WorkDir,
			"tier": o.SyscallMode, "kbox_version": version,
			"ephemeral": o.Agent.Ephemeral, "read_only": o.ReadOnly,
		}
		if o.Agent.Timeout > 0 {
			data["timeout_ms"] = o.Agent.Timeout.Milliseconds()
		}
		if c := o.Agent.Policy; c != nil {
			data["policy_sha256"] = c.P.SHA256
			if len(c.P.Sources) > 0 {
				// Several --policy files, merged: each one's hash.
				data["policy_sources_sha256"] = c.P.Sources
			}
		}
		if o.Agent.Overlay != "" {
			// The image the run sees is this base with the kept
			// overlay's blocks over it.
			data["overlay"] = o.Agent.Overlay
		}
		// The content hash of the image the run starts from: the
		// ephemeral base, or the image itself before the kernel sees it.
		if h, err := fileSHA256(a.base); err == nil {
			data["image_sha256"] = h
		} else {
			data["image_sha256_error"] = err.Error()
		}
		a.startRec = data
		if _, err := a.log.Append("run_start", data); err != nil {
			a.abort()
			return nil, err
		}
	}
	return a, nil
}

// makeEphemeral prepares the copy-on-write layer: the base image, opened
// read-only with a shared lock (any number of ephemeral and read-only runs
// share it, no kbox opens it read-write meanwhile), and an empty sparse
// overlay file in a private directory, which takes every write
// (lkl.AddDiskCOW).
func (a *agentRun) makeEphemeral() error {
	t0 := time.Now()
	f, err := os.Open(a.base)
	if err != nil {
		return fmt.Errorf("ephemeral: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("ephemeral: %s is open read-write by another kbox: %w", a.base, err)
	}
	a.baseLock = f
	// The overlay has no name: nothing of it is left on the host after
	// kbox exits, even when kbox is killed.
	ov, err := os.CreateTemp("", "kbox-ephemeral-")
	if err != nil {
		return fmt.Errorf("ephemeral: %w", err)
	}
	os.Remove(ov.Name())
	a.overlay = ov
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("ephemeral: %w", err)
	}
	a.baseSize = fi.Size()
	a.dirty = lkl.NewCOWMap(a.baseSize)
	a.copyTime = time.Since(t0)
	return nil
}

// imageReadOnly says how the image must be opened: read-only for
// --read-only, and for an ephemeral run, whose base is only read.
func (a *agentRun) imageReadOnly(o *ImageOptions) bool {
	return o.ReadOnly || (a != nil && (a.overlay != nil || a.kept != nil))
}

// discardsWrites reports whether the run's disk writes all end with it:
// a read-only image, or --ephemeral without --snapshot. kbox then leaves
// the kernel running at its exit instead of unmounting and halting it
// (rootfs.Root.Leave).
func (a *agentRun) discardsWrites(o *ImageOptions) bool {
	if a == nil {
		return o.ReadOnly
	}
	if a.discard.Load() {
		return true
	}
	if a.kept != nil || a.o.Agent.Snapshot != "" {
		return false
	}
	return o.ReadOnly || a.overlay != nil
}

// keptOverlay is --overlay's layer (nil without it).
func (a *agentRun) keptOverlay() *keptOverlay {
	if a == nil {
		return nil
	}
	return a.kept
}

// overlayLayer is the copy-on-write overlay for rootfs.Options, nil when
// the run is not ephemeral.
func (a *agentRun) overlayLayer() *rootfs.Overlay {
	if a != nil && a.kept != nil {
		return a.kept.layer()
	}
	if a == nil || a.overlay == nil {
		return nil
	}
	return &rootfs.Overlay{File: a.overlay, Dirty: a.dirty}
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// attach gives the engine the exec hook and the syscall counters, and
// starts the timeout and the kernel sampling (readProc reads the kernel's
// own /proc). detach ends them.
func (a *agentRun) attach(eng *dispatch.Engine, readProc func(string) ([]byte, error)) {
	if a == nil {
		return
	}
	a.eng = eng
	if (a.o.Agent.Report != "" || a.o.Agent.Serve != "") && readProc != nil {
		a.sampler = web.NewSampler(web.SamplerConfig{ReadFile: func(p string) ([]byte, error) {
			return readProc(strings.TrimPrefix(p, "/proc/"))
		}})
	}
	if a.o.Agent.Report != "" && a.sampler != nil {
		a.sampled = make(chan struct{})
		go a.sample()
	}
	if a.log != nil {
		eng.OnExec = a.onExec
		if a.o.Agent.Policy != nil {
			eng.OnRefuse = a.onRefuse
		}
	}
	if a.o.Agent.Report != "" || a.o.Agent.Serve != "" {
		// A session's runs may ask for their own counts (servereport.go).
		prev := eng.Observe
		eng.Observe = func(r *dispatch.Request, res *dispatch.Result, lat time.Duration) {
			if r.Nr >= 0 && r.Nr < nrSlots && int(res.Disp) < web.NumDispositions {
				a.counts[r.Nr][res.Disp].Add(1)
			}
			if prev != nil {
				prev(r, res, lat)
			}
		}
	}
	if d := a.o.Agent.Timeout; d > 0 {
		go a.timeout(d)
	}
}

// timeout kills every guest process once d has passed, and again until
// the run ends: the main guest's death ends the run, and the supervisor
// then kills whatever is left (seccomp/supervisor).
func (a *agentRun) timeout(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.stop:
		return
	case <-t.C:
	}
	a.timedOut.Store(true)
	fmt.Fprintf(os.Stderr, "kbox: timeout after %v: killing the guest\n", d)
	// Every guest process the engine knows, the process group each
	// leads (the first guest's holds the whole guest, guestinit.c; a
	// group id that is a guest's pid can only be a guest's group), and
	// their children the engine may not know yet.
	// The groups first, each killed at once: one process killed while
	// its shell still runs would let the shell run on (`sleep; echo`
	// echoed after its sleep was killed).
	self := os.Getpid()
	for {
		pids := a.eng.Tgids(nil)
		for _, pid := range pids {
			if pid != self {
				unix.Kill(-pid, unix.SIGKILL)
			}
		}
		for _, pid := range pids {
			if pid == self {
				// An in-process tier's guest: ended through the
				// tier, so that kbox writes back before it exits.
				trap.Kill()
				continue
			}
			unix.Kill(pid, unix.SIGKILL)
			for _, c := range childrenOf(pid) {
				unix.Kill(c, unix.SIGKILL)
			}
		}
		select {
		case <-a.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// childrenOf lists the children of every thread of pid.
func childrenOf(pid int) []int {
	var out []int
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, _ := os.ReadDir(dir)
	for _, t := range tasks {
		b, _ := os.ReadFile(dir + "/" + t.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// sample keeps the high-water mark of the kernel's used memory.
func (a *agentRun) sample() {
	defer close(a.sampled)
	t := time.NewTicker(kernelSampleEvery)
	defer t.Stop()
	for {
		a.takeSample()
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
	}
}

func (a *agentRun) takeSample() web.Snapshot {
	snap := a.sampler.SampleNow()
	if snap.Kernel.Available {
		a.memPeakKB = max(a.memPeakKB, snap.Kernel.MemKB.UsedKB)
	}
	for _, pid := range a.eng.Tgids(nil) {
		a.guestHWM = max(a.guestHWM, vmHWM(pid))
	}
	return snap
}

// vmHWM is a host process's peak resident set (VmHWM), in kB; 0 when
// it cannot be read.
func vmHWM(pid int) int64 {
	b, err := hostproc.Read("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// detach ends the timeout and the sampling, and takes the kernel's last
// sample: it runs after the guest has gone, before the kernel halts.
func (a *agentRun) detach() {
	if a == nil {
		return
	}
	a.stopOnce.Do(func() {
		close(a.stop)
		if a.sampled != nil {
			<-a.sampled
			snap := a.takeSample()
			if snap.Kernel.Available {
				a.kernel = &snap.Kernel
			}
		}
	})
}

func (a *agentRun) onExec(x *dispatch.ExecRecord) {
	data := map[string]any{"pid": x.Pid, "path": x.Path, "argv": x.Argv, "sha256": hex.EncodeToString(x.SHA256[:])}
	if x.ArgvCut {
		data["argv_cut"] = true
	}
	if x.Interp != "" {
		data["interp"] = x.Interp
	}
	a.log.Append("exec", data) // a write error is reported at run end
}

// Report is what --report writes: the run's result for kbox mcp.
type Report struct {
	Status      int            `json:"status"`
	TimedOut    bool           `json:"timed_out"`
	DurationMs  int64          `json:"duration_ms"`
	Tier        string         `json:"tier"`
	Error       string         `json:"error,omitempty"`
	Telemetry   *Telemetry     `json:"telemetry,omitempty"`
	AuditHead   string         `json:"audit_head,omitempty"`
	Ephemeral   bool           `json:"ephemeral"`
	SetupMs     float64        `json:"ephemeral_setup_ms,omitempty"`
	Snapshot    string         `json:"snapshot,omitempty"`
	Extra       map[string]any `json:"extra,omitempty"`
	GuestMaxRSS int64          `json:"guest_peak_rss_kb,omitempty"`
	// Kernel is the kernel's telemetry as the run ended (the
	// observatory's snapshot "kernel"), KernelMemPeakKB the most memory
	// it was seen using.
	Kernel          *web.KernelSnapshot `json:"kernel,omitempty"`
	KernelMemPeakKB uint64              `json:"kernel_mem_peak_kb,omitempty"`
}

// Telemetry counts the run's syscalls.
type Telemetry struct {
	Syscalls uint64 `json:"syscalls"`
	// ByFamily is family -> disposition -> count.
	ByFamily map[string]map[string]uint64 `json:"by_family"`
	ENOSYS   map[string]uint64            `json:"enosys,omitempty"`
	Denied   map[string]uint64            `json:"denied,omitempty"`
	// Policy counts the calls each policy rule refused.
	Policy map[string]uint64 `json:"policy_refusals,omitempty"`
}

func (a *agentRun) telemetry() *Telemetry {
	t := &Telemetry{ByFamily: map[string]map[string]uint64{}, ENOSYS: map[string]uint64{}, Denied: map[string]uint64{}}
	if c := a.o.Agent.Policy; c != nil {
		t.Policy = c.Refusals()
	}
	var counts [nrSlots][web.NumDispositions]uint64
	for nr := range a.counts {
		for d := range a.counts[nr] {
			counts[nr][d] = a.counts[nr][d].Load()
		}
	}
	t.add(&counts)
	return t
}

// add counts counts (syscall number -> disposition -> calls) into t.
func (t *Telemetry) add(counts *[nrSlots][web.NumDispositions]uint64) {
	for nr := range counts {
		for d, n := range counts[nr] {
			if n == 0 {
				continue
			}
			t.Syscalls += n
			fam := dispatch.FamilyOf(nr)
			if t.ByFamily[fam] == nil {
				t.ByFamily[fam] = map[string]uint64{}
			}
			t.ByFamily[fam][web.Disposition(d).String()] += n
			switch web.Disposition(d) {
			case web.DispENOSYS:
				t.ENOSYS[dispatch.NameOf(nr)] += n
			case web.DispDenied:
				t.Denied[dispatch.NameOf(nr)] += n
			}
		}
	}
}

// finish runs after the kernel has written the image back and halted: the
// snapshot, the audit log's run-end record, the report, the ephemeral
// copy's removal. It returns the status kbox exits with.
func (a *agentRun) finish(status int, runErr error) (int, error) {
	if a == nil {
		return status, runErr
	}
	a.detach()
	defer a.cleanup()
	rep := Report{Status: status, TimedOut: a.timedOut.Load(), DurationMs: time.Since(a.start).Milliseconds(),
		Tier: a.o.SyscallMode, Ephemeral: a.o.Agent.Ephemeral, SetupMs: float64(a.copyTime.Microseconds()) / 1000}
	if runErr == nil && a.o.Agent.Snapshot != "" {
		if err := a.saveSnapshot(a.o.Agent.Snapshot); err != nil {
			runErr = fmt.Errorf("snapshot: %w", err)
		} else {
			rep.Snapshot = a.o.Agent.Snapshot
		}
	}
	if a.kept != nil && !a.discard.Load() {
		// The kernel has halted: the overlay and its map agree.
		if err := a.kept.save(); err != nil && runErr == nil {
			runErr = fmt.Errorf("overlay %s: saving its map: %w", a.o.Agent.Overlay, err)
		}
	}
	if runErr != nil {
		rep.Error = runErr.Error()
	}
	if a.o.Agent.Report != "" {
		rep.Telemetry = a.telemetry()
		rep.GuestMaxRSS = a.guestHWM
		rep.Kernel, rep.KernelMemPeakKB = a.kernel, a.memPeakKB
	}
	if a.log != nil {
		data := map[string]any{"status": status, "timed_out": rep.TimedOut, "duration_ms": rep.DurationMs}
		if runErr != nil {
			data["error"] = runErr.Error()
		}
		if c := a.o.Agent.Policy; c != nil {
			data["policy_refusals"] = c.Refusals()
			if n := a.pol.dropped.Load(); n > 0 {
				data["policy_refusals_not_logged"] = n
			}
		}
		if n := a.netAud.dropped.Load(); n > 0 {
			data["net_connections_not_logged"] = n
		}
		if rep.Telemetry != nil {
			data["syscalls"] = rep.Telemetry.Syscalls
			data["enosys"] = rep.Telemetry.ENOSYS
			data["denied"] = rep.Telemetry.Denied
		}
		if rep.Snapshot != "" {
			data["snapshot"] = rep.Snapshot
		}
		head, err := a.log.Append("run_end", data)
		if cerr := a.log.Close(); err == nil {
			err = cerr
		}
		a.log = nil
		if err != nil && runErr == nil {
			runErr = err
			rep.Error = err.Error()
		}
		rep.AuditHead = head
		fmt.Fprintf(os.Stderr, "kbox: audit head %s\n", head)
	}
	if a.o.Agent.Report != "" {
		b, _ := json.Marshal(&rep)
		if err := os.WriteFile(a.o.Agent.Report, append(b, '\n'), 0o600); err != nil && runErr == nil {
			runErr = fmt.Errorf("report: %w", err)
		}
	}
	return status, runErr
}

// saveSnapshot writes the image as the ephemeral run left it to out: a
// sparse copy of the base with the overlay's written blocks (the dirty
// map's, not the overlay's data extents, which a host filesystem may
// round up) copied over it,
// through a temporary name so that out is whole or absent.
func (a *agentRun) saveSnapshot(out string) error {
	tmp := out + ".kbox-tmp"
	if err := sessiondir.SparseCopy(a.baseLock, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	err = sessiondir.CopyRanges(a.overlay, f, a.dirty.DirtyRanges())
	if serr := f.Sync(); err == nil {
		err = serr
	}
	f.Close()
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, out)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// abort undoes startAgent before any kernel ran.
func (a *agentRun) abort() {
	if a.kept != nil {
		os.Remove(filepath.Join(a.kept.dir, overlayBusy)) // nothing was written
	}
	a.cleanup()
}

func (a *agentRun) cleanup() {
	if a.log != nil {
		a.log.Close()
		a.log = nil
	}
	if a.left {
		// The kernel's disk still uses the overlay, the layers under it
		// and their maps until kbox exits: closed then, never reused
		// before.
		return
	}
	if a.kept != nil {
		a.kept.release()
		a.kept = nil
	}
	if a.overlay != nil {
		a.overlay.Close()
		a.overlay = nil
	}
	a.dirty.Free() // the kernel has halted: the disk is gone
	if a.baseLock != nil {
		a.baseLock.Close()
		a.baseLock = nil
	}
}

// withEnv sets each NAME=VALUE of extra in env, replacing an earlier NAME.
func withEnv(env, extra []string) []string {
	out := append([]string{}, env...)
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, e := range out {
			if strings.HasPrefix(e, name+"=") {
				out[i], replaced = kv, true
				break
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}
