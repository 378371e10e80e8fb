package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kbox-project/kbox/hostproc"
)

// phaseTimer says where a run's time goes, from kbox's main to its exit,
// when KBOX_TRACE_STARTUP is set (docs/benchmarks.md, "Start-up"): each
// mark closes a phase begun at the one before. It costs nothing unset.
type phaseTimer struct {
	on bool
	mu sync.Mutex // the tiers mark from their own threads (hook)
	// tasks and goThreads are kbox's threads when the guest has just
	// exited, before anything is torn down: all of them, and those Go
	// made (the rest are LKL's kernel threads).
	tasks, goThreads int
	// settle: Go's threads before and after the run settled (settle.go).
	settle [2]int
	last   time.Time
	start  time.Time
	names  []string
	took   []time.Duration
}

var phases = newPhaseTimer(os.Getenv("KBOX_TRACE_STARTUP") != "")

func newPhaseTimer(on bool) *phaseTimer {
	now := time.Now()
	return &phaseTimer{on: on, last: now, start: now}
}

// mark ends the phase called name.
func (p *phaseTimer) mark(name string) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.tasks == 0 && (name == "run" || name == "exit") {
		p.countThreads()
	}
	p.names = append(p.names, name)
	p.took = append(p.took, now.Sub(p.last))
	p.last = now
}

// countThreads counts kbox's threads now.
func (p *phaseTimer) countThreads() {
	if d, err := os.ReadDir("/proc/self/task"); err == nil {
		p.tasks = len(d)
	}
	p.goThreads = goThreads()
}

// settled records Go's threads before and after the run settled.
func (p *phaseTimer) settled(before, after int) {
	if p.on {
		p.mu.Lock()
		p.settle = [2]int{before, after}
		p.mu.Unlock()
	}
}

// split divides the last phase in two at d from its start: the first
// part is called first, the rest keeps its name.
func (p *phaseTimer) split(first string, d time.Duration) {
	if !p.on || len(p.took) == 0 {
		return
	}
	i := len(p.took) - 1
	if d > p.took[i] {
		d = p.took[i]
	}
	p.names = append(p.names[:i], first, p.names[i])
	p.took = append(p.took[:i], d, p.took[i]-d)
}

// print writes the phases on stderr, one line.
func (p *phaseTimer) print() {
	if !p.on {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kbox: start-up trace: total %.1f ms:", ms(time.Since(p.start)))
	for i, n := range p.names {
		fmt.Fprintf(&b, " %s %.1f", n, ms(p.took[i]))
	}
	if p.tasks > 0 {
		fmt.Fprintf(&b, "; threads at the guest's exit %d: Go %d, LKL %d", p.tasks, p.goThreads, p.tasks-p.goThreads)
	}
	if p.settle[0] > 0 {
		fmt.Fprintf(&b, "; Go threads settled %d -> %d", p.settle[0], p.settle[1])
	}
	if kb := peakRSS(); kb > 0 {
		fmt.Fprintf(&b, "; peak RSS %d kB", kb)
	}
	fmt.Fprintln(os.Stderr, b.String())
}

// peakRSS is kbox's own peak resident set (VmHWM), in kB. A parent's
// wait4 cannot tell it: a child started with vfork (Go's os/exec) has
// its parent's peak recorded as its own at the exec.
func peakRSS() int {
	b, err := hostproc.Read("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int
			fmt.Sscan(v, &kb)
			return kb
		}
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
