package main

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/clock"
	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/trap"
	"github.com/kbox-project/kbox/usernet"
	"github.com/kbox-project/kbox/web"
)

// observatory is the optional instrumentation of one run: the event
// recorder (--web, --stats), the web server (--web) and the JSON trace
// (--trace-format json). Nothing of it exists unless asked for: without
// those options the supervisor gets no Observe hook at all.
type observatory struct {
	rec     *web.Recorder
	sampler *web.Sampler
	server  *web.Server
	addr    string
	netlog  *web.NetLog // --net: the stack's decisions
	closed  atomic.Bool // the trace is flushed: no more net lines

	trace     *web.TraceWriter
	traceFile *os.File // nil when tracing to stderr
	traceSeq  uint64

	stats bool
	start time.Time
	tier  atomic.Pointer[tierInfo] // for the snapshot (setTier)
}

// tierInfo is the tier running the guest and why.
type tierInfo struct{ mode, why string }

// setTier records the tier chosen (runImage: once chosen, and again when
// auto falls through), for the snapshot's "tier".
func (ob *observatory) setTier(mode, why string) {
	if ob == nil {
		return
	}
	ob.tier.Store(&tierInfo{mode, why})
	if ob.trace != nil {
		ob.trace.WriteTier(mode, why) // the trace's first line says it too
	}
}

// tierSnapshot is the snapshot's "tier": the in-process tiers add their
// sites, live (trap.Sites), as --stats prints them at the end.
func (ob *observatory) tierSnapshot() web.TierSnapshot {
	ti := ob.tier.Load()
	if ti == nil {
		return web.TierSnapshot{}
	}
	ts := web.TierSnapshot{Mode: ti.mode, Why: ti.why}
	if s, ok := trap.Sites(); ok && inProcess(ti.mode) {
		refused := map[string]int{}
		for k, v := range s.Refused {
			refused[k] = v
		}
		ts.Sites = &web.SiteCounts{Trapped: s.Seen, Patched: s.Patched, Inline: s.Inline,
			StillTrapping: s.Seen - s.Patched, Refused: refused, WXRefused: s.WX}
	}
	return ts
}

// started is when kbox started: --stats reports wall time from it.
var started = time.Now()

// kernelSource is where the sampler reads the guest kernel's /proc (from
// rootfs.Root) and the guest processes and fd tables (from the engine).
type kernelSource struct {
	readProc func(name string) ([]byte, error)
	eng      *dispatch.Engine
}

