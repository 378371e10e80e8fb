//go:build lkl

package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `kbox probe` (docs/agents.md, package probe, cmd/kbox/probe.go): the
// boundary measured by probes in a guest. On a kbox without it every test
// here fails: probe is an unknown command (exit 2).

type probeRecord struct {
	Probe, Capability, Operation, Expected, Observed, Errno, Verdict, Why, Detail string
}

// runProbe runs kbox probe with args and returns its records by probe id,
// its stderr and status.
func runProbe(t *testing.T, bin string, args ...string) (map[string]probeRecord, string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"probe"}, args...)...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("kbox probe %q did not finish in 3 minutes\nstderr: %s", args, se.String())
	}
	recs := map[string]probeRecord{}
	for _, l := range strings.Split(strings.TrimSpace(so.String()), "\n") {
		if l == "" {
			continue
		}
		var r probeRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("kbox probe printed a line that is not a record: %q (%v)\nstderr: %s", l, err, se.String())
		}
		if _, dup := recs[r.Probe]; dup {
			t.Errorf("probe %s has two records", r.Probe)
		}
		if r.Probe == "" || r.Capability == "" || r.Operation == "" || r.Expected == "" || r.Observed == "" || r.Verdict == "" {
			t.Errorf("incomplete record: %q", l)
		}
		recs[r.Probe] = r
	}
	return recs, se.String(), cmd.ProcessState.ExitCode()
}

// wantProbes checks that each named probe ran and observed what it should.
func wantProbes(t *testing.T, recs map[string]probeRecord, observed string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		r, ok := recs[id]
		switch {
		case !ok:
			t.Errorf("no record for probe %s", id)
		case r.Observed != observed || r.Verdict != "ok":
			t.Errorf("probe %s: observed %s (%s, %s), verdict %s; want %s, ok", id, r.Observed, r.Errno, r.Detail, r.Verdict, observed)
		}
	}
}

// hostProbe runs the embedded guest program natively on the host, with
// the same kind of parameters: the same operations there reach what kbox
// keeps from the guest, so the probes can observe "allowed".
func hostProbe(t *testing.T, params []string, ids ...string) map[string]string {
	t.Helper()
	prog := filepath.Join(repoRoot(), "probe", "bin", "kbox-probe")
	if _, err := os.Stat(prog); err != nil {
		t.Skipf("SKIP (needs the probe program): %s is missing: run `make`", prog)
	}
	out, err := exec.Command(prog, append(append(params, "--"), ids...)...).Output()
	if err != nil {
		t.Fatalf("kbox-probe on the host: %v", err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var o struct{ ID, Observed string }
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("host probe line %q: %v", l, err)
		}
		m[o.ID] = o.Observed
	}
	return m
}

