//go:build lkl

package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestLTPConformance runs the Linux Test Project's syscall tests under
// kbox, one kbox per test, and natively in a chroot of the same image's
// tree, and prints pass/fail/conf counts per syscall family (make
// conformance; docs/conformance.md). It needs an LTP built static by hand
// and installed (KBOX_LTP names the install prefix, holding testcases/bin
// and runtest/syscalls): nothing of LTP is in this repository. A test that
// fails under kbox but not natively fails this test unless
// tests/conformance/expected.txt lists it with its reason.
func TestLTPConformance(t *testing.T) {
	ltp := os.Getenv("KBOX_LTP")
	if ltp == "" {
		t.Skip("SKIP (no LTP build: set KBOX_LTP to an LTP install prefix built static; see docs/conformance.md)")
	}
	img := imagePath(t)
	bin := kboxBin(t)
	tests := ltpTests(t, ltp, os.Getenv("KBOX_LTP_FILTER"))
	expected := readExpected(t, filepath.Join(repoRoot(), "tests", "conformance", "expected.txt"))
	kernel := linkedKernel(t)
	t.Logf("kernel: %s", kernel.line)
	var native *chroot
	if os.Getuid() == 0 {
		native = newChroot(t, img, ltp)
		defer native.close()
		defer restoreSysctls(t, snapshotSysctls())
	} else {
		t.Log("not root: no native run in a chroot, kbox counts only")
	}
	type result struct {
		test         ltpTest
		kbox, native string // pass, fail, conf, or "" (not run)
		out          string
	}
	results := make([]result, len(tests))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				tc := tests[i]
				r := result{test: tc}
				r.kbox, r.out = runLTP(bin, img, ltp, tc)
				if native != nil {
					r.native, _ = native.run(tc)
				}
				results[i] = r
			}
		}()
	}
	for i := range tests {
		work <- i
	}
	close(work)
	wg.Wait()

	type counts struct{ kpass, kfail, kconf, npass, nfail, nconf int }
	fams := map[string]*counts{}
	var unexpected, fixed, lost []string
	nativePass, both := 0, 0 // tests that pass natively and are not expected to fail; of them, passing under kbox
	for _, r := range results {
		c := fams[r.test.family]
		if c == nil {
			c = &counts{}
			fams[r.test.family] = c
		}
		switch r.kbox {
		case "pass":
			c.kpass++
		case "conf":
			c.kconf++
		default:
			c.kfail++
		}
		switch r.native {
		case "pass":
			c.npass++
		case "conf":
			c.nconf++
		case "fail":
			c.nfail++
		}
		e, listed := expected[r.test.name]
		isExpected := listed && e.applies(kernel)
		if r.kbox == "fail" && r.native != "fail" && !isExpected {
			unexpected = append(unexpected, r.test.name+"\n"+indent(lastLines(r.out, 8)))
		}
		if r.kbox == "pass" && isExpected {
			// (a TCONF is what many entries expect: the test does not
			// apply to LKL's kernel)
			fixed = append(fixed, r.test.name)
		}
		if r.native == "pass" && !isExpected {
			nativePass++
			if r.kbox == "pass" {
				both++
			} else {
				lost = append(lost, r.test.name+" ("+r.kbox+")")
			}
		}
	}
	var names []string
	for f := range fams {
		names = append(names, f)
	}
	sort.Strings(names)
	var rep strings.Builder
	fmt.Fprintf(&rep, "%-22s %6s %6s %6s   %6s %6s %6s\n", "family", "kbox", "fail", "conf", "native", "fail", "conf")
	var tot counts
	for _, f := range names {
		c := fams[f]
		fmt.Fprintf(&rep, "%-22s %6d %6d %6d   %6d %6d %6d\n", f, c.kpass, c.kfail, c.kconf, c.npass, c.nfail, c.nconf)
		tot.kpass, tot.kfail, tot.kconf = tot.kpass+c.kpass, tot.kfail+c.kfail, tot.kconf+c.kconf
		tot.npass, tot.nfail, tot.nconf = tot.npass+c.npass, tot.nfail+c.nfail, tot.nconf+c.nconf
	}
	fmt.Fprintf(&rep, "%-22s %6d %6d %6d   %6d %6d %6d\n", "total", tot.kpass, tot.kfail, tot.kconf, tot.npass, tot.nfail, tot.nconf)
	fmt.Fprintf(&rep, "\n%d tests; kbox pass/fail/conf %d/%d/%d; native %d/%d/%d\n", len(tests), tot.kpass, tot.kfail, tot.kconf, tot.npass, tot.nfail, tot.nconf)
	if nativePass > 0 {
		fmt.Fprintf(&rep, "of the %d tests that pass natively and are not in expected.txt, kbox passes %d (%.1f%%)\n",
			nativePass, both, 100*float64(both)/float64(nativePass))
		sort.Strings(lost)
		fmt.Fprintf(&rep, "passing natively, not under kbox: %s\n", strings.Join(lost, " "))
	}
	if len(fixed) > 0 {
		fmt.Fprintf(&rep, "expected to fail, but passed (remove from expected.txt): %s\n", strings.Join(fixed, " "))
	}
	t.Log("\n" + rep.String())
	if p := os.Getenv("KBOX_LTP_REPORT"); p != "" {
		os.WriteFile(p, []byte(rep.String()), 0o644)
	}
	if len(unexpected) > 0 {
		sort.Strings(unexpected)
		t.Errorf("%d tests fail under kbox and not natively, and are not in expected.txt:\n%s", len(unexpected), strings.Join(unexpected, "\n"))
	}
}

