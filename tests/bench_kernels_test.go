//go:build lkl

package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A kernel under comparison: a kbox binary and the liblkl it links.
type benchKernel struct {
	name     string // from `kbox version`: its configuration and KASAN
	bin      string
	lib, inc string // liblkl.a and its headers, for lkl_floor
	floor    string // lkl_floor built against lib ("" if not built)
}

// BenchmarkKernels compares kbox on two liblkls in one run: KBOX_BIN with
// KBOX_LKL_LIB/KBOX_LKL_INC, and KBOX_BIN_ALT with KBOX_LKL_LIB_ALT and
// KBOX_LKL_INC_ALT (`make bench LKL_ALT=DIR` builds kbox-alt against the
// liblkl installed in DIR; docs/benchmarks.md, "Kernels"). Rounds
// alternate the two, with the native figures taken in the same rounds:
// stat and open+close in each tier, start-up of /bin/true with its peak
// RSS, LKL's own floor (scripts/lkl_floor.c: boot+mount, a cold and a
// warm walk of /usr, no kbox) and connections per second under --net.
func BenchmarkKernels(b *testing.B) {
	alt := os.Getenv("KBOX_BIN_ALT")
	if alt == "" {
		b.Skip("SKIP BenchmarkKernels: no second kbox (make bench LKL_ALT=DIR builds kbox-alt against DIR's liblkl)")
	}
	img := imagePath(b)
	ks := []*benchKernel{
		{bin: kboxBin(b), lib: os.Getenv("KBOX_LKL_LIB"), inc: os.Getenv("KBOX_LKL_INC")},
		{bin: alt, lib: os.Getenv("KBOX_LKL_LIB_ALT"), inc: os.Getenv("KBOX_LKL_INC_ALT")},
	}
	for i, k := range ks {
		k.name = fmt.Sprintf("%d:%s", i+1, kernelName(b, k.bin))
		if k.lib != "" && k.inc != "" {
			k.floor = filepath.Join(b.TempDir(), fmt.Sprintf("lkl_floor%d", i))
			if out, err := exec.Command("cc", "-O2", "-I"+k.inc, "-o", k.floor, filepath.Join(repoRoot(), "scripts", "lkl_floor.c"),
				k.lib, "-lpthread", "-lrt").CombinedOutput(); err != nil {
				b.Logf("lkl_floor for %s not built (%v): %s", k.name, err, lastLines(string(out), 5))
				k.floor = ""
			}
		}
		b.Logf("kernel %d: %s (%s)", i+1, k.name, k.bin)
	}
	bench := dumpFromImage(b, img, "/opt/tests/bench")
	hostFile := dumpFromImage(b, img, "/etc/hostname")
	fig := map[string][]float64{} // row → one figure per round
	add := func(row string, v float64) { fig[row] = append(fig[row], v) }
	calls := []struct {
		row   string
		iters int
	}{{"stat", 20000}, {"open_close", 10000}}
	const rounds = 5
	for round := 0; round < rounds; round++ {
		for _, c := range calls {
			out, err := exec.Command(bench, c.row, strconv.Itoa(c.iters), hostFile).Output()
			if err != nil {
				b.Fatalf("native %s: %v", c.row, err)
			}
			add("native "+c.row, parseBench(b, string(out)))
			for _, k := range ks {
				for _, tier := range tiers {
					out, _, st := runBin(b, k.bin, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "--",
						"/opt/tests/bench", c.row, strconv.Itoa(c.iters), "/etc/hostname")
					if st != 0 {
						b.Fatalf("%s %s %s: status %d", k.name, tier, c.row, st)
					}
					add(k.name+" "+tier+" "+c.row, parseBench(b, out))
				}
			}
		}
		for _, k := range ks {
			w, r, _ := tracedRun(b, k.bin, "image", "-S", img, "--read-only", "--", "/bin/true")
			add(k.name+" startup_ms", w)
			add(k.name+" peak_rss_MB", r)
			if k.floor != "" {
				out, err := exec.Command(k.floor, img, "/usr").CombinedOutput()
				if err != nil {
					b.Fatalf("lkl_floor %s: %v: %s", k.name, err, lastLines(string(out), 5))
				}
				for row, re := range floorFigures {
					if m := re.FindStringSubmatch(string(out)); m != nil {
						v, _ := strconv.ParseFloat(m[1], 64)
						add(k.name+" "+row, v)
					}
				}
			}
		}
	}
	for _, c := range calls {
		n := median(fig["native "+c.row])
		b.Logf("%-10s native %7.1f ns", c.row, n)
		for _, tier := range tiers {
			line := fmt.Sprintf("%-10s %-8s", c.row, tier)
			for i, k := range ks {
				g := median(fig[k.name+" "+tier+" "+c.row])
				line += fmt.Sprintf("   %s %8.1f ns (ratio %5.2fx)", k.name, g, g/n)
				b.ReportMetric(g/n, fmt.Sprintf("k%d_%s_%s_ratio", i+1, tier, c.row))
			}
			b.Log(line)
		}
	}
	for _, row := range []string{"startup_ms", "peak_rss_MB", "boot_mount_ms", "walk_cold_ms", "walk_warm_ms"} {
		line := fmt.Sprintf("%-14s", row)
		for i, k := range ks {
			if v := fig[k.name+" "+row]; len(v) > 0 {
				line += fmt.Sprintf("   %s %8.1f", k.name, median(v))
				b.ReportMetric(median(v), fmt.Sprintf("k%d_%s", i+1, row))
			}
		}
		b.Log(line)
	}
	kernelConns(b, img, ks)
	b.ReportMetric(0, "ns/op")
}