// TestProbeDefault: kbox probe with the default options. Nothing is more
// permissive than expected; host files, processes, devices and the
// kernel's riskier calls are denied, a guest mount is allowed; the same
// probes natively on the host are allowed.
func TestProbeDefault(t *testing.T) {
	img := copyImage(t, imagePath(t))
	recs, stderr, status := runProbe(t, kboxBin(t), "-S", img)
	if status != 0 {
		t.Fatalf("kbox probe: status %d, want 0\n%s", status, stderr)
	}
	if !strings.Contains(stderr, "0 more permissive, 0 missing") {
		t.Errorf("summary: %s", stderr)
	}
	wantProbes(t, recs, "denied", "proc.root1", "proc.rootparent", "proc.selfroot", "proc.cwdparent", "chroot.escape",
		"procs.visible", "procs.kill0", "signal.host", "ptrace.host", "dev.sda", "dev.kvm", "dev.mem", "dev.mknod",
		"sys.unshare", "sys.clonens", "sys.bpf", "sys.perf_event_open", "sys.keyctl", "sys.io_uring", "net.loopback", "net.host", "net.metadata", "net.outside")
	wantProbes(t, recs, "allowed", "sys.mount")
	if r := recs["hidden.open"]; r.Verdict != "skipped" {
		t.Errorf("hidden.open without a policy: %+v, want skipped", r)
	}
	assertCleanImage(t, img)

	// The same operations on the host reach the marker and the process.
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	os.WriteFile(marker, []byte("tok-42\n"), 0o644)
	host := hostProbe(t, []string{"token=tok-42", "marker=" + marker, "parent=" + itoa(os.Getpid())},
		"proc.selfroot", "proc.rootparent", "procs.visible", "procs.kill0", "signal.host")
	for id, obs := range host {
		if obs != "allowed" {
			t.Errorf("on the host, probe %s observed %s, want allowed (the probe cannot see what it looks for)", id, obs)
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// strictArgs runs the strict policy with a read-write bind.
func strictArgs(t *testing.T) []string {
	bind := t.TempDir()
	return []string{"-S", imagePath(t), "--ephemeral", "--policy", filepath.Join(repoRoot(), "docs", "policy-strict.toml"), "-b", bind + ":/mnt/host"}
}

// TestProbeStrict: kbox probe under docs/policy-strict.toml: hidden and
// read-only paths by every way around, the limits and the quota are all
// denied, the bind readable, nothing more permissive than expected.
func TestProbeStrict(t *testing.T) {
	recs, stderr, status := runProbe(t, kboxBin(t), strictArgs(t)...)
	if status != 0 {
		t.Fatalf("kbox probe --policy strict: status %d, want 0\n%s", status, stderr)
	}
	wantProbes(t, recs, "denied", "hidden.open", "hidden.stat", "hidden.list", "hidden.dotdot", "hidden.symlink",
		"hidden.dirfd", "hidden.procfd", "hidden.hardlink", "readonly.create", "readonly.write", "readonly.chmod",
		"bind.escape", "limit.file_size", "limit.processes", "limit.quota", "limit.image_writes", "sys.mount", "ptrace.host")
	wantProbes(t, recs, "allowed", "bind.list")
	for _, r := range recs {
		if r.Verdict == "more_permissive" || r.Verdict == "missing" {
			t.Errorf("probe %s: %+v", r.Probe, r)
		}
	}
}

// TestProbeCatchesBrokenPolicy: a kbox built with kbox_broken_policy (hidden
// paths not enforced) fails kbox probe under the strict policy, naming the
// hidden probes: the probes can fail.
func TestProbeCatchesBrokenPolicy(t *testing.T) {
	if _, err := os.Stat(filepath.Join(repoRoot(), "probe", "bin", "kbox-probe")); err != nil {
		t.Skipf("SKIP (needs the probe program): run `make`")
	}
	bin := filepath.Join(t.TempDir(), "kbox-broken")
	build := exec.Command("go", "build", "-buildmode=pie", "-tags", "lkl kbox_broken_policy", "-o", bin, "./cmd/kbox")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the broken kbox: %v\n%s", err, out)
	}
	recs, stderr, status := runProbe(t, bin, strictArgs(t)...)
	if status != 1 {
		t.Fatalf("broken kbox probe: status %d, want 1\n%s", status, stderr)
	}
	if !strings.Contains(stderr, "MORE PERMISSIVE than expected: hidden.open (fs.hidden)") {
		t.Errorf("stderr does not name hidden.open:\n%s", stderr)
	}
	if r := recs["hidden.open"]; r.Observed != "allowed" || r.Verdict != "more_permissive" {
		t.Errorf("hidden.open: %+v", r)
	}
	// What is not about hidden paths still holds.
	wantProbes(t, recs, "denied", "readonly.create", "limit.processes", "proc.root1")
}

// TestProbeTiersAndNet: kbox probe in the in-process tiers and with --net.
// In the trap and rewrite tiers the guest cannot fork: a probe that used a
// child must not read the failed fork as success (the unshare probe once
// reported "allowed" there, from a waitpid with no child). With --net the
// host's loopback is denied by the network policy, and allowed (the probe
// reads the token through 10.0.2.2) once --net-allow names it.
func TestProbeTiersAndNet(t *testing.T) {
	img := imagePath(t)
	kernel := []string{"proc.root1", "proc.rootparent", "proc.selfroot", "proc.cwdparent", "procs.visible",
		"procs.kill0", "signal.host", "ptrace.host", "dev.sda", "dev.kvm", "dev.mem", "dev.mknod",
		"sys.unshare", "sys.clonens", "sys.bpf", "sys.perf_event_open", "sys.keyctl", "sys.io_uring"}
	for _, c := range []struct {
		name    string
		args    []string
		denied  []string
		allowed []string
	}{
		// The in-process tiers, asked for, do not confine a program that
		// calls into kbox's code (inproc.gadget reads the host marker):
		// expected there, and reported as allowed, never hidden.
		{"trap", []string{"--syscall-mode=trap"}, append(kernel, "net.loopback", "net.host", "net.metadata"), []string{"inproc.gadget"}},
		{"rewrite", []string{"--syscall-mode=rewrite", "--trusted"}, append(kernel, "net.loopback", "net.host", "net.metadata"), []string{"inproc.gadget"}},
		// The default confines it.
		{"default", nil, append(kernel, "inproc.gadget"), nil},
		{"net", []string{"--syscall-mode=seccomp", "--net"}, []string{"net.loopback", "net.host", "net.metadata", "inproc.gadget"}, nil},
		{"net-trap", []string{"--syscall-mode=trap", "--net"}, []string{"net.loopback", "net.host", "net.metadata", "sys.unshare"}, nil},
		{"net-allowed", []string{"--syscall-mode=seccomp", "--net", "--net-allow", "127.0.0.1"}, []string{"net.loopback", "net.metadata"}, []string{"net.host"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs, stderr, status := runProbe(t, kboxBin(t), append([]string{"-S", img, "--read-only"}, c.args...)...)
			if status != 0 {
				t.Fatalf("kbox probe %s: status %d, want 0\n%s", c.args, status, stderr)
			}
			if !strings.Contains(stderr, "0 more permissive, 0 missing") {
				t.Errorf("summary: %s", stderr)
			}
			wantProbes(t, recs, "denied", c.denied...)
			wantProbes(t, recs, "allowed", c.allowed...)
		})
	}
}
