//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dumpFromImage copies a file out of the image with debugfs, so that the
// native run uses the very same binary as the guest.
func dumpFromImage(tb testing.TB, img, guestPath string) string {
	dst := filepath.Join(tb.TempDir(), filepath.Base(guestPath))
	dumpFromImageTo(tb, img, guestPath, dst)
	return dst
}

// dumpFromImageTo copies a file out of the image to host path dst, mode
// 0755.
func dumpFromImageTo(tb testing.TB, img, guestPath, dst string) {
	tb.Helper()
	if out, err := exec.Command("debugfs", "-R", "dump "+guestPath+" "+dst, img).CombinedOutput(); err != nil {
		tb.Fatalf("debugfs dump %s: %v %s", guestPath, err, out)
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		tb.Fatalf("debugfs dump %s: %v", guestPath, err)
	}
}

func parseBench(b *testing.B, out string) float64 {
	f := strings.Fields(strings.TrimSpace(out))
	if len(f) != 2 {
		b.Fatalf("bench output %q", out)
	}
	v, err := strconv.ParseFloat(f[1], 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// BenchmarkSeccompVsNative runs tests/guest/bench natively and under
// --syscall-mode=seccomp on the same image contents, reporting the median
// ns/op of several runs of each and the kbox/native ratio, then the
// notification floor of the stat and open_close rows (notifyFloor).
// KBOX_BENCH_ROWS=a,b runs only those rows.
func BenchmarkSeccompVsNative(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	bench := dumpFromImage(b, img, "/opt/tests/bench")
	hostFile := dumpFromImage(b, img, "/etc/hostname")
	const runs = 5
	rows := []struct {
		name, row string
		iters     int
		// file is the guest's FILE argument; natively the image's copy
		// of /etc/hostname stands for it, unless native is set.
		file, native string
	}{
		{"stat", "stat", 20000, "/etc/hostname", ""}, {"open_close", "open_close", 10000, "/etc/hostname", ""},
		// open+close of /proc/self/status: the guest's /proc, served by
		// kbox from the host's file of the guest process.
		{"open_close_proc", "open_close", 10000, "/proc/self/status", "/proc/self/status"},
		{"lseek_read", "lseek_read", 200000, "/etc/hostname", ""}, {"write", "write", 200000, "/etc/hostname", ""},
		{"getpid_libc", "getpid_libc", 1000000, "/etc/hostname", ""}, {"getpid_inline", "getpid_inline", 1000000, "/etc/hostname", ""},
	}
	kbox := map[string]float64{}
	for _, r := range rows {
		if f := os.Getenv("KBOX_BENCH_ROWS"); f != "" && !strings.Contains(","+f+",", ","+r.name+",") {
			continue
		}
		nativeFile := hostFile
		if r.native != "" {
			nativeFile = r.native
		}
		var native, guest []float64
		for i := 0; i < runs; i++ {
			out, err := exec.Command(bench, r.row, strconv.Itoa(r.iters), nativeFile).Output()
			if err != nil {
				b.Fatalf("native %s: %v", r.name, err)
			}
			native = append(native, parseBench(b, string(out)))
			out, err = exec.Command(bin, "image", "-S", img, "--read-only", "--syscall-mode=seccomp", "--",
				"/opt/tests/bench", r.row, strconv.Itoa(r.iters), r.file).Output()
			if err != nil {
				b.Fatalf("kbox %s: %v", r.name, err)
			}
			guest = append(guest, parseBench(b, string(out)))
		}
		n, g := median(native), median(guest)
		b.Logf("%-15s native %8.1f ns/op   kbox %8.1f ns/op   ratio %6.2fx", r.name, n, g, g/n)
		b.ReportMetric(g/n, r.name+"_ratio")
		b.ReportMetric(g/1000, r.name+"_kbox_us")
		kbox[r.name] = g
	}
	notifyFloor(b, kbox)
	b.ReportMetric(0, "ns/op")
}

// notifyFloor measures, in the same minutes as the rows, the floor of a
// seccomp supervisor doing no work of its own (scripts/notify_floor.c):
// a stat answered from the child's memory (mode 1: the path read, the
// 144 bytes written); an fd installed in the child, which closes it
// (mode 3: ADDFD with FLAG_SEND); and the same with the path read and a
// new description made for each (mode 8): the seccomp tier's open+close
// of a shadow is that and kbox's lookups. The ADDFD floors are taken
// with both tasks on one CPU (PIN 1), as kbox's supervisor keeps a task
// it installs fds in and itself (colocate.go), and apart for reference
// (its two wake-ups then cross CPUs). kbox's rows beside them.
func notifyFloor(b *testing.B, kbox map[string]float64) {
	bin := filepath.Join(b.TempDir(), "notify_floor")
	if out, err := exec.Command("cc", "-O2", "-o", bin, filepath.Join(repoRoot(), "scripts", "notify_floor.c")).CombinedOutput(); err != nil {
		b.Logf("notify_floor not built (%v): %s", err, out)
		return
	}
	usRE := regexp.MustCompile(`([0-9.]+) us/op`)
	// Mode 8 adds what no supervisor of an open can skip: the path read
	// and a new description (kbox's open of a shadow): open_close's floor.
	for _, m := range []struct{ mode, pin, row, kbox string }{
		{"1", "0", "stat", "stat"}, {"3", "1", "open_close_addfd", ""}, {"8", "1", "open_close", "open_close"},
		{"3", "0", "open_close_unpinned", ""},
	} {
		var v []float64
		for i := 0; i < 5; i++ {
			out, err := exec.Command(bin, m.mode, m.pin, "100000").Output()
			f := usRE.FindSubmatch(out)
			if err != nil || f == nil {
				b.Fatalf("notify_floor %s: %v %s", m.mode, err, out)
			}
			us, _ := strconv.ParseFloat(string(f[1]), 64)
			v = append(v, us*1000)
		}
		fl := median(v)
		b.ReportMetric(fl, "notify_floor_"+m.row+"_ns")
		if k, ok := kbox[m.kbox]; ok {
			b.Logf("notify floor (scripts/notify_floor.c mode %s pin %s): %-19s %8.1f ns/op   kbox %8.1f ns/op   kbox/floor %.2fx", m.mode, m.pin, m.row, fl, k, k/fl)
		} else {
			b.Logf("notify floor (scripts/notify_floor.c mode %s pin %s): %-19s %8.1f ns/op", m.mode, m.pin, m.row, fl)
		}
	}
}

// BenchmarkSharedAppend: 64-byte appends to an image file that two other
// processes hold open for appending, natively (a host file) and under
// kbox (a writable copy of the image), median of 5 runs each.
func BenchmarkSharedAppend(b *testing.B) {
	img := copyImage(b, imagePath(b))
	bin := kboxBin(b)
	bench := dumpFromImage(b, img, "/opt/tests/bench")
	const iters = "100000"
	var native, guest []float64
	for i := 0; i < 5; i++ {
		f := filepath.Join(b.TempDir(), "append.out")
		out, err := exec.Command(bench, "append_shared", iters, f).Output()
		if err != nil {
			b.Fatalf("native: %v", err)
		}
		native = append(native, parseBench(b, string(out)))
		out, err = exec.Command(bin, "image", "-S", img, "--syscall-mode=seccomp", "--", "/bin/sh", "-c",
			"/opt/tests/bench append_shared "+iters+" /root/append.out && rm /root/append.out").Output()
		if err != nil {
			b.Fatalf("kbox: %v", err)
		}
		guest = append(guest, parseBench(b, string(out)))
	}
	n, g := median(native), median(guest)
	b.Logf("%-14s native %8.1f ns/op   kbox %8.1f ns/op   ratio %6.2fx", "append_shared", n, g, g/n)
	b.ReportMetric(g/n, "append_shared_ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkStatCredentials runs the stat row of tests/guest/bench as root
// (-S) and as a non-root guest (--change-id 1000:1000), interleaved in one
// run, and reports the non-root/root ratio: LKL checks every stat with the
// caller's credentials (dispatch/cred.go), and a non-root guest should
// cost no more than root (target: within 10%).
func BenchmarkStatCredentials(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	bench := dumpFromImage(b, img, "/opt/tests/bench")
	hostFile := dumpFromImage(b, img, "/etc/hostname")
	const runs, iters = 7, "20000"
	idents := map[string][]string{
		"root":    {"-S", img},
		"uid1000": {"-R", img, "--change-id", "1000:1000"},
	}
	res := map[string][]float64{}
	for i := 0; i < runs; i++ {
		out, err := exec.Command(bench, "stat", iters, hostFile).Output()
		if err != nil {
			b.Fatalf("native stat: %v", err)
		}
		res["native"] = append(res["native"], parseBench(b, string(out)))
		for _, who := range []string{"root", "uid1000"} {
			args := append(append([]string{"image"}, idents[who]...), "--read-only", "--syscall-mode=seccomp", "--",
				"/opt/tests/bench", "stat", iters, "/etc/hostname")
			out, err := exec.Command(bin, args...).Output()
			if err != nil {
				b.Fatalf("kbox stat as %s: %v", who, err)
			}
			res[who] = append(res[who], parseBench(b, string(out)))
		}
	}
	n, r, u := median(res["native"]), median(res["root"]), median(res["uid1000"])
	b.Logf("stat native %8.1f ns/op   root %8.1f ns/op (%.2fx)   uid 1000 %8.1f ns/op (%.2fx)   uid1000/root ratio %.3f",
		n, r, r/n, u, u/n, u/r)
	b.ReportMetric(u/r, "stat_uid1000_vs_root_ratio")
	b.ReportMetric(r/1000, "stat_root_kbox_us")
	b.ReportMetric(u/1000, "stat_uid1000_kbox_us")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkStartup measures `kbox image -- /bin/true`: wall time and the peak
// RSS of the kbox process (which holds the kernel), read-only (which
// leaves the kernel to kbox's exit) and on a writable copy (which
// unmounts and halts); from the start-up trace (KBOX_TRACE_STARTUP), the
// end of each (unmount and halt, or leave) and kbox's Go and LKL threads;
// and an idle run's private memory (smaps_rollup).
func BenchmarkStartup(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	rw := copyImage(b, img)
	type row struct{ wall, rss, end, goThreads, lklThreads []float64 }
	rows := map[string]*row{"read-only": {}, "ephemeral": {}, "read-write": {}}
	endRE := regexp.MustCompile(` (unmount|halt|leave) ([\d.]+)`)
	thrRE := regexp.MustCompile(`Go (\d+), LKL (\d+)`)
	for i := 0; i < 7; i++ {
		for _, mode := range []string{"read-only", "ephemeral", "read-write"} {
			args := []string{"image", "-S", img, "--read-only", "--", "/bin/true"}
			switch mode {
			case "ephemeral":
				args = []string{"image", "-S", img, "--ephemeral", "--", "/bin/true"}
			case "read-write":
				args = []string{"image", "-S", rw, "--", "/bin/true"}
			}
			wall, rss, trace := tracedRun(b, bin, args...)
			r := rows[mode]
			r.wall, r.rss = append(r.wall, wall), append(r.rss, rss)
			end := 0.0
			for _, m := range endRE.FindAllStringSubmatch(trace, -1) {
				v, _ := strconv.ParseFloat(m[2], 64)
				end += v
			}
			r.end = append(r.end, end)
			if m := thrRE.FindStringSubmatch(trace); m != nil {
				g, _ := strconv.Atoi(m[1])
				l, _ := strconv.Atoi(m[2])
				r.goThreads, r.lklThreads = append(r.goThreads, float64(g)), append(r.lklThreads, float64(l))
			}
		}
	}
	ro, eph, wr := rows["read-only"], rows["ephemeral"], rows["read-write"]
	idle := idlePrivateDirtyKB(b, bin, img)
	b.Logf("kbox -- /bin/true: read-only median wall %.1f ms, peak RSS %.1f MB, its end (leave) %.1f ms; --ephemeral %.1f ms; read-write %.1f ms, %.1f MB, its end (unmount, halt) %.1f ms; threads Go %.0f, LKL %.0f; an idle run's private dirty memory %d kB",
		median(ro.wall), median(ro.rss), median(ro.end), median(eph.wall), median(wr.wall), median(wr.rss), median(wr.end), median(ro.goThreads), median(ro.lklThreads), idle)
	b.ReportMetric(median(ro.wall), "wall_ms")
	b.ReportMetric(median(ro.rss), "peak_rss_MB")
	b.ReportMetric(median(ro.end), "end_ms")
	b.ReportMetric(median(eph.wall), "ephemeral_wall_ms")
	b.ReportMetric(median(wr.wall), "rw_wall_ms")
	b.ReportMetric(median(wr.end), "rw_end_ms")
	b.ReportMetric(median(ro.goThreads), "go_threads")
	b.ReportMetric(median(ro.lklThreads), "lkl_threads")
	b.ReportMetric(float64(idle), "idle_private_dirty_kB")
	b.ReportMetric(0, "ns/op")
}

// tracedRun runs kbox with its start-up trace (KBOX_TRACE_STARTUP) and
// returns its wall time (ms), peak RSS (MB) and stderr, which holds the
// trace; a failed run fails b.
func tracedRun(b *testing.B, bin string, args ...string) (wall, rss float64, stderr string) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KBOX_TRACE_STARTUP=1")
	var out strings.Builder
	cmd.Stderr = &out
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("kbox %s: %v\n%s", strings.Join(args, " "), err, lastLines(out.String(), 5))
	}
	return float64(time.Since(t0).Microseconds()) / 1000, tracePeakMB(b, out.String()), out.String()
}

var peakRE = regexp.MustCompile(`; peak RSS (\d+) kB`)

// tracePeakMB is kbox's peak RSS in MB from its start-up trace (VmHWM).
// wait4's figure will not do: Go starts a child with vfork, and the exec
// records the go test process's own peak as the child's.
func tracePeakMB(b *testing.B, trace string) float64 {
	m := peakRE.FindStringSubmatch(trace)
	if m == nil {
		b.Fatalf("no peak RSS in the start-up trace: %s", lastLines(trace, 3))
	}
	kb, _ := strconv.ParseFloat(m[1], 64)
	return kb / 1024
}

// idlePrivateDirtyKB is the Private_Dirty of an idle run's kbox process
// (a guest sleeping), 3 s after its start.
func idlePrivateDirtyKB(b *testing.B, bin, img string) int {
	cmd := exec.Command(bin, "image", "-S", img, "--read-only", "--", "/bin/sleep", "30")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	time.Sleep(3 * time.Second)
	kb := rollupKB(cmd.Process.Pid, "Private_Dirty:")
	if kb == 0 {
		b.Fatal("no Private_Dirty in kbox's smaps_rollup")
	}
	return kb
}

// BenchmarkUnixSend: a 64-byte datagram over a socketpair, sent with
// send(2) (sendto without an address: native) and with sendmsg(2) (kbox
// sends it: its msghdr may name a path), natively and under kbox, median
// of 5 runs each.
func BenchmarkUnixSend(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	bench := dumpFromImage(b, img, "/opt/tests/bench")
	const iters = "100000"
	for _, row := range []string{"unix_send", "unix_sendmsg"} {
		var native, guest []float64
		for i := 0; i < 5; i++ {
			out, err := exec.Command(bench, row, iters).Output()
			if err != nil {
				b.Fatalf("native %s: %v", row, err)
			}
			native = append(native, parseBench(b, string(out)))
			out, err = exec.Command(bin, "image", "-S", img, "--read-only", "--", "/opt/tests/bench", row, iters).Output()
			if err != nil {
				b.Fatalf("kbox %s: %v", row, err)
			}
			guest = append(guest, parseBench(b, string(out)))
		}
		n, g := median(native), median(guest)
		b.Logf("%-14s native %8.1f ns/op   kbox %8.1f ns/op   ratio %6.2fx", row, n, g, g/n)
		b.ReportMetric(g/n, row+"_ratio")
	}
	b.ReportMetric(0, "ns/op")
}
