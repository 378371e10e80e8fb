package web

import (
	"bytes"
	"errors"
	"strconv"
	"sync"
	"time"
)

// SoftirqNames are the softirq types in /proc/stat order.
var SoftirqNames = [NumSoftirqs]string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}

// NumSoftirqs is the number of named softirq types.
const NumSoftirqs = 10

// ProcStat holds the fields of /proc/stat the observatory uses.
type ProcStat struct {
	Ctxt         uint64              // context switches since boot
	Processes    uint64              // forks since boot
	ProcsRunning uint64              // runnable tasks now
	ProcsBlocked uint64              // tasks blocked on I/O now
	SoftirqTotal uint64              // all softirqs since boot
	Softirqs     [NumSoftirqs]uint64 // per type, see SoftirqNames
}

// MemInfo holds the fields of /proc/meminfo the observatory uses, in KiB.
// UsedKB = Total - Free - Buffers - Cached - Slab (clamped at 0), so that
// Used+Buffers+Cached+Slab+Free stack to Total.
type MemInfo struct {
	TotalKB, FreeKB, BuffersKB, CachedKB, SlabKB, UsedKB uint64
}

// VMStat holds the fields of /proc/vmstat the observatory uses.
type VMStat struct {
	PgFault, PgMajFault uint64
}

// LoadAvg is /proc/loadavg.
type LoadAvg struct {
	Load         [3]float64 // 1, 5, 15 minute averages
	Running      uint64     // runnable scheduling entities
	Total        uint64     // scheduling entities
	LastPid      uint64
	ParsedFields int // number of fields successfully parsed
}

var errNoData = errors.New("observatory: no recognised fields")

// forEachLine calls fn with the first field and the rest of the fields of
// every non-empty line.
func forEachLine(b []byte, fn func(key []byte, rest [][]byte)) {
	for len(b) > 0 {
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		fn(f[0], f[1:])
	}
}

func parseU(b []byte) (uint64, bool) {
	v, err := strconv.ParseUint(string(b), 10, 64)
	return v, err == nil
}

// ParseStat parses /proc/stat. Missing lines leave zero values; it fails
// only if none of the wanted lines is present.
func ParseStat(b []byte) (ProcStat, error) {
	var s ProcStat
	found := false
	forEachLine(b, func(key []byte, rest [][]byte) {
		if len(rest) == 0 {
			return
		}
		var dst *uint64
		switch string(key) {
		case "ctxt":
			dst = &s.Ctxt
		case "processes":
			dst = &s.Processes
		case "procs_running":
			dst = &s.ProcsRunning
		case "procs_blocked":
			dst = &s.ProcsBlocked
		case "softirq":
			v, ok := parseU(rest[0])
			if !ok {
				return
			}
			s.SoftirqTotal = v
			found = true
			for i := 0; i < NumSoftirqs && i+1 < len(rest); i++ {
				if v, ok := parseU(rest[i+1]); ok {
					s.Softirqs[i] = v
				}
			}
			return
		default:
			return
		}
		if v, ok := parseU(rest[0]); ok {
			*dst = v
			found = true
		}
	})
	if !found {
		return s, errNoData
	}
	return s, nil
}

// ParseMeminfo parses /proc/meminfo (values in kB).
func ParseMeminfo(b []byte) (MemInfo, error) {
	var m MemInfo
	found := false
	forEachLine(b, func(key []byte, rest [][]byte) {
		if len(rest) == 0 {
			return
		}
		var dst *uint64
		switch string(key) {
		case "MemTotal:":
			dst = &m.TotalKB
		case "MemFree:":
			dst = &m.FreeKB
		case "Buffers:":
			dst = &m.BuffersKB
		case "Cached:":
			dst = &m.CachedKB
		case "Slab:":
			dst = &m.SlabKB
		default:
			return
		}
		if v, ok := parseU(rest[0]); ok {
			*dst = v
			found = true
		}
	})
	if !found {
		return m, errNoData
	}
	m.UsedKB = 0
	rest := m.FreeKB
	for _, x := range []uint64{m.BuffersKB, m.CachedKB, m.SlabKB} {
		if rest+x < rest { // overflow
			rest = ^uint64(0)
			break
		}
		rest += x
	}
	if m.TotalKB > rest {
		m.UsedKB = m.TotalKB - rest
	}
	return m, nil
}

