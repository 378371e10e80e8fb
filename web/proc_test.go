package web

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

const sampleStat = `cpu  10132153 290696 3084719 46828483 16683 0 25195 0 0 0
cpu0 1393280 32966 572056 13343292 6130 0 17875 0 0 0
cpu1 1335009 28610 448633 13410003 3321 0 1956 0 0 0
intr 1012994133 16 0 0 0 0 0 0 0 1 0 0 0 158 0 0 0
ctxt 1990473542
btime 1062191376
processes 2915184
procs_running 3
procs_blocked 1
softirq 229245889 94 60001584 13619 5175704 2471304 0 41 108542 1246 84880336
`

// sampleStatLKL resembles an LKL guest: one CPU, few processes.
const sampleStatLKL = "cpu  0 0 12 3400 0 0 0 0 0 0\ncpu0 0 0 12 3400 0 0 0 0 0 0\nintr 120\nctxt 4512\nbtime 0\nprocesses 7\nprocs_running 1\nprocs_blocked 0\nsoftirq 330 0 210 0 0 40 0 0 60 0 20\n"

const sampleMeminfo = `MemTotal:       16314368 kB
MemFree:         8102344 kB
MemAvailable:   12311236 kB
Buffers:          512320 kB
Cached:          3804812 kB
SwapCached:            0 kB
Active:          4812312 kB
Inactive:        2391232 kB
Slab:             402112 kB
SReclaimable:     291444 kB
SUnreclaim:       110668 kB
`

const sampleVmstat = `nr_free_pages 2025586
nr_zone_inactive_anon 12
pgpgin 18112344
pgfault 912345678
pgmajfault 4567
pgrefill 0
`

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ProcStat
		wantErr bool
	}{
		{"host", sampleStat, ProcStat{Ctxt: 1990473542, Processes: 2915184, ProcsRunning: 3, ProcsBlocked: 1, SoftirqTotal: 229245889,
			Softirqs: [10]uint64{94, 60001584, 13619, 5175704, 2471304, 0, 41, 108542, 1246, 84880336}}, false},
		{"lkl", sampleStatLKL, ProcStat{Ctxt: 4512, Processes: 7, ProcsRunning: 1, SoftirqTotal: 330,
			Softirqs: [10]uint64{0, 210, 0, 0, 40, 0, 0, 60, 0, 20}}, false},
		{"short softirq", "softirq 5 1 2\n", ProcStat{SoftirqTotal: 5, Softirqs: [10]uint64{1, 2}}, false},
		{"no newline, tabs", "ctxt\t42", ProcStat{Ctxt: 42}, false},
		{"garbage numbers", "ctxt abc\nprocesses -1\n", ProcStat{}, true},
		{"empty", "", ProcStat{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseMeminfo(t *testing.T) {
	m, err := ParseMeminfo([]byte(sampleMeminfo))
	if err != nil {
		t.Fatal(err)
	}
	want := MemInfo{TotalKB: 16314368, FreeKB: 8102344, BuffersKB: 512320, CachedKB: 3804812, SlabKB: 402112,
		UsedKB: 16314368 - 8102344 - 512320 - 3804812 - 402112}
	if m != want {
		t.Fatalf("got %+v want %+v", m, want)
	}
	// Inconsistent numbers clamp used at 0.
	m, err = ParseMeminfo([]byte("MemTotal: 10 kB\nMemFree: 20 kB\n"))
	if err != nil || m.UsedKB != 0 {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := ParseMeminfo([]byte("nothing here\n")); err == nil {
		t.Fatal("want error")
	}
}

func TestParseVMStat(t *testing.T) {
	v, err := ParseVMStat([]byte(sampleVmstat))
	if err != nil || v != (VMStat{PgFault: 912345678, PgMajFault: 4567}) {
		t.Fatalf("%+v %v", v, err)
	}
	if _, err := ParseVMStat(nil); err == nil {
		t.Fatal("want error")
	}
}

func TestParseLoadavg(t *testing.T) {
	tests := []struct {
		in      string
		want    LoadAvg
		wantErr bool
	}{
		{"0.52 0.58 0.59 2/1234 56789\n", LoadAvg{Load: [3]float64{0.52, 0.58, 0.59}, Running: 2, Total: 1234, LastPid: 56789, ParsedFields: 5}, false},
		{"0.00 0.00 0.00 1/3 7", LoadAvg{Running: 1, Total: 3, LastPid: 7, ParsedFields: 5}, false},
		{"1.5 2 3", LoadAvg{Load: [3]float64{1.5, 2, 3}, ParsedFields: 3}, false},
		{"1.5 2", LoadAvg{}, true},
		{"NaN 1 1", LoadAvg{}, true},
		{"", LoadAvg{}, true},
	}
	for _, tc := range tests {
		got, err := ParseLoadavg([]byte(tc.in))
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("%q: got %+v, %v", tc.in, got, err)
		}
	}
}

func TestParseRealProc(t *testing.T) {
	for name, parse := range map[string]func([]byte) error{
		"/proc/stat":    func(b []byte) error { _, err := ParseStat(b); return err },
		"/proc/meminfo": func(b []byte) error { _, err := ParseMeminfo(b); return err },
		"/proc/vmstat":  func(b []byte) error { _, err := ParseVMStat(b); return err },
		"/proc/loadavg": func(b []byte) error { _, err := ParseLoadavg(b); return err },
		"/proc/sys/fs/file-nr": func(b []byte) error {
			n, err := ParseFileNr(b)
			if err == nil && n == 0 {
				err = errNoData
			}
			return err
		},
	} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Skipf("%s: %v", name, err)
		}
		if err := parse(b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(sampleStat))
	f.Add([]byte(sampleStatLKL))
	f.Add([]byte("softirq 1 2 3 4 5 6 7 8 9 10 11 12 13\nctxt 18446744073709551616\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStat(b)
		if err != nil && s.Ctxt != 0 {
			t.Fatal("error with data")
		}
	})
}

func FuzzParseMeminfo(f *testing.F) {
	f.Add([]byte(sampleMeminfo))
	f.Add([]byte("MemTotal: 18446744073709551615 kB\nMemFree: 18446744073709551615 kB\nCached: 5 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMeminfo(b)
		if err == nil && m.UsedKB > m.TotalKB {
			t.Fatalf("used > total: %+v", m)
		}
	})
}

func FuzzParseVMStat(f *testing.F) {
	f.Add([]byte(sampleVmstat))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ParseVMStat(b) })
}