// ltpTest is one line of LTP's runtest/syscalls.
type ltpTest struct {
	name, family, cmd string
}

var familyOf = regexp.MustCompile(`^([a-z_]+?)(2?)(\d\d.*)?$`)

// ltpTests lists the runtest/syscalls entries whose program is installed,
// matching filter (a regexp on the name) if given.
func ltpTests(t *testing.T, ltp, filter string) []ltpTest {
	f, err := os.Open(filepath.Join(ltp, "runtest", "syscalls"))
	if err != nil {
		t.Fatalf("LTP install at %s: %v", ltp, err)
	}
	defer f.Close()
	var re *regexp.Regexp
	if filter != "" {
		re = regexp.MustCompile(filter)
	}
	var out []ltpTest
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		name, cmd, ok := strings.Cut(l, " ")
		if !ok || re != nil && !re.MatchString(name) {
			continue
		}
		cmd = strings.TrimSpace(cmd)
		prog := strings.Fields(cmd)[0]
		if _, err := os.Stat(filepath.Join(ltp, "testcases", "bin", prog)); err != nil {
			continue
		}
		fam := name
		if m := familyOf.FindStringSubmatch(name); m != nil {
			fam = m[1] + m[2]
		}
		out = append(out, ltpTest{name, fam, cmd})
	}
	return out
}

// expectedFailure is a line of expected.txt: "name [needs FEATURE ...]
// reason" or "name [with FEATURE ...] reason". An entry that needs kernel
// features (as kbox version names them: config.gz, inotify, loop, ...) is
// expected to fail only on a kernel that lacks one of them; one with them
// only on a kernel that has them all.
type expectedFailure struct {
	reason string
	needs  []string
	with   []string
}

// applies reports whether the entry holds for kernel k.
func (e expectedFailure) applies(k kernelFacts) bool {
	for _, f := range e.with {
		if !k.has(f) {
			return false
		}
	}
	if len(e.needs) == 0 {
		return true
	}
	for _, f := range e.needs {
		if !k.has(f) {
			return true
		}
	}
	return false
}

// readExpected reads expected.txt.
func readExpected(t *testing.T, p string) map[string]expectedFailure {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("expected failures: %v", err)
	}
	m, err := parseExpected(string(b))
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return m
}

func parseExpected(text string) (map[string]expectedFailure, error) {
	m := map[string]expectedFailure{}
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		var e expectedFailure
		for _, kw := range []string{"needs", "with"} {
			body, ok := strings.CutPrefix(rest, "["+kw)
			if !ok {
				continue
			}
			list, after, ok := strings.Cut(body, "]")
			if !ok {
				return nil, fmt.Errorf("line %d: %q: no ] after [%s", i+1, l, kw)
			}
			var fs []string
			for _, f := range strings.Fields(list) {
				if !slices.ContainsFunc(kernelFeatures, func(k string) bool { return strings.EqualFold(k, f) }) {
					return nil, fmt.Errorf("line %d: %q: kbox version names no kernel feature %q (%s)", i+1, l, f, strings.Join(kernelFeatures, ", "))
				}
				fs = append(fs, f)
			}
			if len(fs) == 0 {
				return nil, fmt.Errorf("line %d: %q: [%s] names no feature", i+1, l, kw)
			}
			if kw == "needs" {
				e.needs = fs
			} else {
				e.with = fs
			}
			rest = strings.TrimSpace(after)
		}
		e.reason = rest
		m[name] = e
	}
	return m, nil
}

// classify turns an LTP exit status into pass, fail or conf, as LTP
// means them: 0 alone passes; TCONF (32) alone is a test that did not
// apply; anything else fails: TFAIL (1), TBROK (2) and TWARN (4) alone or
// with TCONF, a signal, a timeout.
func classify(err error, timedOut bool) string {
	if timedOut {
		return "fail"
	}
	if err == nil {
		return "pass"
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return "fail"
	}
	return classifyStatus(ee.ExitCode())
}

func classifyStatus(st int) string {
	switch st {
	case 0:
		return "pass"
	case 32:
		return "conf"
	}
	return "fail"
}

