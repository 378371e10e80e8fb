// Package web is the kbox observatory: an in-process, bounded event
// recorder for dispatched syscalls, telemetry parsed from the guest
// kernel's /proc, and a small HTTP dashboard/API on top of both.
//
// The package is deliberately independent of the rest of kbox: the
// dispatcher only needs to call (*Recorder).Record, and the wiring code
// supplies plain functions (syscall family lookup, /proc reader, FD-table
// occupancy).
package web

import (
	"encoding/binary"
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Disposition says how kbox dispatched a syscall.
type Disposition uint8

const (
	DispLKL      Disposition = iota // forwarded to the in-process kernel
	DispHost                        // executed on the host
	DispEmulated                    // emulated by kbox itself
	DispDenied                      // refused by policy
	DispENOSYS                      // not implemented (ENOSYS returned)

	// NumDispositions is the number of defined dispositions.
	NumDispositions = 5
)

var dispNames = [NumDispositions]string{"lkl", "host", "emulated", "denied", "enosys"}

// String returns the stable lower-case name used in JSON ("lkl", "host",
// "emulated", "denied", "enosys"), or "unknown".
func (d Disposition) String() string {
	if int(d) < NumDispositions {
		return dispNames[d]
	}
	return "unknown"
}

// Event is one dispatched syscall.
type Event struct {
	Seq       uint64      `json:"seq"`        // ring sequence, assigned by Record (1, 2, ...)
	TimeNs    int64       `json:"time_ns"`    // wall clock, Unix ns; filled by Record if 0
	Pid       int32       `json:"pid"`        // guest pid/tid
	Nr        int32       `json:"nr"`         // syscall number
	Name      string      `json:"name"`       // syscall name
	Disp      Disposition `json:"-"`          // see Disposition
	Ret       int64       `json:"ret"`        // return value (negative errno style allowed)
	Errno     int32       `json:"errno"`      // errno, 0 on success
	LatencyNs int64       `json:"latency_ns"` // dispatch latency
	Path      string      `json:"path"`       // first path argument, truncated to PathMax bytes in the ring
	// Peer is the remote address of an internet socket's connect or
	// accept ("10.0.2.2:8000"); it takes the path's place in the ring
	// (those calls have no path).
	Peer string `json:"peer,omitempty"`
	// Rule is the policy rule that refused the call (the trace).
	Rule string `json:"rule,omitempty"`
}

// peerBit in a slot's meta says its path bytes are Event.Peer.
const peerBit = 1 << 16

// PathMax is the number of path bytes kept per event in the ring.
const PathMax = 96

const (
	// DefaultRingSize is the default number of event slots.
	DefaultRingSize = 8192
	// DefaultSampleEvery is the default 1-in-N sampling of routine syscalls.
	DefaultSampleEvery = 64
	// MaxNr bounds the per-syscall-number counter tables; numbers outside
	// [0, MaxNr) share one overflow counter.
	MaxNr = 1024
	// HistBuckets is the number of log2 latency buckets.
	HistBuckets = 40
	errnoENOSYS = 38
)

// StandardFamilies is the canonical order of syscall families.
var StandardFamilies = []string{"file", "io", "meta", "proc", "signal", "mem", "net", "time", "other"}

// rareNames are always kept in the ring regardless of sampling.
var rareNames = map[string]bool{
	"execve": true, "execveat": true, "clone": true, "clone3": true,
	"fork": true, "vfork": true, "exit": true, "exit_group": true,
}

// RecorderConfig configures NewRecorder. The zero value is usable.
type RecorderConfig struct {
	// Size is the number of ring slots, rounded up to a power of two
	// (default DefaultRingSize, minimum 16).
	Size int
	// SampleEvery keeps 1 in N routine events per syscall number
	// (default DefaultSampleEvery; 1 keeps everything).
	SampleEvery int
	// Family maps a syscall number to a family name such as "file" or
	// "net". It is called only at construction time for nr in [0, MaxNr).
	// Nil, or an empty result, means "other".
	Family func(nr int32) string
	// Now returns the wall clock in Unix ns (default time.Now).
	Now func() int64
}

const busyBit = uint64(1) << 63

type slot struct {
	ver     atomic.Uint64 // seq when committed; seq|busyBit while written
	timeNs  atomic.Uint64
	pidNr   atomic.Uint64 // pid<<32 | uint32(nr)
	ret     atomic.Uint64
	meta    atomic.Uint64 // errno<<32 | disp<<8 | pathLen
	latency atomic.Uint64
	path    [PathMax / 8]atomic.Uint64
}

// Recorder is a bounded, non-blocking ring of sampled events plus exact
// counters. All methods are safe for concurrent use. A nil *Recorder is
// valid and records nothing; callers should still guard hot paths with
// `if rec != nil` so that a disabled observatory costs one branch.
type Recorder struct {
	head    atomic.Uint64 // last assigned seq
	dropped atomic.Uint64 // events lost to a writer collision
	slots   []slot
	mask    uint64

	sampleEvery uint64
	sampleMask  uint64 // sampleEvery-1 when a power of two, else 0
	samplePow2  bool
	now         func() int64
	start       time.Time

	families []string
	famIdx   [MaxNr + 1]uint8

	flags    [MaxNr + 1]atomic.Uint32 // bit0 known, bit1 rare
	names    [MaxNr + 1]atomic.Pointer[string]
	nrCount  [MaxNr + 1]atomic.Uint64
	nosys    [MaxNr + 1]atomic.Uint64
	famCount []atomic.Uint64
	disp     [8]atomic.Uint64 // indices >= NumDispositions: unknown
	hist     [HistBuckets]atomic.Uint64

	learnMu sync.Mutex
}

const (
	flagKnown = 1
	flagRare  = 2
)

// NewRecorder returns a Recorder with all slots preallocated.
func NewRecorder(cfg RecorderConfig) *Recorder {
	size := cfg.Size
	if size <= 0 {
		size = DefaultRingSize
	}
	if size < 16 {
		size = 16
	}
	size = 1 << bits.Len(uint(size-1))
	n := cfg.SampleEvery
	if n <= 0 {
		n = DefaultSampleEvery
	}
	r := &Recorder{
		slots:       make([]slot, size),
		mask:        uint64(size - 1),
		sampleEvery: uint64(n),
		now:         cfg.Now,
		start:       time.Now(),
	}
	if n&(n-1) == 0 {
		r.samplePow2 = true
		r.sampleMask = uint64(n - 1)
	}
	if r.now == nil {
		r.now = func() int64 { return time.Now().UnixNano() }
	}
	r.families = append([]string(nil), StandardFamilies...)
	index := map[string]int{}
	for i, f := range r.families {
		index[f] = i
	}
	other := index["other"]
	for nr := 0; nr <= MaxNr; nr++ {
		r.famIdx[nr] = uint8(other)
		if cfg.Family == nil || nr == MaxNr {
			continue
		}
		f := cfg.Family(int32(nr))
		if f == "" {
			continue
		}
		i, ok := index[f]
		if !ok {
			if len(r.families) >= 255 {
				continue
			}
			i = len(r.families)
			r.families = append(r.families, f)
			index[f] = i
		}
		r.famIdx[nr] = uint8(i)
	}
	r.famCount = make([]atomic.Uint64, len(r.families))
	return r
}

func nrIndex(nr int32) int {
	if nr < 0 || nr >= MaxNr {
		return MaxNr
	}
	return int(nr)
}

// learn interns the name of a syscall number (once per number).
func (r *Recorder) learn(i int, name string) uint32 {
	r.learnMu.Lock()
	defer r.learnMu.Unlock()
	f := r.flags[i].Load()
	if f != 0 {
		return f
	}
	if i == MaxNr { // overflow bucket: names are not unique
		return 0
	}
	s := name
	r.names[i].Store(&s)
	f = flagKnown
	if rareNames[name] {
		f |= flagRare
	}
	r.flags[i].Store(f)
	return f
}

func latencyBucket(ns int64) int {
	if ns <= 1 {
		return 0
	}
	b := bits.Len64(uint64(ns - 1)) // smallest b with ns <= 2^b
	if b >= HistBuckets {
		b = HistBuckets - 1
	}
	return b
}

// Record counts e and, if it passes sampling, copies it into the ring and
// sets e.Seq (and e.TimeNs if it was 0). It never blocks and does not
// allocate in the steady state (the first event carrying a new syscall
// name interns that name once).
//
// Sampling: errors (Ret < 0 or Errno != 0), Denied and ENOSYS
// dispositions and rare syscalls (execve, execveat, clone, clone3, fork,
// vfork, exit, exit_group) and events with a peer (connect, accept) are
// always kept; other events are kept 1 in
// SampleEvery per syscall number (the first of each number is kept).
func (r *Recorder) Record(e *Event) {
	if r == nil {
		return
	}
	i := nrIndex(e.Nr)
	f := r.flags[i].Load()
	if f == 0 && e.Name != "" {
		f = r.learn(i, e.Name)
	}
	c := r.nrCount[i].Add(1)
	r.famCount[r.famIdx[i]].Add(1)
	d := e.Disp
	r.disp[d&7].Add(1)
	r.hist[latencyBucket(e.LatencyNs)].Add(1)
	if d == DispENOSYS || e.Errno == errnoENOSYS {
		r.nosys[i].Add(1)
	}
	keep := e.Ret < 0 || e.Errno != 0 || d >= DispDenied || f&flagRare != 0 || e.Peer != ""
	if !keep {
		if r.samplePow2 {
			keep = (c-1)&r.sampleMask == 0
		} else {
			keep = (c-1)%r.sampleEvery == 0
		}
		if !keep {
			return
		}
	}
	if e.TimeNs == 0 {
		e.TimeNs = r.now()
	}
	seq := r.head.Add(1)
	e.Seq = seq
	s := &r.slots[seq&r.mask]
	old := s.ver.Load()
	if old&busyBit != 0 || old >= seq || !s.ver.CompareAndSwap(old, seq|busyBit) {
		// Another writer still owns this slot (the ring wrapped during
		// its write): drop rather than wait.
		r.dropped.Add(1)
		return
	}
	s.timeNs.Store(uint64(e.TimeNs))
	s.pidNr.Store(uint64(uint32(e.Pid))<<32 | uint64(uint32(e.Nr)))
	s.ret.Store(uint64(e.Ret))
	text, peer := e.Path, uint64(0)
	if e.Peer != "" {
		text, peer = e.Peer, peerBit
	}
	pl := len(text)
	if pl > PathMax {
		pl = PathMax
	}
	s.meta.Store(uint64(uint32(e.Errno))<<32 | peer | uint64(d)<<8 | uint64(pl))
	s.latency.Store(uint64(e.LatencyNs))
	for w := 0; w*8 < pl; w++ {
		var tmp [8]byte
		copy(tmp[:], text[w*8:pl])
		s.path[w].Store(binary.LittleEndian.Uint64(tmp[:]))
	}
	s.ver.Store(seq)
}

// Head returns the sequence number of the newest event written to the
// ring (0 if none).
func (r *Recorder) Head() uint64 {
	if r == nil {
		return 0
	}
	return r.head.Load()
}

// Capacity returns the number of ring slots.
func (r *Recorder) Capacity() int {
	if r == nil {
		return 0
	}
	return len(r.slots)
}

// Read copies up to len(dst) events with Seq > after into dst, oldest
// first. It returns the number copied, the cursor to pass to the next call
// and how many events after the cursor were lost because the ring
// overwrote them before they were read. It never blocks; an event whose
// write is still in progress ends the batch and is returned by a later
// call.
func (r *Recorder) Read(after uint64, dst []Event) (n int, next uint64, lost uint64) {
	if r == nil {
		return 0, after, 0
	}
	head := r.head.Load()
	if head <= after {
		return 0, after, 0
	}
	size := uint64(len(r.slots))
	var oldest uint64 = 1
	if head > size {
		oldest = head - size + 1
	}
	if after+1 < oldest {
		lost = oldest - after - 1
		after = oldest - 1
	}
	next = after
	var pbuf [PathMax]byte
	for s := after + 1; s <= head && n < len(dst); s++ {
		sl := &r.slots[s&r.mask]
		v1 := sl.ver.Load()
		if v1 != s {
			if v1&^busyBit > s { // overwritten by a newer event
				lost++
				next = s
				continue
			}
			break // not committed yet
		}
		ts := sl.timeNs.Load()
		pn := sl.pidNr.Load()
		ret := sl.ret.Load()
		meta := sl.meta.Load()
		lat := sl.latency.Load()
		pl := int(meta & 0xff)
		if pl > PathMax {
			pl = PathMax
		}
		for w := 0; w*8 < pl; w++ {
			binary.LittleEndian.PutUint64(pbuf[w*8:], sl.path[w].Load())
		}
		if sl.ver.Load() != s {
			lost++
			next = s
			continue
		}
		e := &dst[n]
		nr := int32(uint32(pn))
		*e = Event{
			Seq:       s,
			TimeNs:    int64(ts),
			Pid:       int32(uint32(pn >> 32)),
			Nr:        nr,
			Name:      r.Name(nr),
			Disp:      Disposition(meta >> 8 & 0xff),
			Ret:       int64(ret),
			Errno:     int32(uint32(meta >> 32)),
			LatencyNs: int64(lat),
		}
		switch {
		case pl > 0 && meta&peerBit != 0:
			e.Peer = string(pbuf[:pl])
		case pl > 0:
			e.Path = string(pbuf[:pl])
		}
		n++
		next = s
	}
	return n, next, lost
}

// Name returns the interned name of syscall nr, or "" if unknown.
func (r *Recorder) Name(nr int32) string {
	if r == nil {
		return ""
	}
	if p := r.names[nrIndex(nr)].Load(); p != nil && nr >= 0 && nr < MaxNr {
		return *p
	}
	return ""
}

// Total returns the exact number of Record calls.
func (r *Recorder) Total() uint64 {
	if r == nil {
		return 0
	}
	var t uint64
	for i := range r.disp {
		t += r.disp[i].Load()
	}
	return t
}

// Recorded returns the number of events written to the ring.
func (r *Recorder) Recorded() uint64 {
	if r == nil {
		return 0
	}
	h, d := r.head.Load(), r.dropped.Load()
	if d > h {
		return 0
	}
	return h - d
}

// Dropped returns the number of kept events that could not be written
// because a slow writer still owned their slot.
func (r *Recorder) Dropped() uint64 {
	if r == nil {
		return 0
	}
	return r.dropped.Load()
}

// SampledOut returns the number of events counted but not kept in the ring.
func (r *Recorder) SampledOut() uint64 {
	t, h := r.Total(), r.Head()
	if h > t {
		return 0
	}
	return t - h
}

// Uptime returns the time since NewRecorder.
func (r *Recorder) Uptime() time.Duration {
	if r == nil {
		return 0
	}
	return time.Since(r.start)
}

// Dispositions returns exact per-disposition counts indexed by Disposition.
func (r *Recorder) Dispositions() [NumDispositions]uint64 {
	var out [NumDispositions]uint64
	if r == nil {
		return out
	}
	for i := range out {
		out[i] = r.disp[i].Load()
	}
	return out
}

// Families returns the family names in display order.
func (r *Recorder) Families() []string {
	if r == nil {
		return append([]string(nil), StandardFamilies...)
	}
	return append([]string(nil), r.families...)
}

// FamilyCounts returns exact per-family counts; every family is present.
func (r *Recorder) FamilyCounts() map[string]uint64 {
	m := make(map[string]uint64)
	if r == nil {
		for _, f := range StandardFamilies {
			m[f] = 0
		}
		return m
	}
	for i, f := range r.families {
		m[f] = r.famCount[i].Load()
	}
	return m
}

// SyscallCount is a count attributed to one syscall number. Nr is -1 for
// the shared bucket of numbers outside [0, MaxNr).
type SyscallCount struct {
	Nr    int32  `json:"nr"`
	Name  string `json:"name"`
	Count uint64 `json:"count"`
}

func (r *Recorder) collect(tab *[MaxNr + 1]atomic.Uint64) []SyscallCount {
	out := []SyscallCount{}
	if r == nil {
		return out
	}
	for i := range tab {
		c := tab[i].Load()
		if c == 0 {
			continue
		}
		nr := int32(i)
		if i == MaxNr {
			nr = -1
		}
		out = append(out, SyscallCount{Nr: nr, Name: r.Name(nr), Count: c})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Count != out[b].Count {
			return out[a].Count > out[b].Count
		}
		return out[a].Nr < out[b].Nr
	})
	return out
}

