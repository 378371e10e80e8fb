//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkNetLKLFloor: the floor LKL's own TCP puts under BenchmarkNet's
// net_conns and net_rtt rows. scripts/lkl_net_floor.c boots the liblkl
// kbox links and runs inet's conns and rtt workloads between two C
// threads over LKL's loopback, calling lkl_syscall directly (no kbox, no
// device, no user-mode stack), then the same code on the host's loopback
// in the same run. Both ends are LKL's there, so it bounds what LKL alone
// costs a connection; usernet's BenchmarkGuestConns is the same for the
// user-mode network. Median of 3; needs cc and liblkl through CGO_CFLAGS
// and CGO_LDFLAGS (as make sets them). docs/benchmarks.md, "The floors
// of a connection".
func BenchmarkNetLKLFloor(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "lkl_net_floor")
	args := append(strings.Fields(os.Getenv("CGO_CFLAGS")), "-o", bin, filepath.Join(repoRoot(), "scripts", "lkl_net_floor.c"))
	args = append(args, strings.Fields(os.Getenv("CGO_LDFLAGS"))...)
	args = append(args, "-l:liblkl.a", "-lpthread", "-lrt")
	if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		b.Skipf("*** lkl_net_floor not built (%v; CGO_CFLAGS and CGO_LDFLAGS name liblkl under make): %s", err, lastLines(string(out), 3))
	}
	fig := map[string][]float64{}
	for i := 0; i < 3; i++ {
		out, err := exec.Command(bin, "1000", "2000").Output()
		if err != nil {
			b.Fatalf("lkl_net_floor: %v %s", err, out)
		}
		// "lkl conns 3801.3 /s ...", "native rtt 39.5 us ..."
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) >= 3 {
				v, err := strconv.ParseFloat(f[2], 64)
				if err == nil {
					fig[f[0]+" "+f[1]] = append(fig[f[0]+" "+f[1]], v)
				}
			}
		}
	}
	lc, nc := median(fig["lkl conns"]), median(fig["native conns"])
	lr, nr := median(fig["lkl rtt"]), median(fig["native rtt"])
	b.Logf("LKL alone (both ends, its loopback): conns %.1f /s (%.1f%% of native %.1f /s)   rtt %.1f us (%.1fx native %.1f us)", lc, 100*lc/nc, nc, lr, lr/nr, nr)
	b.ReportMetric(lc/nc, "lkl_conns_ratio")
	b.ReportMetric(lr/nr, "lkl_rtt_ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkNetChainFloor: the floor the chain a guest connection crosses
// puts under BenchmarkNet's net_conns and net_rtt rows, and kbox's place
// above it, in the same minutes. tests/testdata/netchain boots LKL with
// kbox's device and user-mode network (configured as --net configures
// them) and runs inet's conns and rtt workloads from one thread through
// LKL's own blocking sockets to 10.0.2.2 (the host's 127.0.0.1): LKL's
// TCP, the device, gVisor's TCP, the host dial and the host's TCP, with
// no guest process, no seccomp notification, no socket pair and no
// pumps; then the same with non-blocking sockets asked again at once
// (a spinning waiter: what learning of readiness sooner could gain at
// most); then behind a host socketpair relayed by two goroutines (the
// pair kbox gives a guest, with no notification: netchain's "pair");
// then natively to the same echo server. Each of 3 rounds runs
// netchain, then kbox's inet (seccomp tier, as BenchmarkNet) against the
// same server; medians. docs/benchmarks.md, "The chain's floor".
func BenchmarkNetChainFloor(b *testing.B) {
	img := imagePath(b)
	bin := filepath.Join(b.TempDir(), "netchain")
	build := exec.Command("go", "build", "-tags", "lkl", "-o", bin, "./testdata/netchain")
	if out, err := build.CombinedOutput(); err != nil {
		b.Skipf("*** netchain not built (%v; CGO_CFLAGS and CGO_LDFLAGS name liblkl under make): %s", err, lastLines(string(out), 3))
	}
	port := strconv.Itoa(echoServerB(b))
	const conns, rounds = "1000", "2000"
	fig := map[string][]float64{}
	for i := 0; i < 3; i++ {
		out, err := exec.Command(bin, port, conns, rounds).Output()
		if err != nil {
			b.Fatalf("netchain: %v %s", err, out)
		}
		// "chain conns 1220.4 /s", "native rtt 21.5 us"
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) >= 3 {
				if v, err := strconv.ParseFloat(f[2], 64); err == nil {
					fig[f[0]+" "+f[1]] = append(fig[f[0]+" "+f[1]], v)
				}
			}
		}
		for _, w := range []struct{ mode, n string }{{"conns", conns}, {"rtt", rounds}} {
			gout, gerr, status, _ := runKboxWithin(b, 5*time.Minute, "image", "-S", img, "--read-only", "--syscall-mode=seccomp", "--net", "--net-allow", "127.0.0.1:"+port, "--",
				"/opt/tests/inet", w.mode, "10.0.2.2", port, w.n)
			if status != 0 {
				b.Fatalf("kbox inet %s: status %d %s %s", w.mode, status, gout, gerr)
			}
			fig["kbox "+w.mode] = append(fig["kbox "+w.mode], inetFigure(b, w.mode, gout))
		}
	}
	nc, cc, kc := median(fig["native conns"]), median(fig["chain conns"]), median(fig["kbox conns"])
	nr, cr, kr := median(fig["native rtt"]), median(fig["chain rtt"]), median(fig["kbox rtt"])
	sc, sr := median(fig["spin conns"]), median(fig["spin rtt"])
	pc, pr := median(fig["pair conns"]), median(fig["pair rtt"])
	b.Logf("chain floor (LKL + device + usernet + host, no supervisor): conns %.1f /s (%.1f%% of native %.1f /s)   rtt %.1f us (%.1fx native %.1f us)", cc, 100*cc/nc, nc, cr, cr/nr, nr)
	b.Logf("chain floor, a spinning waiter (never waits in LKL): conns %.1f /s (%.1f%% of native)   rtt %.1f us (%.1fx native)", sc, 100*sc/nc, sr, sr/nr)
	b.Logf("the chain behind a host socketpair and two relaying goroutines (no notification): conns %.1f /s (%.0f%% of the chain)   rtt %.1f us (%.2fx the chain)", pc, 100*pc/cc, pr, pr/cr)
	b.Logf("kbox above the chain floor: conns %.1f /s (%.1f%% of native, %.0f%% of the chain, %.0f%% of the pair's)   rtt %.1f us (%.1fx native, %.2fx the chain, %.2fx the pair's)", kc, 100*kc/nc, 100*kc/cc, 100*kc/pc, kr, kr/nr, kr/cr, kr/pr)
	b.ReportMetric(cc/nc, "chain_conns_ratio")
	b.ReportMetric(cr/nr, "chain_rtt_ratio")
	b.ReportMetric(sc/nc, "spin_conns_ratio")
	b.ReportMetric(kc/cc, "kbox_of_chain_conns_ratio")
	b.ReportMetric(pc/cc, "pair_of_chain_conns_ratio")
	b.ReportMetric(kc/pc, "kbox_of_pair_conns_ratio")
	b.ReportMetric(0, "ns/op")
}
