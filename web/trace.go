package web

import (
	"bufio"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"
)

// AppendEventJSON appends e as a single-line JSON object to dst with the
// fields seq, time_ns, pid, nr, name, disposition, ret, errno, latency_ns
// and path, and peer when set (the same schema as the SSE "syscall"
// event). It does not
// allocate when dst has enough capacity.
func AppendEventJSON(dst []byte, e *Event) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = append(dst, `,"time_ns":`...)
	dst = strconv.AppendInt(dst, e.TimeNs, 10)
	dst = append(dst, `,"pid":`...)
	dst = strconv.AppendInt(dst, int64(e.Pid), 10)
	dst = append(dst, `,"nr":`...)
	dst = strconv.AppendInt(dst, int64(e.Nr), 10)
	dst = append(dst, `,"name":`...)
	dst = AppendJSONString(dst, e.Name)
	dst = append(dst, `,"disposition":"`...)
	dst = append(dst, e.Disp.String()...)
	dst = append(dst, `","ret":`...)
	dst = strconv.AppendInt(dst, e.Ret, 10)
	dst = append(dst, `,"errno":`...)
	dst = strconv.AppendInt(dst, int64(e.Errno), 10)
	dst = append(dst, `,"latency_ns":`...)
	dst = strconv.AppendInt(dst, e.LatencyNs, 10)
	dst = append(dst, `,"path":`...)
	dst = AppendJSONString(dst, e.Path)
	if e.Peer != "" {
		dst = append(dst, `,"peer":`...)
		dst = AppendJSONString(dst, e.Peer)
	}
	if e.Rule != "" {
		dst = append(dst, `,"rule":`...)
		dst = AppendJSONString(dst, e.Rule)
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a quoted JSON string. Control characters,
// quotes, backslashes, <, >, &, U+2028 and U+2029 are escaped; invalid
// UTF-8 bytes become U+FFFD, so the output is always valid JSON.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// TraceWriter writes one JSON object per event per line (JSON Lines) to
// an io.Writer through a buffer. It is safe for concurrent use.
type TraceWriter struct {
	mu  sync.Mutex
	bw  *bufio.Writer
	buf []byte
	err error
}

// NewTraceWriter returns a TraceWriter buffering writes to w. The caller
// keeps ownership of w (Close flushes but does not close it).
func NewTraceWriter(w io.Writer) *TraceWriter {
	return &TraceWriter{bw: bufio.NewWriterSize(w, 64<<10), buf: make([]byte, 0, 512)}
}

// Write appends one event line. It returns the first write error seen.
func (t *TraceWriter) Write(e *Event) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	t.buf = AppendEventJSON(t.buf[:0], e)
	t.buf = append(t.buf, '\n')
	_, t.err = t.bw.Write(t.buf)
	return t.err
}

// WriteNet appends one line for a decision of the network stack
// (AppendNetJSON: its "type" is "net").
func (t *TraceWriter) WriteNet(d *NetDecision) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	t.buf = AppendNetJSON(t.buf[:0], d)
	t.buf = append(t.buf, '\n')
	_, t.err = t.bw.Write(t.buf)
	return t.err
}

// WriteTier appends a line {"type":"tier","mode":M,"why":W}: the tier
// that runs the guest and why (docs/tiers.md, Auto).
func (t *TraceWriter) WriteTier(mode, why string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	t.buf = append(t.buf[:0], `{"type":"tier","mode":`...)
	t.buf = AppendJSONString(t.buf, mode)
	t.buf = append(t.buf, `,"why":`...)
	t.buf = AppendJSONString(t.buf, why)
	t.buf = append(t.buf, "}\n"...)
	_, t.err = t.bw.Write(t.buf)
	return t.err
}

// Flush writes buffered lines to the underlying writer.
func (t *TraceWriter) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	t.err = t.bw.Flush()
	return t.err
}

// Close flushes buffered lines. It does not close the underlying writer.
func (t *TraceWriter) Close() error { return t.Flush() }