// ParseVMStat parses /proc/vmstat.
func ParseVMStat(b []byte) (VMStat, error) {
	var v VMStat
	found := false
	forEachLine(b, func(key []byte, rest [][]byte) {
		if len(rest) == 0 {
			return
		}
		var dst *uint64
		switch string(key) {
		case "pgfault":
			dst = &v.PgFault
		case "pgmajfault":
			dst = &v.PgMajFault
		default:
			return
		}
		if x, ok := parseU(rest[0]); ok {
			*dst = x
			found = true
		}
	})
	if !found {
		return v, errNoData
	}
	return v, nil
}

// ParseFileNr parses /proc/sys/fs/file-nr ("allocated unused max"): the
// kernel's open files.
func ParseFileNr(b []byte) (uint64, error) {
	f := bytes.Fields(b)
	if len(f) < 1 {
		return 0, errNoData
	}
	n, ok := parseU(f[0])
	if !ok {
		return 0, errNoData
	}
	return n, nil
}

// ParseLoadavg parses /proc/loadavg ("0.52 0.58 0.59 2/1234 56789").
func ParseLoadavg(b []byte) (LoadAvg, error) {
	var l LoadAvg
	f := bytes.Fields(b)
	if len(f) < 3 {
		return l, errNoData
	}
	for i := 0; i < 3; i++ {
		v, err := strconv.ParseFloat(string(f[i]), 64)
		if err != nil || v != v || v < 0 || v > 1e12 {
			return l, errNoData
		}
		l.Load[i] = v
		l.ParsedFields++
	}
	if len(f) > 3 {
		if i := bytes.IndexByte(f[3], '/'); i > 0 {
			r, ok1 := parseU(f[3][:i])
			t, ok2 := parseU(f[3][i+1:])
			if ok1 && ok2 {
				l.Running, l.Total = r, t
				l.ParsedFields++
			}
		}
	}
	if len(f) > 4 {
		if p, ok := parseU(f[4]); ok {
			l.LastPid = p
			l.ParsedFields++
		}
	}
	return l, nil
}

// ParsePidStatFaults returns the page faults of a host /proc/PID/stat
// line: the process's own minor and major faults plus those of its
// waited-for children (minflt+cminflt, majflt+cmajflt).
func ParsePidStatFaults(b []byte) (minor, major uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errNoData
	}
	// Fields after "(comm)": state ppid pgrp session tty_nr tpgid flags
	// minflt cminflt majflt cmajflt ...
	f := bytes.Fields(b[i+1:])
	if len(f) < 11 {
		return 0, 0, errNoData
	}
	var v [4]uint64
	for j := range v {
		n, ok := parseU(f[7+j])
		if !ok {
			return 0, 0, errNoData
		}
		v[j] = n
	}
	return v[0] + v[1], v[2] + v[3], nil
}

// ---------------------------------------------------------------------------
// Snapshot

// DispositionCounts is the per-disposition section of a Snapshot.
type DispositionCounts struct {
	LKL      uint64 `json:"lkl"`
	Host     uint64 `json:"host"`
	Emulated uint64 `json:"emulated"`
	Denied   uint64 `json:"denied"`
	ENOSYS   uint64 `json:"enosys"`
}

// FDTableStat is the FD-table occupancy.
type FDTableStat struct {
	Used     int `json:"used"`
	Capacity int `json:"capacity"`
}

// MemKB is the memory section of a KernelSnapshot (KiB).
type MemKB struct {
	TotalKB   uint64 `json:"total_kb"`
	FreeKB    uint64 `json:"free_kb"`
	BuffersKB uint64 `json:"buffers_kb"`
	CachedKB  uint64 `json:"cached_kb"`
	SlabKB    uint64 `json:"slab_kb"`
	UsedKB    uint64 `json:"used_kb"`
}

