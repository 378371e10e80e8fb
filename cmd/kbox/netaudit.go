package main

import (
	"sync/atomic"

	"github.com/kbox-project/kbox/usernet"
)

// --audit with --net: each decision of the network stack on a guest flow
// (an outgoing connection or UDP flow allowed or refused, a connection to
// a published port) is a "net_connection" record in the hash chain
// (docs/agents.md).

// auditNetMax bounds the network records of one run: a guest connecting
// in a loop must not fill the disk. run_end counts the rest.
const auditNetMax = 1000

// netAudit counts a run's network records.
type netAudit struct {
	logged  atomic.Int64
	dropped atomic.Int64
}

// netHook is the stack's decision sink with --audit, nil without.
func (a *agentRun) netHook() func(usernet.Event) {
	if a == nil || a.log == nil {
		return nil
	}
	return a.netRecord
}

// netRecord appends one decision. It runs on the stack's goroutines;
// Append serialises.
func (a *agentRun) netRecord(ev usernet.Event) {
	if a.netAud.logged.Add(1) > auditNetMax {
		a.netAud.dropped.Add(1)
		return
	}
	d := netDecision(ev)
	data := map[string]any{
		"proto": d.Proto, "verdict": d.Verdict, "rule": d.Rule,
		"direction": "out", "guest": d.Guest, "dest": d.Dest, "real": d.Real,
	}
	if ev.Inbound {
		// Real is the host peer that connected to the published port.
		data["direction"] = "in"
		delete(data, "real")
		data["peer"] = d.Real
	}
	if d.Why != d.Rule {
		data["why"] = d.Why
	}
	a.log.Append("net_connection", data)
}