const ltpTimeout = 3 * time.Minute

// runLTP runs one test under kbox, the LTP install bound read-only at
// /opt/ltp.
func runLTP(bin, img, ltp string, tc ltpTest) (string, string) {
	ctx, cancel := context.WithTimeout(context.Background(), ltpTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "image", "-S", img, "--ephemeral", "-b", ltp+":/opt/ltp:ro", "--",
		"/bin/sh", "-c", "export PATH=/opt/ltp/testcases/bin:$PATH LTPROOT=/opt/ltp; cd /tmp && exec "+tc.cmd)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return classify(err, ctx.Err() != nil), string(out)
}

// chroot is the image's tree extracted for native runs, with the LTP
// install, proc and a small /dev mounted in it.
type chroot struct {
	dir    string
	mounts []string
	mu     sync.Mutex // one native test at a time (run)
}

func newChroot(t *testing.T, img, ltp string) *chroot {
	dir := t.TempDir()
	if out, err := exec.Command("debugfs", "-R", "rdump / "+dir, img).CombinedOutput(); err != nil {
		t.Fatalf("debugfs rdump: %v\n%s", err, out)
	}
	c := &chroot{dir: dir}
	must := func(err error, what string) {
		if err != nil {
			c.close()
			t.Fatalf("chroot: %s: %v", what, err)
		}
	}
	for _, d := range []string{"opt/ltp", "proc", "dev", "tmp"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.Chmod(filepath.Join(dir, "tmp"), 0o1777)
	must(syscall.Mount(ltp, filepath.Join(dir, "opt/ltp"), "", syscall.MS_BIND|syscall.MS_RDONLY, ""), "bind LTP")
	c.mounts = append(c.mounts, filepath.Join(dir, "opt/ltp"))
	must(syscall.Mount("proc", filepath.Join(dir, "proc"), "proc", 0, ""), "proc")
	c.mounts = append(c.mounts, filepath.Join(dir, "proc"))
	must(syscall.Mount("tmpfs", filepath.Join(dir, "dev"), "tmpfs", 0, "mode=755"), "dev")
	c.mounts = append(c.mounts, filepath.Join(dir, "dev"))
	for _, n := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}} {
		must(syscall.Mknod(filepath.Join(dir, "dev", n.name), syscall.S_IFCHR|0o666, int(n.major<<8|n.minor)), "mknod "+n.name)
	}
	must(os.Mkdir(filepath.Join(dir, "dev", "shm"), 0o1777), "dev/shm")
	os.Chmod(filepath.Join(dir, "dev", "shm"), 0o1777)
	return c
}

// hostClock matches the tests that set the host's realtime clock (they
// run as root): a chroot cannot keep that from the host, and a clock
// left in 2038 by one of them upsets everything else on the machine. They
// run under kbox only (LKL's clock); natively they count as not run.
var hostClock = regexp.MustCompile(`^(clock_settime|clock_adjtime|settimeofday|stime|adjtimex|leapsec)`)

// run runs tc in the chroot, in namespaces of its own for what a chroot
// leaves shared and a test changes as root (hostname, mounts, System V
// IPC); "" when tc must not run natively (hostClock).
func (c *chroot) run(tc ltpTest) (string, string) {
	if hostClock.MatchString(tc.name) {
		return "", "not run natively: it sets the host's clock"
	}
	// One native test at a time: two that save, change and restore one
	// host sysctl (fcntl35 and fcntl35_64 lower pipe-max-size to 4096)
	// would leave it changed if their runs interleaved.
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), ltpTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--uts", "--ipc", "--mount", "chroot", c.dir, "/bin/sh", "-c",
		"export PATH=/opt/ltp/testcases/bin:$PATH LTPROOT=/opt/ltp; cd /tmp && exec "+tc.cmd)
	// The environment a guest of kbox starts with, not the test's: a
	// TMPDIR of the host that the chroot lacks breaks every test that
	// makes a temporary directory.
	cmd.Env = chrootEnv
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return classify(err, ctx.Err() != nil), string(out)
}

