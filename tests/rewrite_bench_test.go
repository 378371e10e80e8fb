//go:build lkl

package tests

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kbox-project/kbox/seccomp"
	"github.com/kbox-project/kbox/tierpolicy"
)

// BenchmarkRewrite runs rows of tests/guest/bench natively and under the
// seccomp, trap and rewrite tiers, interleaved in one run (median of
// KBOX_BENCH_RUNS, 5 by default), with each tier's ratio to native; then,
// in the same minutes, the floor of a patched call with
// scripts/trap_floor.c (native stat, stat between the two arch_prctl FS
// switches a patched site costs on a CPU without FSGSBASE, the switches
// alone, and an open+close natively and with the host work an in-process
// open and close add: a new description, dup3 onto the guest's number,
// the placeholder back), and the sites patched and still trapping for the
// bench program and for `ls -lR /usr`. KBOX_BENCH_ROWS=a,b runs only those rows.
func BenchmarkRewrite(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	bench := dumpFromImage(b, img, "/opt/tests/bench")
	hostFile := dumpFromImage(b, img, "/etc/hostname")
	runs := 5
	if v, err := strconv.Atoi(os.Getenv("KBOX_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	rows := []struct {
		name  string
		iters int
	}{
		// Enough iterations that the run outlasts its start-up's
		// background work (the first second: docs/benchmarks.md,
		// "Start-up"), and resolves 0.01 us.
		{"stat", 100000}, {"open_close", 100000}, {"lseek_read", 1000000}, {"getpid_libc", 2000000}, {"getpid_inline", 2000000},
	}
	modes := tiers
	for _, r := range rows {
		if f := os.Getenv("KBOX_BENCH_ROWS"); f != "" && !strings.Contains(","+f+",", ","+r.name+",") {
			continue
		}
		res := map[string][]float64{}
		for i := 0; i < runs; i++ {
			out, err := exec.Command(bench, r.name, strconv.Itoa(r.iters), hostFile).Output()
			if err != nil {
				b.Fatalf("native %s: %v", r.name, err)
			}
			res["native"] = append(res["native"], parseBench(b, string(out)))
			for _, mode := range modes {
				out, err := exec.Command(bin, "image", "-S", img, "--read-only", "--syscall-mode="+mode, "--",
					"/opt/tests/bench", r.name, strconv.Itoa(r.iters), "/etc/hostname").Output()
				if err != nil {
					b.Fatalf("kbox %s %s: %v", mode, r.name, err)
				}
				res[mode] = append(res[mode], parseBench(b, string(out)))
			}
		}
		n := median(res["native"])
		line := []string{}
		for _, mode := range modes {
			m := median(res[mode])
			line = append(line, mode+" "+strconv.FormatFloat(m, 'f', 1, 64)+" ("+strconv.FormatFloat(m/n, 'f', 2, 64)+"x)")
			b.ReportMetric(m/n, r.name+"_"+mode+"_ratio")
		}
		b.Logf("%-13s native %8.1f ns/op   %s", r.name, n, strings.Join(line, "   "))
	}
	floor := filepath.Join(b.TempDir(), "trap_floor")
	if out, err := exec.Command("cc", "-O2", "-pthread", "-o", floor, filepath.Join(repoRoot(), "scripts", "trap_floor.c")).CombinedOutput(); err != nil {
		b.Logf("trap_floor not built (%v): %s", err, out)
	} else {
		var line []string
		for _, mode := range []string{"native", "patched", "fsbase", "trapfs", "openclose", "fdplace", "fdlend"} {
			var v []float64
			for i := 0; i < runs; i++ {
				out, err := exec.Command(floor, mode, "20000", hostFile).Output()
				if err != nil {
					b.Fatalf("trap_floor %s: %v", mode, err)
				}
				v = append(v, parseBench(b, string(out)))
			}
			line = append(line, mode+" "+strconv.FormatFloat(median(v), 'f', 1, 64))
			b.ReportMetric(median(v), "floor_"+mode+"_ns")
		}
		b.Logf("floor (scripts/trap_floor.c, stat; openclose, fdplace and fdlend: open+close, ns/op): %s", strings.Join(line, "   "))
	}
	filterFloor(b, hostFile, runs)
	sites := regexp.MustCompile(`kbox: tier rewrite [^\n]*`)
	for _, c := range [][]string{
		{"/opt/tests/bench", "stat", "20000", "/etc/hostname"},
		{"/opt/tests/bench", "getpid_inline", "20000"},
		{"/bin/ls", "-lR", "/usr"},
	} {
		cmd := exec.Command(bin, append([]string{"image", "-S", img, "--read-only", "--syscall-mode=rewrite", "--stats", "--"}, c...)...)
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Run(); err != nil {
			b.Fatalf("%v: %v", c, err)
		}
		b.Logf("sites: %s: %s", strings.Join(c, " "), sites.FindString(errb.String()))
	}
	b.ReportMetric(0, "ns/op")
}

// filterFloor: what a seccomp filter costs a call it lets run natively
// (scripts/filter_floor.c, the lseek_read row's op), in the same minutes
// as the tiers' rows: on the host file, on a memfd copy (what a guest
// reads under kbox), and on the copy under an allow-all filter, the least
// filter that reads an argument, and the seccomp tier's own filter, alone
// and with a second thread sharing the fd table (the in-process tiers').
func filterFloor(b *testing.B, hostFile string, runs int) {
	bin := filepath.Join(b.TempDir(), "filter_floor")
	if out, err := exec.Command("cc", "-O2", "-pthread", "-o", bin, filepath.Join(repoRoot(), "scripts", "filter_floor.c")).CombinedOutput(); err != nil {
		b.Logf("filter_floor not built (%v): %s", err, out)
		return
	}
	prog, err := tierpolicy.Seccomp(seccomp.DefaultVirtualFDBase, true).Assemble()
	if err != nil {
		b.Fatal(err)
	}
	var raw []byte // struct sock_filter, as the kernel takes it
	for _, ins := range prog {
		raw = binary.NativeEndian.AppendUint16(raw, ins.Op)
		raw = append(raw, ins.Jt, ins.Jf)
		raw = binary.NativeEndian.AppendUint32(raw, ins.K)
	}
	filter := filepath.Join(b.TempDir(), "kbox.bpf")
	if err := os.WriteFile(filter, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	// +thread: with a second thread sharing the fd table, as a guest of
	// an in-process tier shares kbox's.
	modes := []string{"native", "memfd", "allow", "fdonly", "kbox=" + filter, "kbox=" + filter + "+thread"}
	v := map[string][]float64{}
	for i := 0; i < runs; i++ {
		for _, mode := range modes {
			out, err := exec.Command(bin, mode, "500000", hostFile).Output()
			if err != nil {
				b.Fatalf("filter_floor %s: %v", mode, err)
			}
			v[mode] = append(v[mode], parseBench(b, string(out)))
		}
	}
	var line []string
	for _, mode := range modes {
		name, _, _ := strings.Cut(mode, "=")
		if strings.HasSuffix(mode, "+thread") {
			name += "_thread"
		}
		line = append(line, name+" "+strconv.FormatFloat(median(v[mode]), 'f', 1, 64))
		b.ReportMetric(median(v[mode]), "filter_"+name+"_ns")
	}
	b.Logf("filter floor (scripts/filter_floor.c, lseek_read, ns/op): %s", strings.Join(line, "   "))
}

// BenchmarkAutoStartup: wall time and peak RSS of `kbox image -- /bin/ls /`
// with no tier option (the default: seccomp, which confines), with
// --trusted (auto picks the rewrite tier for ls), and in the seccomp tier
// asked for, interleaved in one run.
func BenchmarkAutoStartup(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	modes := []struct{ name, opt string }{{"default", "--read-only"}, {"seccomp", "--syscall-mode=seccomp"}, {"trusted", "--trusted"}}
	wall := make([][]float64, len(modes))
	rss := make([][]float64, len(modes))
	for i := 0; i < 7; i++ {
		for m, mode := range modes {
			w, r, _ := tracedRun(b, bin, "image", "-S", img, "--read-only", mode.opt, "--", "/bin/ls", "/")
			wall[m], rss[m] = append(wall[m], w), append(rss[m], r)
		}
	}
	for m, mode := range modes {
		b.Logf("%-8s kbox -- /bin/ls /: median wall %.1f ms, peak RSS %.1f MB", mode.name, median(wall[m]), median(rss[m]))
		b.ReportMetric(median(wall[m]), mode.name+"_wall_ms")
		b.ReportMetric(median(rss[m]), mode.name+"_peak_rss_MB")
	}
	b.ReportMetric(0, "ns/op")
}
