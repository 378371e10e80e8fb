package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestTraceWriterLines(t *testing.T) {
	var out bytes.Buffer
	tw := NewTraceWriter(&out)
	evs := []Event{
		{Seq: 1, TimeNs: 1700000000000000000, Pid: 42, Nr: 257, Name: "openat", Disp: DispLKL, Ret: 3, LatencyNs: 1234, Path: "/etc/hosts"},
		{Seq: 2, Pid: 42, Nr: 2, Name: "open", Disp: DispENOSYS, Ret: -38, Errno: 38, Path: "weird \"quoted\"\n\t\\ <tag> \x01 ünï \xff\u2028"},
		{Seq: 3, Pid: -1, Nr: 59, Name: "execve", Disp: DispHost},
	}
	for i := range evs {
		if err := tw.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if out.Len() != 0 {
		t.Fatal("not buffered")
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&out)
	i := 0
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, sc.Text())
		}
		for _, k := range []string{"seq", "time_ns", "pid", "nr", "name", "disposition", "ret", "errno", "latency_ns", "path"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("line %d missing %q", i, k)
			}
		}
		var e struct {
			Seq         uint64 `json:"seq"`
			Name        string `json:"name"`
			Disposition string `json:"disposition"`
			Path        string `json:"path"`
			Ret         int64  `json:"ret"`
		}
		_ = json.Unmarshal(sc.Bytes(), &e)
		want := evs[i]
		if e.Seq != want.Seq || e.Name != want.Name || e.Disposition != want.Disp.String() || e.Ret != want.Ret {
			t.Fatalf("line %d: %+v", i, e)
		}
		if i != 1 && e.Path != want.Path {
			t.Fatalf("path %q", e.Path)
		}
		i++
	}
	if i != len(evs) {
		t.Fatalf("%d lines", i)
	}
}

// TestTraceWriterTier: the tier line is JSON with its type, mode and why.
func TestTraceWriterTier(t *testing.T) {
	var out bytes.Buffer
	tw := NewTraceWriter(&out)
	if err := tw.WriteTier("seccomp", `auto: not --trusted "quoted"`); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	var m map[string]string
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	if m["type"] != "tier" || m["mode"] != "seccomp" || m["why"] != `auto: not --trusted "quoted"` || !bytes.HasSuffix(out.Bytes(), []byte("}\n")) {
		t.Fatalf("%q", out.Bytes())
	}
}

func TestTraceWriterNoAllocs(t *testing.T) {
	var out bytes.Buffer
	out.Grow(1 << 20)
	tw := NewTraceWriter(&out)
	e := Event{Seq: 1, Name: "read", Path: "/a/b"}
	allocs := testing.AllocsPerRun(100, func() { _ = tw.Write(&e) })
	if allocs != 0 {
		t.Fatalf("allocs %v", allocs)
	}
}

func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/", "\x00\x1f\x7f", "ü\xff\xfe", "\u2028\u2029", "<script>&", strings.Repeat("é", 10)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := AppendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("invalid JSON %q: %v", b, err)
		}
		// encoding/json also replaces invalid UTF-8 with U+FFFD.
		want, _ := json.Marshal(s)
		var wantS string
		_ = json.Unmarshal(want, &wantS)
		if got != wantS {
			t.Fatalf("round trip %q -> %q, want %q", s, got, wantS)
		}
		if bytes.ContainsAny(b, "\n\r") {
			t.Fatal("raw newline")
		}
	})
}

func BenchmarkTraceWrite(b *testing.B) {
	var sink bytes.Buffer
	tw := NewTraceWriter(&sink)
	e := Event{Seq: 1, TimeNs: 1700000000000000000, Pid: 42, Nr: 257, Name: "openat", Ret: 3, LatencyNs: 1234, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if sink.Len() > 1<<20 {
			sink.Reset()
		}
		_ = tw.Write(&e)
	}
}
