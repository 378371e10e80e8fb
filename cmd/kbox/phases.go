package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// phaseTimer says where a run's time goes, from kbox's main to its exit,
// when KBOX_TRACE_STARTUP is set (docs/benchmarks.md, "Start-up"): each
// mark closes a phase begun at the one before. It costs nothing unset.
type phaseTimer struct {
	on    bool
	last  time.Time
	start time.Time
	names []string
	took  []time.Duration
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
	now := time.Now()
	p.names = append(p.names, name)
	p.took = append(p.took, now.Sub(p.last))
	p.last = now
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
	fmt.Fprintln(os.Stderr, b.String())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