// KernelSnapshot is telemetry from the guest kernel's /proc.
type KernelSnapshot struct {
	Available           bool               `json:"available"` // false if /proc/stat could not be read
	ContextSwitches     uint64             `json:"context_switches"`
	ContextSwitchesPerS float64            `json:"context_switches_per_s"`
	ProcessesForked     uint64             `json:"processes_forked"`
	ProcsRunning        uint64             `json:"procs_running"`
	ProcsBlocked        uint64             `json:"procs_blocked"`
	Softirqs            map[string]uint64  `json:"softirqs"`
	SoftirqRatePerS     map[string]float64 `json:"softirq_rate_per_s"`
	MemKB               MemKB              `json:"mem_kb"`
	PageFaults          uint64             `json:"page_faults"`
	MajorPageFaults     uint64             `json:"major_page_faults"`
	PageFaultsPerS      float64            `json:"page_faults_per_s"`
	LoadAvg             [3]float64         `json:"loadavg"`
	OpenFiles           uint64             `json:"open_files"` // files open in the kernel (sys/fs/file-nr)
}

// GuestSnapshot is the host kernel's accounting of the guest processes.
// LKL is a no-MMU kernel that never maps guest memory, so its own
// pgfault counters stay 0; the guest's page faults happen in the host.
type GuestSnapshot struct {
	Available       bool    `json:"available"`
	Processes       int     `json:"processes"`   // live guest processes
	PageFaults      uint64  `json:"page_faults"` // minor + major, with waited-for children
	MajorPageFaults uint64  `json:"major_page_faults"`
	PageFaultsPerS  float64 `json:"page_faults_per_s"`
}

// EventStats describes the event ring.
type EventStats struct {
	Recorded   uint64 `json:"recorded"`    // written to the ring
	SampledOut uint64 `json:"sampled_out"` // counted only
	Dropped    uint64 `json:"dropped"`     // lost to writer collisions
	RingSize   int    `json:"ring_size"`
	HeadSeq    uint64 `json:"head_seq"`
}

// Snapshot is one sample of the observatory state. Names carry units.
type Snapshot struct {
	TimeNs          int64              `json:"time_ns"`   // wall clock, Unix ns
	UptimeNs        int64              `json:"uptime_ns"` // since the Recorder was created
	SyscallsTotal   uint64             `json:"syscalls_total"`
	SyscallRatePerS float64            `json:"syscall_rate_per_s"`
	Families        map[string]uint64  `json:"families"`
	FamilyRatePerS  map[string]float64 `json:"family_rate_per_s"`
	Dispositions    DispositionCounts  `json:"dispositions"`
	LatencyHistNs   []HistBucket       `json:"latency_hist_ns,omitempty"` // omitted in /api/history
	FDTable         FDTableStat        `json:"fd_table"`
	Kernel          KernelSnapshot     `json:"kernel"`
	Guest           GuestSnapshot      `json:"guest"`
	Net             NetSnapshot        `json:"net"`
	Tier            TierSnapshot       `json:"tier"`
	Events          EventStats         `json:"events"`
	Paused          bool               `json:"paused"`

	ps ProcStat // raw values for rate computation
}

// TierSnapshot is the tier running the guest (docs/tiers.md) and why,
// and in the in-process tiers their syscall sites.
type TierSnapshot struct {
	Mode  string      `json:"mode"` // seccomp, trap, rewrite; "" before auto chose
	Why   string      `json:"why"`  // "asked for", or auto's reason
	Sites *SiteCounts `json:"sites,omitempty"`
}

// SiteCounts are the rewrite tier's syscall sites (the trap tier's are
// all still trapping), as --stats prints them.
type SiteCounts struct {
	Trapped       int            `json:"trapped"`        // distinct sites that trapped
	Patched       int            `json:"patched"`        // of them patched
	Inline        int            `json:"inline"`         // of the patched, answered in the stub
	StillTrapping int            `json:"still_trapping"` // trapped - patched
	Refused       map[string]int `json:"refused"`        // of them refused, by reason
	WXRefused     int            `json:"wx_refused"`     // mmap/mprotect asking for write and execute
}