// guestAccounting sums the host's page-fault counters of the live guest
// processes (each including its waited-for children).
func guestAccounting(eng *dispatch.Engine) web.GuestSnapshot {
	var g web.GuestSnapshot
	for _, pid := range eng.Tgids(nil) {
		b, err := hostproc.Read("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		minor, major, err := web.ParsePidStatFaults(b)
		if err != nil {
			continue
		}
		g.Processes++
		g.PageFaults += minor + major
		g.MajorPageFaults += major
	}
	g.Available = g.Processes > 0
	return g
}

// newObservatory builds what o asks for, or returns nil when it asks for
// nothing. The web server is listening when it returns.
func newObservatory(o *ImageOptions, src kernelSource) (*observatory, error) {
	if !o.Web && o.TraceFormat == "" && !o.Stats {
		return nil, nil
	}
	clock.Init() // latency timestamps: calibrate off the hot path
	ob := &observatory{stats: o.Stats, start: started}
	if o.TraceFormat != "" {
		w := os.Stderr
		if o.TraceFile != "" {
			f, err := os.OpenFile(o.TraceFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return nil, fmt.Errorf("trace file: %w", err)
			}
			ob.traceFile, w = f, f
		}
		ob.trace = web.NewTraceWriter(w)
	}
	if o.Web || o.Stats {
		ob.rec = web.NewRecorder(web.RecorderConfig{
			Family: func(nr int32) string { return dispatch.FamilyOf(int(nr)) },
		})
	}
	if o.Net && (o.Web || o.TraceFormat != "") {
		ob.netlog = web.NewNetLog(0)
	}
	if o.Web {
		ob.sampler = web.NewSampler(web.SamplerConfig{
			Recorder: ob.rec,
			FDTable:  src.eng.FDOccupancy,
			Guest:    func() web.GuestSnapshot { return guestAccounting(src.eng) },
			Tier:     ob.tierSnapshot,
			ReadFile: func(p string) ([]byte, error) {
				return src.readProc(strings.TrimPrefix(p, "/proc/"))
			},
		})
		ob.server = web.NewServer(web.Options{
			Addr: o.WebBind, Port: o.WebPort, Token: o.WebToken,
			Recorder: ob.rec, Sampler: ob.sampler, NetLog: ob.netlog,
		})
		addr, err := ob.server.Start()
		if err != nil {
			ob.close()
			return nil, fmt.Errorf("observatory: %w", err)
		}
		ob.addr = addr
		ob.sampler.Start()
		if !web.IsLoopback(o.WebBind) {
			how := "anyone who can reach it can read the guest's syscalls and paths"
			if o.WebToken != "" {
				how = "it is protected only by the token, over plain HTTP"
			}
			fmt.Fprintf(os.Stderr, "kbox: warning: the observatory listens on %s, not loopback: %s\n", o.WebBind, how)
		}
		fmt.Fprintf(os.Stderr, "kbox: observatory at http://%s/\n", addr)
	}
	return ob, nil
}

// observe records one dispatched syscall. It runs on the serving thread
// and never blocks on the web layer: Record is a lock-free ring write.
func (ob *observatory) observe(req *dispatch.Request, res *dispatch.Result, lat time.Duration) {
	ev := web.Event{
		Pid:       int32(req.G.Pid()),
		Nr:        int32(req.Nr),
		Name:      dispatch.NameOf(req.Nr),
		Disp:      web.Disposition(res.Disp),
		LatencyNs: int64(lat),
		Path:      req.Path,
		Peer:      req.Peer,
		Rule:      req.Rule,
	}
	switch {
	case res.Action == dispatch.Continue, res.Action == dispatch.Deferred:
		// The host kernel runs it, or it is answered later; its
		// result is not seen.
	case res.Errno != 0:
		ev.Ret, ev.Errno = -int64(res.Errno), int32(res.Errno)
	default:
		ev.Ret = res.Val
	}
	if ob.rec != nil {
		ob.rec.Record(&ev)
	}
	if ob.trace != nil {
		ob.traceSeq++
		ev.Seq = ob.traceSeq
		if ev.TimeNs == 0 {
			ev.TimeNs = time.Now().UnixNano()
		}
		ob.trace.Write(&ev)
	}
}

// netDecision is a decision of the network stack as the observatory
// shows it.
func netDecision(ev usernet.Event) web.NetDecision {
	d := web.NetDecision{Proto: ev.Proto, Verdict: "refused", Inbound: ev.Inbound, Rule: ev.Rule, Why: ev.Why}
	if ev.Allowed {
		d.Verdict = "allowed"
	}
	str := func(a netip.AddrPort) string {
		if !a.IsValid() {
			return ""
		}
		return a.String()
	}
	d.Guest, d.Dest, d.Real = str(ev.Guest), str(ev.Dest), str(ev.Real)
	return d
}

// netEvent records a decision of the network stack (--net): in the
// decision log (/api/net, SSE) and the trace, never sampled. It runs on
// the stack's goroutines.
func (ob *observatory) netEvent(ev usernet.Event) {
	if ob.netlog == nil || ob.closed.Load() {
		return
	}
	d := ob.netlog.Add(netDecision(ev))
	if ob.trace != nil {
		ob.trace.WriteNet(&d)
	}
}

// netHook is netEvent, nil without a decision log.
func (ob *observatory) netHook() func(usernet.Event) {
	if ob == nil || ob.netlog == nil {
		return nil
	}
	return ob.netEvent
}

// hook returns the supervisor's Observe function, nil when ob is nil.
func (ob *observatory) hook() func(*dispatch.Request, *dispatch.Result, time.Duration) {
	if ob == nil {
		return nil
	}
	return ob.observe
}

// close stops the server and sampler, flushes the trace and prints the
// --stats summary. It must run before the kernel halts: the sampler reads
// the kernel's /proc.
func (ob *observatory) close() {
	if ob == nil {
		return
	}
	ob.closed.Store(true)
	if ob.server != nil {
		ob.server.Close()
	}
	if ob.sampler != nil {
		ob.sampler.Stop()
	}
	if ob.trace != nil {
		if err := ob.trace.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "kbox: trace: %v\n", err)
		}
		if ob.traceFile != nil {
			ob.traceFile.Close()
		}
	}
	if ob.stats {
		web.FormatStats(os.Stderr, ob.rec, time.Since(ob.start), 15)
	}
}