// chrootEnv is the environment kbox gives its first guest process.
var chrootEnv = []string{"HOME=/root", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SHELL=/bin/sh", "TERM=xterm"}

func (c *chroot) close() {
	for i := len(c.mounts) - 1; i >= 0; i-- {
		syscall.Unmount(c.mounts[i], syscall.MNT_DETACH)
	}
	c.mounts = nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// TestLTPClassify: the exit statuses LTP's library gives, counted as LTP
// means them (a TWARN, alone or with TCONF, is a failure).
func TestLTPClassify(t *testing.T) {
	for st, want := range map[int]string{0: "pass", 32: "conf", 1: "fail", 2: "fail", 4: "fail", 36: "fail", 33: "fail", 34: "fail", 16: "fail", -1: "fail", 137: "fail"} {
		if got := classifyStatus(st); got != want {
			t.Errorf("status %d: %s, want %s", st, got, want)
		}
	}
}

// TestExpectedNeeds: an expected.txt entry that needs kernel features
// applies only on a kernel that lacks one, an entry with them only on a
// kernel that has them all; a feature kbox version does not name is an
// error. And the real expected.txt parses.
func TestExpectedNeeds(t *testing.T) {
	m, err := parseExpected("# comment\nplain01 reason\ncfg01 [needs config.gz] no config\nboth01 [needs config.gz inotify] two\nwith01 [with inotify] has it\n")
	if err != nil {
		t.Fatal(err)
	}
	kbox := kernelFacts{values: map[string]string{"config.gz": "yes", "inotify": "yes"}}
	dflt := kernelFacts{values: map[string]string{"config.gz": "no", "inotify": "no"}}
	half := kernelFacts{values: map[string]string{"config.gz": "yes", "inotify": "no"}}
	for _, c := range []struct {
		name             string
		kbox, dflt, half bool
		reason           string
	}{
		{"plain01", true, true, true, "reason"},
		{"cfg01", false, true, false, "no config"},
		{"both01", false, true, true, "two"},
		{"with01", true, false, false, "has it"},
	} {
		e, ok := m[c.name]
		if !ok {
			t.Errorf("%s not read", c.name)
			continue
		}
		if e.reason != c.reason || e.applies(kbox) != c.kbox || e.applies(dflt) != c.dflt || e.applies(half) != c.half {
			t.Errorf("%s: %+v applies %v/%v/%v, want %v/%v/%v", c.name, e, e.applies(kbox), e.applies(dflt), e.applies(half), c.kbox, c.dflt, c.half)
		}
	}
	for _, bad := range []string{"x01 [needs nosuchfeature] r", "x01 [needs config.gz r", "x01 [needs] r", "x01 [with] r", "x01 [with nosuchfeature] r"} {
		if _, err := parseExpected(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(), "tests", "conformance", "expected.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseExpected(string(b)); err != nil {
		t.Errorf("expected.txt: %v", err)
	}
}

// TestLTPHostClock: the tests that set the clock never run natively (as
// root they would set the host's); the others do.
func TestLTPHostClock(t *testing.T) {
	for name, want := range map[string]bool{"clock_settime01": true, "clock_settime03": true, "settimeofday02": true, "stime01": true,
		"adjtimex02": true, "clock_adjtime01": true, "clock_gettime01": false, "gettimeofday01": false, "time01": false, "timerfd_settime01": false} {
		if got := hostClock.MatchString(name); got != want {
			t.Errorf("%s: not run natively %v, want %v", name, got, want)
		}
	}
}

// hostSysctls are the global sysctls (no namespace of the native run's
// holds them) that LTP's syscall tests change as root and mean to put
// back: TestLTPConformance puts back any a native run left changed.
var hostSysctls = []string{
	"fs/pipe-max-size", "fs/pipe-user-pages-soft", "fs/pipe-user-pages-hard", "fs/nr_open",
	"kernel/pid_max", "kernel/printk", "kernel/core_pattern", "kernel/numa_balancing",
	"kernel/io_uring_disabled", "kernel/overflowuid", "kernel/overflowgid",
	"kernel/perf_event_paranoid", "kernel/perf_event_mlock_kb", "kernel/perf_event_max_sample_rate",
	"kernel/sched_rt_runtime_us", "kernel/sched_rt_period_us", "kernel/sched_rr_timeslice_ms",
	"vm/swappiness", "vm/vfs_cache_pressure", "vm/overcommit_memory", "vm/overcommit_ratio",
	"vm/max_map_count", "vm/min_free_kbytes", "vm/nr_hugepages", "vm/nr_overcommit_hugepages",
	"vm/panic_on_oom", "user/max_user_namespaces", "user/max_fanotify_marks", "user/max_fanotify_groups",
}

// snapshotSysctls reads hostSysctls (those the host has).
func snapshotSysctls() map[string]string {
	m := map[string]string{}
	for _, s := range hostSysctls {
		if b, err := os.ReadFile("/proc/sys/" + s); err == nil {
			m[s] = string(b)
		}
	}
	return m
}

// restoreSysctls writes back each sysctl of snap whose value changed.
func restoreSysctls(t *testing.T, snap map[string]string) {
	for s, v := range snap {
		if b, err := os.ReadFile("/proc/sys/" + s); err == nil && string(b) != v {
			err := os.WriteFile("/proc/sys/"+s, []byte(v), 0)
			t.Logf("host sysctl %s was %q after the native runs, put back to %q: %v", s, strings.TrimSpace(string(b)), strings.TrimSpace(v), err)
		}
	}
}