// floorFigures parse lkl_floor's output.
var floorFigures = map[string]*regexp.Regexp{
	"boot_mount_ms": regexp.MustCompile(`boot\+mount ([0-9.]+) ms`),
	"walk_cold_ms":  regexp.MustCompile(`lkl .*cold ([0-9.]+) ms`),
	"walk_warm_ms":  regexp.MustCompile(`lkl .*warm median ([0-9.]+) ms`),
}

// kernelConns: connections per second from the guest to a host server
// under --net (tests/guest/inet's conns), each kernel, natively in the
// same rounds.
func kernelConns(b *testing.B, img string, ks []*benchKernel) {
	inet := dumpFromImage(b, img, "/opt/tests/inet")
	p := strconv.Itoa(echoServerB(b))
	var native []float64
	guest := make([][]float64, len(ks))
	for round := 0; round < 3; round++ {
		out, err := exec.Command(inet, "conns", "127.0.0.1", p, "300").Output()
		if err != nil {
			b.Fatalf("native conns: %v", err)
		}
		native = append(native, inetFigure(b, "net_conns", string(out)))
		for i, k := range ks {
			out, _, st := runBin(b, k.bin, "image", "-S", img, "--read-only", "--net", "--net-allow", "127.0.0.1:"+p, "--",
				"/opt/tests/inet", "conns", "10.0.2.2", p, "300")
			if st != 0 {
				b.Fatalf("%s conns: status %d", k.name, st)
			}
			guest[i] = append(guest[i], inetFigure(b, "net_conns", out))
		}
	}
	line := fmt.Sprintf("net_conns      native %7.1f /s", median(native))
	for i, k := range ks {
		line += fmt.Sprintf("   %s %7.1f /s (%4.1f%%)", k.name, median(guest[i]), 100*median(guest[i])/median(native))
		b.ReportMetric(median(guest[i]), fmt.Sprintf("k%d_conns_per_s", i+1))
	}
	b.Log(line)
}

// kernelName names the kernel a kbox links as `kbox version` does: its
// configuration and whether KASAN is on.
func kernelName(b *testing.B, bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		b.Fatalf("%s version: %v", bin, err)
	}
	conf, kasan := "?", "?"
	if m := regexp.MustCompile(`configuration (\w[\w-]*)`).FindStringSubmatch(string(out)); m != nil {
		conf = m[1]
	}
	if m := regexp.MustCompile(`KASAN (on|off)`).FindStringSubmatch(string(out)); m != nil {
		kasan = m[1]
	}
	if conf == "unknown" {
		conf = "lkl-default"
	}
	return conf + "/kasan-" + kasan
}

// runBin runs a given kbox binary (runKbox runs KBOX_BIN's) with a
// time limit, returning its stdout, stderr and exit status.
func runBin(b *testing.B, bin string, args ...string) (string, string, int) {
	out, errOut, st, _ := runBinState(b, bin, args...)
	return out, errOut, st
}

func runBinState(b *testing.B, bin string, args ...string) (string, string, int, *os.ProcessState) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if cmd.ProcessState == nil {
		b.Fatalf("%s: %v", bin, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode(), cmd.ProcessState
}
