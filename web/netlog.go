package web

import (
	"strconv"
	"sync"
	"time"
)

// NetDecision is one decision of the user-mode network stack (--net,
// package usernet) on a guest flow: an outgoing connection or UDP flow
// allowed or refused by the egress policy, or a connection to a
// published port. They are few (one per flow, not per packet), so they
// are kept apart from the syscall ring and never sampled.
type NetDecision struct {
	Seq     uint64 `json:"seq"`     // 1, 2, ... in this log
	TimeNs  int64  `json:"time_ns"` // wall clock, Unix ns; filled by Add if 0
	Proto   string `json:"proto"`   // "tcp", "udp"
	Verdict string `json:"verdict"` // "allowed", "refused"
	Inbound bool   `json:"inbound"` // a published port (--publish)
	Guest   string `json:"guest"`   // the guest's address and port
	Dest    string `json:"dest"`    // the destination as the guest named it
	Real    string `json:"real"`    // the real destination; inbound: the host peer
	Rule    string `json:"rule"`    // what decided ("allow 127.0.0.1/32:8000", "guarded 127.0.0.0/8", ...)
	Why     string `json:"why"`     // the same in words, with a dial error
}

// DefaultNetLogSize is how many decisions a NetLog keeps.
const DefaultNetLogSize = 1024

// NetLog keeps the last decisions of the network stack, numbered, and
// counts all of them. It is safe for concurrent use; a nil *NetLog holds
// nothing.
type NetLog struct {
	mu      sync.Mutex
	ring    []NetDecision
	head    uint64 // last assigned Seq
	allowed uint64
	refused uint64
}

// NewNetLog keeps the last size decisions (DefaultNetLogSize if <= 0).
func NewNetLog(size int) *NetLog {
	if size <= 0 {
		size = DefaultNetLogSize
	}
	return &NetLog{ring: make([]NetDecision, size)}
}

// Add numbers d, stamps it if needed, keeps it and returns it as kept.
func (l *NetLog) Add(d NetDecision) NetDecision {
	if d.TimeNs == 0 {
		d.TimeNs = time.Now().UnixNano()
	}
	if l == nil {
		return d
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.head++
	d.Seq = l.head
	if d.Verdict == "allowed" {
		l.allowed++
	} else {
		l.refused++
	}
	l.ring[(d.Seq-1)%uint64(len(l.ring))] = d
	return d
}

// Head is the Seq of the last decision added.
func (l *NetLog) Head() uint64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head
}

// Since returns the kept decisions with Seq > after, oldest first, and
// how many after it are no longer kept.
func (l *NetLog) Since(after uint64) (out []NetDecision, lost uint64) {
	if l == nil {
		return nil, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if after >= l.head {
		return nil, 0
	}
	first := after + 1
	if n := uint64(len(l.ring)); l.head-after > n {
		lost = l.head - n - after
		first = l.head - n + 1
	}
	for s := first; s <= l.head; s++ {
		out = append(out, l.ring[(s-1)%uint64(len(l.ring))])
	}
	return out, lost
}

// NetSummary is GET /api/net: the counts of all decisions and the last
// ones kept, oldest first.
type NetSummary struct {
	Allowed   uint64        `json:"allowed"`
	Refused   uint64        `json:"refused"`
	Decisions []NetDecision `json:"decisions"`
}

// Summary returns the counts and the last limit decisions (all kept if
// limit <= 0).
func (l *NetLog) Summary(limit int) NetSummary {
	s := NetSummary{Decisions: []NetDecision{}}
	if l == nil {
		return s
	}
	l.mu.Lock()
	s.Allowed, s.Refused = l.allowed, l.refused
	head := l.head
	l.mu.Unlock()
	after := uint64(0)
	if limit > 0 && head > uint64(limit) {
		after = head - uint64(limit)
	}
	if d, _ := l.Since(after); d != nil {
		s.Decisions = d
	}
	return s
}

// AppendNetJSON appends d as one JSON object: {"type":"net", ...} (a
// syscall event never has a "type"), the schema of the SSE "net" event
// and of the trace's network lines.
func AppendNetJSON(dst []byte, d *NetDecision) []byte {
	dst = append(dst, `{"type":"net","seq":`...)
	dst = strconv.AppendUint(dst, d.Seq, 10)
	dst = append(dst, `,"time_ns":`...)
	dst = strconv.AppendInt(dst, d.TimeNs, 10)
	for _, f := range [...]struct{ k, v string }{
		{"proto", d.Proto}, {"verdict", d.Verdict},
	} {
		dst = append(dst, `,"`...)
		dst = append(dst, f.k...)
		dst = append(dst, `":`...)
		dst = AppendJSONString(dst, f.v)
	}
	dst = append(dst, `,"inbound":`...)
	dst = strconv.AppendBool(dst, d.Inbound)
	for _, f := range [...]struct{ k, v string }{
		{"guest", d.Guest}, {"dest", d.Dest}, {"real", d.Real}, {"rule", d.Rule}, {"why", d.Why},
	} {
		dst = append(dst, `,"`...)
		dst = append(dst, f.k...)
		dst = append(dst, `":`...)
		dst = AppendJSONString(dst, f.v)
	}
	return append(dst, '}')
}