// SyscallCounts returns exact non-zero per-syscall counts, highest first.
func (r *Recorder) SyscallCounts() []SyscallCount { return r.collect(r.tabNr()) }

// ENOSYSCounts returns per-syscall counts of ENOSYS outcomes (disposition
// ENOSYS or errno ENOSYS), highest first.
func (r *Recorder) ENOSYSCounts() []SyscallCount { return r.collect(r.tabNosys()) }

func (r *Recorder) tabNr() *[MaxNr + 1]atomic.Uint64 {
	if r == nil {
		return nil
	}
	return &r.nrCount
}

func (r *Recorder) tabNosys() *[MaxNr + 1]atomic.Uint64 {
	if r == nil {
		return nil
	}
	return &r.nosys
}

// HistBucket is one latency histogram bucket: Count events had a latency
// in (previous LeNs, LeNs]. The last bucket is open-ended (LeNs = -1).
type HistBucket struct {
	LeNs  int64  `json:"le_ns"`
	Count uint64 `json:"count"`
}

// LatencyHistogram returns the non-cumulative log2 latency histogram.
// Bucket b holds latencies <= 2^b ns (bucket 0: <= 1 ns).
func (r *Recorder) LatencyHistogram() []HistBucket {
	out := make([]HistBucket, HistBuckets)
	for b := range out {
		out[b].LeNs = int64(1) << b
		if b == HistBuckets-1 {
			out[b].LeNs = -1
		}
		if r != nil {
			out[b].Count = r.hist[b].Load()
		}
	}
	return out
}
