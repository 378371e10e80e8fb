//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkStatPolicy runs the stat row of tests/guest/bench with no
// policy and with an active policy (path rules that every stat is checked
// against, with the path as LKL resolves it, and syscall rules) plus an
// audit log, interleaved, and reports the ratio (target: within 10%).
func BenchmarkStatPolicy(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	dir := b.TempDir()
	pol := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(pol, []byte(`
[paths]
hidden = ["/root/.ssh", "/home/*/.ssh", "/secret"]
read_only = ["/etc", "/usr"]
read_write = ["/tmp", "/dev"]
[syscalls]
deny = ["mount", "family:net"]
quota = { execve = 10000 }
`), 0o644); err != nil {
		b.Fatal(err)
	}
	const runs, iters = 7, "20000"
	modes := map[string][]string{
		"none":   nil,
		"policy": {"--policy", pol, "--audit", filepath.Join(dir, "audit.jsonl")},
	}
	res := map[string][]float64{}
	for i := 0; i < runs; i++ {
		for _, m := range []string{"none", "policy"} {
			args := append(append([]string{"image", "-S", img, "--read-only", "--syscall-mode=seccomp"}, modes[m]...),
				"--", "/opt/tests/bench", "stat", iters, "/etc/hostname")
			out, err := exec.Command(bin, args...).Output()
			if err != nil {
				b.Fatalf("kbox stat with %s: %v", m, err)
			}
			res[m] = append(res[m], parseBench(b, string(out)))
		}
	}
	n, p := median(res["none"]), median(res["policy"])
	b.Logf("stat no policy %8.1f ns/op   policy+audit %8.1f ns/op   policy/none ratio %.3f", n, p, p/n)
	b.ReportMetric(p/n, "stat_policy_vs_none_ratio")
	b.ReportMetric(n/1000, "stat_none_kbox_us")
	b.ReportMetric(p/1000, "stat_policy_kbox_us")
	b.ReportMetric(0, "ns/op")
}