func FuzzParseLoadavg(f *testing.F) {
	f.Add([]byte("0.52 0.58 0.59 2/1234 56789\n"))
	f.Add([]byte("1 2 3 /5 x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLoadavg(b)
		if err == nil {
			for _, v := range l.Load {
				if v != v || v < 0 {
					t.Fatalf("bad load %v", l.Load)
				}
			}
		}
	})
}

// fakeProc serves mutable /proc texts.
type fakeProc struct{ files map[string]string }

func (p *fakeProc) read(path string) ([]byte, error) {
	s, ok := p.files[path]
	if !ok {
		return nil, errors.New("ENOENT")
	}
	return []byte(s), nil
}

func TestSamplerRatesHistoryPause(t *testing.T) {
	fp := &fakeProc{files: map[string]string{
		"/proc/stat":           "ctxt 1000\nprocesses 5\nsoftirq 100 0 50 0 0 0 0 0 50 0 0\n",
		"/proc/meminfo":        sampleMeminfo,
		"/proc/vmstat":         sampleVmstat,
		"/proc/loadavg":        "0.25 0.50 0.75 1/10 99\n",
		"/proc/sys/fs/file-nr": "42\t0\t9223372036854775807\n",
	}}
	rec := NewRecorder(RecorderConfig{Family: testFamily})
	s := NewSampler(SamplerConfig{ReadFile: fp.read, History: 5, Recorder: rec, FDTable: func() (int, int) { return 7, 1024 }})
	s0 := s.SampleNow()
	if !s0.Kernel.Available || s0.Kernel.ContextSwitches != 1000 || s0.FDTable.Used != 7 || s0.Kernel.LoadAvg[2] != 0.75 || s0.Kernel.OpenFiles != 42 {
		t.Fatalf("first snapshot %+v", s0.Kernel)
	}
	time.Sleep(20 * time.Millisecond)
	for i := 0; i < 100; i++ {
		rec.Record(&Event{Nr: 0, Name: "read"})
	}
	fp.files["/proc/stat"] = "ctxt 3000\nprocesses 6\nsoftirq 200 0 100 0 0 0 0 0 100 0 0\n"
	s1 := s.SampleNow()
	dt := float64(s1.TimeNs-s0.TimeNs) / 1e9
	near := func(got, want float64) bool { return got > want*0.99 && got < want*1.01 }
	if !near(s1.Kernel.ContextSwitchesPerS, 2000/dt) || !near(s1.SyscallRatePerS, 100/dt) ||
		!near(s1.FamilyRatePerS["io"], 100/dt) || s1.FamilyRatePerS["file"] != 0 ||
		!near(s1.Kernel.SoftirqRatePerS["TIMER"], 50/dt) || !near(s1.Kernel.SoftirqRatePerS["SCHED"], 50/dt) {
		t.Fatalf("rates dt=%v: %+v %+v", dt, s1.Kernel, s1.FamilyRatePerS)
	}
	for i := 0; i < 10; i++ {
		s.SampleNow()
	}
	h := s.History(0)
	if len(h) != 5 || h[0].TimeNs >= h[4].TimeNs || h[0].LatencyHistNs != nil {
		t.Fatalf("history len %d", len(h))
	}
	if got := s.History(2); len(got) != 2 || got[1].TimeNs != h[4].TimeNs {
		t.Fatal("history limit")
	}
	s.Pause()
	if !s.Latest().Paused {
		t.Fatal("not paused")
	}
	s.Resume()
	if s.Latest().Paused {
		t.Fatal("still paused")
	}
}

