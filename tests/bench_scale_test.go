//go:build lkl

package tests

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkScale: many sandboxes at once on this machine, under the
// default tier: 200 short runs (`ls -lR /usr`), 20 at a time, alongside
// 50 long runs all at once (each a loop of small commands for 60 s,
// KBOX_SCALE_SECONDS). It reports the failures, the total wall time, the
// peak memory in use above what was in use before (MemTotal minus
// MemAvailable, sampled every 100 ms), and what is left after: kbox
// processes and files in the runs' TMPDIR. A failure or a leftover fails
// the benchmark.
func BenchmarkScale(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	secs := 60
	if v, err := strconv.Atoi(os.Getenv("KBOX_SCALE_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	tmp := b.TempDir()
	base := memInUseKB()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if m := int64(memInUseKB() - base); m > peak.Load() {
				peak.Store(m)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var failures atomic.Int32
	var firstErr atomic.Value
	run := func(args ...string) {
		cmd := exec.Command(bin, append([]string{"image", "-S", img, "--read-only", "--"}, args...)...)
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		cmd.Stdout = io.Discard
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Run(); err != nil {
			failures.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprintf("%v: %v: %s", args, err, lastLines(errb.String(), 3)))
		}
	}
	loop := fmt.Sprintf("end=$(($(date +%%s) + %d)); while [ $(date +%%s) -lt $end ]; do ls / > /dev/null; cat /etc/hostname > /dev/null; sleep 0.2; done", secs)
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run("/bin/sh", "-c", loop)
		}()
	}
	var shortMax time.Duration
	var mu sync.Mutex
	sem := make(chan struct{}, 20)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			s := time.Now()
			run("/bin/ls", "-lR", "/usr")
			mu.Lock()
			shortMax = max(shortMax, time.Since(s))
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	close(stop)
	<-sampled
	time.Sleep(time.Second) // what a run left would still be there
	exe, _ := filepath.Abs(bin)
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	procs := kboxProcesses(exe)
	left, _ := os.ReadDir(tmp)
	b.Logf("200 short runs (20 at a time) beside 50 runs of %d s: %d failures, wall %.1f s (the slowest short run %.1f s), peak memory in use +%d MB; left: %d kbox processes, %d files",
		secs, failures.Load(), wall.Seconds(), shortMax.Seconds(), peak.Load()>>10, len(procs), len(left))
	if e := firstErr.Load(); e != nil {
		b.Errorf("first failure: %s", e)
	}
	if len(procs) > 0 || len(left) > 0 {
		b.Errorf("left behind: processes %v, files %v", procs, left)
	}
	b.ReportMetric(float64(failures.Load()), "failures")
	b.ReportMetric(wall.Seconds(), "wall_s")
	b.ReportMetric(float64(peak.Load()>>10), "peak_MB")
	b.ReportMetric(0, "ns/op")
}

// memInUseKB is MemTotal minus MemAvailable (/proc/meminfo), kB.
func memInUseKB() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var total, avail int
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total, _ = strconv.Atoi(f[1])
		case "MemAvailable:":
			avail, _ = strconv.Atoi(f[1])
		}
	}
	return total - avail
}

// kboxProcesses are the live processes running bin (zombies left to an
// init that does not reap do not count).
func kboxProcesses(bin string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if exe, err := os.Readlink(d + "/exe"); err != nil || exe != bin {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		out = append(out, pid)
	}
	return out
}