// SamplerConfig configures NewSampler.
type SamplerConfig struct {
	// ReadFile reads a /proc file by absolute path, e.g. "/proc/stat".
	// Nil disables kernel telemetry.
	ReadFile func(path string) ([]byte, error)
	// ProcRoot is prepended to "stat", "meminfo", ... (default "/proc").
	ProcRoot string
	// Interval between samples (default 1s).
	Interval time.Duration
	// History is the number of snapshots kept (default 300).
	History int
	// Recorder supplies syscall counters (may be nil).
	Recorder *Recorder
	// FDTable returns FD-table occupancy (may be nil).
	FDTable func() (used, capacity int)
	// Guest returns the host's accounting of the guest processes (may be
	// nil).
	Guest func() GuestSnapshot
	// Tier returns the tier and its sites (may be nil).
	Tier func() TierSnapshot
}

// Sampler periodically builds Snapshots and keeps a bounded history.
type Sampler struct {
	cfg SamplerConfig

	mu      sync.Mutex
	hist    []Snapshot // ring of snapshots
	next    int
	count   int
	last    *Snapshot
	paused  bool
	running bool
	stop    chan struct{}
	done    chan struct{}
}

// NewSampler returns a stopped Sampler; call Start to sample periodically
// or SampleNow to sample once.
func NewSampler(cfg SamplerConfig) *Sampler {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.History <= 0 {
		cfg.History = 300
	}
	return &Sampler{cfg: cfg, hist: make([]Snapshot, cfg.History)}
}

// Interval returns the sampling interval.
func (s *Sampler) Interval() time.Duration { return s.cfg.Interval }

// Start begins periodic sampling in a goroutine (no-op if running).
func (s *Sampler) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return
	}
	s.running = true
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	go s.loop(s.stop, s.done)
}

// Stop ends periodic sampling and waits for the goroutine to exit.
func (s *Sampler) Stop() {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return
	}
	s.running = false
	stop, done := s.stop, s.done
	s.mu.Unlock()
	close(stop)
	<-done
}

func (s *Sampler) loop(stop, done chan struct{}) {
	defer close(done)
	s.SampleNow()
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if !s.Paused() {
				s.SampleNow()
			}
		}
	}
}

// Pause stops adding snapshots to the history until Resume.
func (s *Sampler) Pause() { s.mu.Lock(); s.paused = true; s.mu.Unlock() }

// Resume restarts sampling after Pause.
func (s *Sampler) Resume() { s.mu.Lock(); s.paused = false; s.mu.Unlock() }

// Paused reports whether sampling is paused.
func (s *Sampler) Paused() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.paused }

func (s *Sampler) read(name string) []byte {
	if s.cfg.ReadFile == nil {
		return nil
	}
	b, err := s.cfg.ReadFile(s.cfg.ProcRoot + "/" + name)
	if err != nil {
		return nil
	}
	return b
}

func rate(cur, prev uint64, dt float64) float64 {
	if dt <= 0 || cur < prev {
		return 0
	}
	return float64(cur-prev) / dt
}

