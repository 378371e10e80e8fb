package web

import (
	"strings"
	"sync"
	"testing"
)

func testFamily(nr int32) string {
	switch nr {
	case 0, 1:
		return "io"
	case 2, 257:
		return "file"
	case 59, 56:
		return "proc"
	case 41:
		return "net"
	case 500:
		return "custom"
	}
	return ""
}

func TestDispositionString(t *testing.T) {
	want := []string{"lkl", "host", "emulated", "denied", "enosys"}
	for i, w := range want {
		if got := Disposition(i).String(); got != w {
			t.Errorf("Disposition(%d) = %q, want %q", i, got, w)
		}
	}
	if Disposition(9).String() != "unknown" {
		t.Error("unknown disposition")
	}
}

func TestNilRecorder(t *testing.T) {
	var r *Recorder
	r.Record(&Event{Nr: 1})
	if r.Total() != 0 || r.Head() != 0 || len(r.SyscallCounts()) != 0 || len(r.ENOSYSCounts()) != 0 {
		t.Fatal("nil recorder not empty")
	}
	if n, _, _ := r.Read(0, make([]Event, 4)); n != 0 {
		t.Fatal("nil read")
	}
	if len(r.FamilyCounts()) != len(StandardFamilies) || len(r.LatencyHistogram()) != HistBuckets {
		t.Fatal("nil shapes")
	}
}

func TestSamplingRules(t *testing.T) {
	r := NewRecorder(RecorderConfig{Size: 1024, SampleEvery: 10, Family: testFamily})
	// 100 routine reads: first of each 10 kept.
	for i := 0; i < 100; i++ {
		r.Record(&Event{Nr: 0, Name: "read", Ret: 10, Disp: DispLKL})
	}
	if got := r.Head(); got != 10 {
		t.Fatalf("routine kept = %d, want 10", got)
	}
	// Errors always kept.
	for i := 0; i < 5; i++ {
		r.Record(&Event{Nr: 2, Name: "open", Ret: -2, Errno: 2, Disp: DispLKL, Path: "/nope"})
	}
	// Rare syscalls always kept.
	for _, n := range []struct {
		nr   int32
		name string
	}{{59, "execve"}, {56, "clone"}, {231, "exit_group"}, {60, "exit"}, {57, "fork"}, {58, "vfork"}, {322, "execveat"}, {435, "clone3"}} {
		for i := 0; i < 3; i++ {
			r.Record(&Event{Nr: n.nr, Name: n.name, Disp: DispHost})
		}
	}
	// Denied and ENOSYS dispositions always kept, even with ret >= 0.
	for i := 0; i < 4; i++ {
		r.Record(&Event{Nr: 41, Name: "socket", Disp: DispDenied})
		r.Record(&Event{Nr: 999, Name: "weird", Disp: DispENOSYS})
	}
	want := uint64(10 + 5 + 8*3 + 8)
	if got := r.Head(); got != want {
		t.Fatalf("kept = %d, want %d", got, want)
	}
	if r.Total() != 100+5+24+8 {
		t.Fatalf("total = %d", r.Total())
	}
	if r.SampledOut() != 90 {
		t.Fatalf("sampled out = %d", r.SampledOut())
	}
	buf := make([]Event, 100)
	n, next, lost := r.Read(0, buf)
	if n != int(want) || next != want || lost != 0 {
		t.Fatalf("read n=%d next=%d lost=%d", n, next, lost)
	}
	for i := 0; i < n; i++ {
		if buf[i].Seq != uint64(i+1) {
			t.Fatalf("seq %d at %d", buf[i].Seq, i)
		}
	}
	if e := buf[10]; e.Name != "open" || e.Path != "/nope" || e.Errno != 2 || e.Ret != -2 || e.Disp != DispLKL {
		t.Fatalf("error event = %+v", e)
	}
	fc := r.FamilyCounts()
	if fc["io"] != 100 || fc["file"] != 5 || fc["net"] != 4 || fc["other"] != 6*3+4 || fc["proc"] != 6 {
		t.Fatalf("families %v", fc)
	}
	d := r.Dispositions()
	if d[DispLKL] != 105 || d[DispHost] != 24 || d[DispDenied] != 4 || d[DispENOSYS] != 4 {
		t.Fatalf("dispositions %v", d)
	}
	en := r.ENOSYSCounts()
	if len(en) != 1 || en[0].Nr != 999 || en[0].Name != "weird" || en[0].Count != 4 {
		t.Fatalf("enosys %+v", en)
	}
	sc := r.SyscallCounts()
	if sc[0].Name != "read" || sc[0].Count != 100 {
		t.Fatalf("top syscall %+v", sc[0])
	}
}