func TestSamplerLoopPauseAndStop(t *testing.T) {
	s := NewSampler(SamplerConfig{ReadFile: os.ReadFile, Interval: 10 * time.Millisecond, Recorder: NewRecorder(RecorderConfig{})})
	s.Start()
	s.Start() // idempotent
	time.Sleep(60 * time.Millisecond)
	s.Pause()
	time.Sleep(15 * time.Millisecond)
	n := len(s.History(0))
	if n < 2 {
		t.Fatalf("history %d", n)
	}
	time.Sleep(50 * time.Millisecond)
	if m := len(s.History(0)); m != n {
		t.Fatalf("history grew while paused: %d -> %d", n, m)
	}
	s.Resume()
	time.Sleep(50 * time.Millisecond)
	if m := len(s.History(0)); m <= n {
		t.Fatal("history did not grow after resume")
	}
	s.Stop()
	s.Stop()
}

func TestSamplerNoProc(t *testing.T) {
	s := NewSampler(SamplerConfig{})
	snap := s.Latest()
	if snap.Kernel.Available || len(snap.Kernel.Softirqs) != NumSoftirqs || !strings.Contains(strings.Join(SoftirqNames[:], ","), "HRTIMER") {
		t.Fatalf("%+v", snap.Kernel)
	}
}

func TestParsePidStatFaults(t *testing.T) {
	for _, c := range []struct {
		in           string
		minor, major uint64
		ok           bool
	}{
		{"1234 (sh) S 1 1234 1234 34816 1234 4194560 100 20 3 1 5 6 0 0 20 0 1 0", 120, 4, true},
		{"7 (a) b) c) R 1 7 7 0 -1 0 5 0 0 0", 5, 0, true}, // ")" inside comm
		{"1234 (sh) S 1 1234", 0, 0, false},
		{"no paren", 0, 0, false},
		{"1 (x) S 1 1 1 0 -1 0 x 0 0 0", 0, 0, false},
	} {
		mi, ma, err := ParsePidStatFaults([]byte(c.in))
		if (err == nil) != c.ok || mi != c.minor || ma != c.major {
			t.Errorf("%q: got %d %d %v, want %d %d ok=%v", c.in, mi, ma, err, c.minor, c.major, c.ok)
		}
	}
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil || os.Getenv("KBOX_EMULATED") != "" {
		t.Skip("no real /proc/self/stat (missing, or emulated by qemu-user)")
	}
	if mi, _, err := ParsePidStatFaults(b); err != nil || mi == 0 {
		t.Errorf("own /proc/self/stat: %d faults, %v", mi, err)
	}
}

func FuzzParsePidStatFaults(f *testing.F) {
	f.Add([]byte("1234 (sh) S 1 1234 1234 34816 1234 4194560 100 20 3 1 5 6"))
	f.Fuzz(func(t *testing.T, b []byte) { ParsePidStatFaults(b) })
}