// collect builds a snapshot without rates.
func (s *Sampler) collect() Snapshot {
	r := s.cfg.Recorder
	snap := Snapshot{
		TimeNs:        time.Now().UnixNano(),
		UptimeNs:      int64(r.Uptime()),
		SyscallsTotal: r.Total(),
		Families:      r.FamilyCounts(),
		LatencyHistNs: r.LatencyHistogram(),
		Events: EventStats{
			Recorded: r.Recorded(), SampledOut: r.SampledOut(), Dropped: r.Dropped(),
			RingSize: r.Capacity(), HeadSeq: r.Head(),
		},
	}
	d := r.Dispositions()
	snap.Dispositions = DispositionCounts{d[DispLKL], d[DispHost], d[DispEmulated], d[DispDenied], d[DispENOSYS]}
	snap.FamilyRatePerS = make(map[string]float64, len(snap.Families))
	for f := range snap.Families {
		snap.FamilyRatePerS[f] = 0
	}
	if s.cfg.FDTable != nil {
		snap.FDTable.Used, snap.FDTable.Capacity = s.cfg.FDTable()
	}
	k := &snap.Kernel
	k.Softirqs = make(map[string]uint64, NumSoftirqs)
	k.SoftirqRatePerS = make(map[string]float64, NumSoftirqs)
	for _, n := range SoftirqNames {
		k.Softirqs[n] = 0
		k.SoftirqRatePerS[n] = 0
	}
	if ps, err := ParseStat(s.read("stat")); err == nil {
		k.Available = true
		snap.ps = ps
		k.ContextSwitches = ps.Ctxt
		k.ProcessesForked = ps.Processes
		k.ProcsRunning = ps.ProcsRunning
		k.ProcsBlocked = ps.ProcsBlocked
		for i, n := range SoftirqNames {
			k.Softirqs[n] = ps.Softirqs[i]
		}
	}
	if m, err := ParseMeminfo(s.read("meminfo")); err == nil {
		k.MemKB = MemKB{m.TotalKB, m.FreeKB, m.BuffersKB, m.CachedKB, m.SlabKB, m.UsedKB}
	}
	if v, err := ParseVMStat(s.read("vmstat")); err == nil {
		k.PageFaults, k.MajorPageFaults = v.PgFault, v.PgMajFault
	}
	if l, err := ParseLoadavg(s.read("loadavg")); err == nil {
		k.LoadAvg = l.Load
	}
	if n, err := ParseFileNr(s.read("sys/fs/file-nr")); err == nil {
		k.OpenFiles = n
	}
	if s.cfg.Tier != nil {
		snap.Tier = s.cfg.Tier()
	}
	if s.cfg.Guest != nil {
		snap.Guest = s.cfg.Guest()
	}
	if ifs, err := ParseNetDev(s.read("net/dev")); err == nil {
		snap.Net.Available, snap.Net.Interfaces = true, ifs
	}
	if m, err := ParseSNMP(s.read("net/snmp")); err == nil {
		snap.Net.IP, snap.Net.TCP, snap.Net.UDP = m["Ip"], m["Tcp"], m["Udp"]
	}
	return snap
}

// SampleNow takes a snapshot, computes rates against the previous one,
// appends it to the history (even when paused) and returns it.
func (s *Sampler) SampleNow() Snapshot {
	snap := s.collect()
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.last; p != nil {
		dt := float64(snap.TimeNs-p.TimeNs) / 1e9
		snap.SyscallRatePerS = rate(snap.SyscallsTotal, p.SyscallsTotal, dt)
		for f, c := range snap.Families {
			snap.FamilyRatePerS[f] = rate(c, p.Families[f], dt)
		}
		k, pk := &snap.Kernel, &p.Kernel
		if k.Available && pk.Available {
			k.ContextSwitchesPerS = rate(k.ContextSwitches, pk.ContextSwitches, dt)
			k.PageFaultsPerS = rate(k.PageFaults, pk.PageFaults, dt)
			for i, n := range SoftirqNames {
				k.SoftirqRatePerS[n] = rate(snap.ps.Softirqs[i], p.ps.Softirqs[i], dt)
			}
		}
		if snap.Net.Available && p.Net.Available {
			rx, tx := snap.Net.external()
			prx, ptx := p.Net.external()
			snap.Net.RxBytesPerS, snap.Net.TxBytesPerS = rate(rx, prx, dt), rate(tx, ptx, dt)
		}
		if snap.Guest.Available && p.Guest.Available {
			snap.Guest.PageFaultsPerS = rate(snap.Guest.PageFaults, p.Guest.PageFaults, dt)
		}
	}
	snap.Paused = s.paused
	s.last = &snap
	h := snap
	h.LatencyHistNs = nil
	s.hist[s.next] = h
	s.next = (s.next + 1) % len(s.hist)
	if s.count < len(s.hist) {
		s.count++
	}
	return snap
}

// Latest returns the most recent snapshot (taking one if none exists),
// with Paused reflecting the current state.
func (s *Sampler) Latest() Snapshot {
	s.mu.Lock()
	last := s.last
	paused := s.paused
	s.mu.Unlock()
	if last == nil {
		snap := s.SampleNow()
		return snap
	}
	snap := *last
	snap.Paused = paused
	return snap
}

// History returns up to limit snapshots, oldest first (limit <= 0: all).
// History entries omit the latency histogram.
func (s *Sampler) History(limit int) []Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.count
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]Snapshot, n)
	start := (s.next - n + len(s.hist)) % len(s.hist)
	for i := 0; i < n; i++ {
		out[i] = s.hist[(start+i)%len(s.hist)]
	}
	return out
}