func TestCustomFamilyAndOverflowNr(t *testing.T) {
	r := NewRecorder(RecorderConfig{Family: testFamily})
	r.Record(&Event{Nr: 500, Name: "x"})
	r.Record(&Event{Nr: -5, Name: "neg"})
	r.Record(&Event{Nr: 1 << 30, Name: "big"})
	fc := r.FamilyCounts()
	if fc["custom"] != 1 || fc["other"] != 2 {
		t.Fatalf("families %v", fc)
	}
	fams := r.Families()
	if fams[len(fams)-1] != "custom" {
		t.Fatalf("family order %v", fams)
	}
	sc := r.SyscallCounts()
	found := false
	for _, c := range sc {
		if c.Nr == -1 && c.Count == 2 {
			found = true
		}
	}
	if !found {
		t.Fatalf("overflow bucket missing: %+v", sc)
	}
}

func TestPathTruncationAndCopy(t *testing.T) {
	r := NewRecorder(RecorderConfig{SampleEvery: 1})
	long := ""
	for len(long) < 200 {
		long += "/abcdefg"
	}
	b := []byte("/tmp/mutable")
	p := string(b)
	r.Record(&Event{Nr: 2, Name: "open", Path: long})
	r.Record(&Event{Nr: 2, Name: "open", Path: p})
	r.Record(&Event{Nr: 2, Name: "open", Path: "/a"})
	buf := make([]Event, 3)
	n, _, _ := r.Read(0, buf)
	if n != 3 || buf[0].Path != long[:PathMax] || buf[1].Path != "/tmp/mutable" || buf[2].Path != "/a" {
		t.Fatalf("paths %q %q %q", buf[0].Path, buf[1].Path, buf[2].Path)
	}
}

func TestWraparound(t *testing.T) {
	r := NewRecorder(RecorderConfig{Size: 16, SampleEvery: 1})
	for i := 0; i < 40; i++ {
		r.Record(&Event{Nr: 1, Name: "write", Pid: int32(i)})
	}
	buf := make([]Event, 64)
	n, next, lost := r.Read(0, buf)
	if n != 16 || lost != 24 || next != 40 {
		t.Fatalf("n=%d lost=%d next=%d", n, lost, next)
	}
	if buf[0].Seq != 25 || buf[0].Pid != 24 || buf[15].Seq != 40 {
		t.Fatalf("first=%+v last=%+v", buf[0], buf[15])
	}
	// Resume from the middle: only later events.
	n, next, lost = r.Read(35, buf)
	if n != 5 || lost != 0 || next != 40 || buf[0].Seq != 36 {
		t.Fatalf("resume n=%d lost=%d next=%d first=%d", n, lost, next, buf[0].Seq)
	}
	// Nothing new.
	if n, next, _ := r.Read(40, buf); n != 0 || next != 40 {
		t.Fatal("expected empty read")
	}
	// Small destination: batches.
	n, next, _ = r.Read(30, buf[:4])
	if n != 4 || next != 34 {
		t.Fatalf("batch n=%d next=%d", n, next)
	}
}

func TestLatencyHistogram(t *testing.T) {
	r := NewRecorder(RecorderConfig{})
	for _, ns := range []int64{0, 1, 2, 3, 4, 5, 1000, 1024, 1025, 1 << 50} {
		r.Record(&Event{Nr: 1, LatencyNs: ns})
	}
	h := r.LatencyHistogram()
	want := map[int]uint64{0: 2, 1: 1, 2: 2, 3: 1, 10: 2, 11: 1, HistBuckets - 1: 1}
	for b, c := range h {
		if c.Count != want[b] {
			t.Errorf("bucket %d (le %d) = %d, want %d", b, c.LeNs, c.Count, want[b])
		}
	}
	if h[10].LeNs != 1024 || h[HistBuckets-1].LeNs != -1 {
		t.Fatal("bucket bounds")
	}
}

