//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
