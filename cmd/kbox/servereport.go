package main

import (
	"maps"
	"sync"
	"time"

	"github.com/kbox-project/kbox/web"
)

// A run request with Report (kbox mcp's warm pool, agent/pool.go) gets
// what a one-shot run's --report and audit log give: the syscalls counted
// while it ran, and a serve_run and a serve_run_end record in the audit
// log, whose head the answer carries, and the kernel's memory and the
// guests' peak RSS sampled every 100 ms while it runs, with the kernel's
// snapshot as it ended. The counts and samples are the kernel's while
// the run lasted: in a kernel that serves one run, that run's.

// serveRun is one reported run's state.
type serveRun struct {
	a      *agentRun
	start  time.Time
	counts [nrSlots][web.NumDispositions]uint64
	pol    map[string]uint64
	// Sampling, when the kernel's /proc can be read.
	stop    chan struct{}
	sampled chan struct{}
	mu      sync.Mutex
	memPeak uint64
	hwm     int64
}

// beginServeRun notes the counts before the run and appends its
// serve_run record. Nil without agent options.
func (a *agentRun) beginServeRun(req *ServeRequest, wd string) *serveRun {
	if a == nil {
		return nil
	}
	r := &serveRun{a: a, start: time.Now()}
	for nr := range a.counts {
		for d := range a.counts[nr] {
			r.counts[nr][d] = a.counts[nr][d].Load()
		}
	}
	if c := a.o.Agent.Policy; c != nil {
		r.pol = c.Refusals()
	}
	if a.sampler != nil {
		r.stop, r.sampled = make(chan struct{}), make(chan struct{})
		go r.sample()
	}
	if a.log != nil {
		data := maps.Clone(a.startRec)
		data["argv"], data["workdir"] = req.Argv, wd
		if req.TimeoutMs > 0 {
			data["timeout_ms"] = req.TimeoutMs
		}
		a.log.Append("serve_run", data) // a write error is reported at the end
	}
	return r
}

// end fills ans's telemetry and audit head and appends the run's
// serve_run_end record.
func (r *serveRun) end(ans *ServeAnswer) {
	if r == nil || ans == nil {
		return
	}
	a := r.a
	if r.stop != nil {
		close(r.stop)
		<-r.sampled
		snap := r.takeSample()
		if snap.Kernel.Available {
			ans.Kernel = &snap.Kernel
		}
		ans.KernelMemPeakKB, ans.GuestMaxRSS = r.memPeak, r.hwm
	}
	t := &Telemetry{ByFamily: map[string]map[string]uint64{}, ENOSYS: map[string]uint64{}, Denied: map[string]uint64{}}
	var now [nrSlots][web.NumDispositions]uint64
	for nr := range a.counts {
		for d := range a.counts[nr] {
			now[nr][d] = a.counts[nr][d].Load() - r.counts[nr][d]
		}
	}
	t.add(&now)
	if c := a.o.Agent.Policy; c != nil {
		t.Policy = map[string]uint64{}
		for rule, n := range c.Refusals() {
			if n > r.pol[rule] {
				t.Policy[rule] = n - r.pol[rule]
			}
		}
	}
	ans.Telemetry = t
	if a.log == nil {
		return
	}
	data := map[string]any{"status": ans.Status, "timed_out": ans.TimedOut,
		"duration_ms": time.Since(r.start).Milliseconds(),
		"syscalls":    t.Syscalls, "enosys": t.ENOSYS, "denied": t.Denied}
	if ans.Error != "" {
		data["error"] = ans.Error
	}
	if t.Policy != nil {
		data["policy_refusals"] = t.Policy
	}
	head, err := a.log.Append("serve_run_end", data)
	if err != nil && ans.Error == "" {
		ans.Error = "audit log: " + err.Error()
	}
	ans.AuditHead = head
}

// sample keeps the run's peaks until stop, from kernelSampleEvery after
// the start: end takes the last sample, so a short run pays for one
// sample, after its program ended, not for another beside its start.
func (r *serveRun) sample() {
	defer close(r.sampled)
	t := time.NewTicker(kernelSampleEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.takeSample()
	}
}

func (r *serveRun) takeSample() web.Snapshot {
	snap := r.a.sampler.SampleNow()
	r.mu.Lock()
	defer r.mu.Unlock()
	if snap.Kernel.Available {
		r.memPeak = max(r.memPeak, snap.Kernel.MemKB.UsedKB)
	}
	for _, pid := range r.a.eng.Tgids(nil) {
		r.hwm = max(r.hwm, vmHWM(pid))
	}
	return snap
}