func TestConcurrentRecordAndRead(t *testing.T) {
	r := NewRecorder(RecorderConfig{Size: 256, SampleEvery: 4, Family: testFamily})
	const G, N = 8, 20000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readerErr error
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() { // concurrent reader checks ordering and field consistency
		defer rwg.Done()
		buf := make([]Event, 64)
		var cur uint64
		for {
			n, next, _ := r.Read(cur, buf)
			for i := 0; i < n; i++ {
				e := &buf[i]
				if e.Seq <= cur {
					readerErr = errf("non-monotonic seq %d after %d", e.Seq, cur)
					return
				}
				cur = e.Seq
				if int64(e.Pid) != e.Ret || e.Path != pathFor(e.Pid) {
					readerErr = errf("torn event %+v", *e)
					return
				}
			}
			cur = next
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < N; i++ {
				pid := int32(g*N + i)
				e := Event{Nr: int32(i % 3), Name: "x", Pid: pid, Ret: int64(pid), Path: pathFor(pid)}
				if i%100 == 0 {
					e.Ret, e.Errno = -1, 1
					e.Pid = int32(-1)
					e.Path = pathFor(-1)
				}
				r.Record(&e)
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	if readerErr != nil {
		t.Fatal(readerErr)
	}
	if r.Total() != G*N {
		t.Fatalf("total %d", r.Total())
	}
	var sum uint64
	for _, c := range r.SyscallCounts() {
		sum += c.Count
	}
	if sum != G*N {
		t.Fatalf("per-nr sum %d", sum)
	}
	if r.Recorded()+r.Dropped()+r.SampledOut() != G*N {
		t.Fatalf("accounting %d+%d+%d", r.Recorded(), r.Dropped(), r.SampledOut())
	}
}

func pathFor(pid int32) string {
	if pid < 0 {
		return "/err"
	}
	return "/p/" + string(rune('a'+pid%26))
}

type strErr string

func (e strErr) Error() string { return string(e) }

func errf(format string, a ...any) error { return strErr(sprintf(format, a...)) }

func TestRecordAllocs(t *testing.T) {
	r := NewRecorder(RecorderConfig{SampleEvery: 2, Family: testFamily})
	e := Event{Nr: 2, Name: "openat", Path: "/etc/passwd", TimeNs: 1}
	r.Record(&e) // intern name
	allocs := testing.AllocsPerRun(1000, func() {
		e.Ret = 3
		r.Record(&e)
		e.Ret = -2
		e.Errno = 2
		r.Record(&e)
		e.Errno = 0
	})
	if allocs != 0 {
		t.Fatalf("Record allocates: %v", allocs)
	}
}

// BenchmarkRecord measures the steady-state cost of Record for a routine
// (sampled) syscall mix with the default 1-in-64 sampling.
func BenchmarkRecord(b *testing.B) {
	r := NewRecorder(RecorderConfig{Family: testFamily})
	evs := []Event{
		{Nr: 0, Name: "read", Ret: 100, LatencyNs: 800, Disp: DispLKL, TimeNs: 1},
		{Nr: 1, Name: "write", Ret: 100, LatencyNs: 1200, Disp: DispHost, TimeNs: 1},
		{Nr: 257, Name: "openat", Ret: 3, LatencyNs: 5000, Disp: DispLKL, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6", TimeNs: 1},
		{Nr: 2, Name: "open", Ret: -2, Errno: 2, LatencyNs: 3000, Disp: DispLKL, Path: "/etc/ld.so.preload", TimeNs: 1},
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Record(&evs[i&3])
	}
}

// BenchmarkRecordKept measures Record when every event is written to the
// ring (all errors).
func BenchmarkRecordKept(b *testing.B) {
	r := NewRecorder(RecorderConfig{Family: testFamily})
	e := Event{Nr: 2, Name: "open", Ret: -2, Errno: 2, LatencyNs: 3000, Disp: DispLKL, Path: "/etc/ld.so.preload", TimeNs: 1}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Record(&e)
	}
}

// BenchmarkRecordParallel measures contended Record from GOMAXPROCS goroutines.
func BenchmarkRecordParallel(b *testing.B) {
	r := NewRecorder(RecorderConfig{Family: testFamily})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		e := Event{Nr: 0, Name: "read", Ret: 100, LatencyNs: 800, TimeNs: 1}
		for pb.Next() {
			r.Record(&e)
		}
	})
}

func BenchmarkRecordNil(b *testing.B) {
	var r *Recorder
	e := Event{Nr: 0, Name: "read"}
	for i := 0; i < b.N; i++ {
		if r != nil {
			r.Record(&e)
		}
	}
}

// TestPeerEvents: an event with a peer is always kept (not sampled out),
// reads back with its peer and no path, and its JSON line has "peer".
func TestPeerEvents(t *testing.T) {
	r := NewRecorder(RecorderConfig{SampleEvery: 64})
	for i := 0; i < 10; i++ {
		r.Record(&Event{Nr: 42, Name: "connect", Disp: DispLKL, Peer: "10.0.2.2:8000"})
	}
	r.Record(&Event{Nr: 43, Name: "accept", Disp: DispLKL, Ret: 5, Peer: "[::1]:40000"})
	r.Record(&Event{Nr: 2, Name: "open", Disp: DispLKL, Path: "/etc/hosts"})
	dst := make([]Event, 32)
	n, _, _ := r.Read(0, dst)
	if n != 12 {
		t.Fatalf("kept %d events, want all 12", n)
	}
	if dst[0].Peer != "10.0.2.2:8000" || dst[0].Path != "" || dst[10].Peer != "[::1]:40000" || dst[11].Path != "/etc/hosts" || dst[11].Peer != "" {
		t.Errorf("events %+v %+v %+v", dst[0], dst[10], dst[11])
	}
	line := string(AppendEventJSON(nil, &dst[0]))
	if !strings.Contains(line, `"peer":"10.0.2.2:8000"`) || strings.Contains(string(AppendEventJSON(nil, &dst[11])), "peer") {
		t.Errorf("JSON %s", line)
	}
}
