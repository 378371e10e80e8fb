//go:build lkl

package tests

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// kernelFacts is the kernel line of `kbox version` (docs/lkl.md): what the
// kernel that kbox links has.
type kernelFacts struct {
	line          string
	release       string
	configuration string            // kbox, other or unknown
	values        map[string]string // feature (lower case) -> its value word
}

// kernelFeatures are the features `kbox version` names, in its order.
var kernelFeatures = []string{"KASAN", "inotify", "fanotify", "loop", "config.gz", "devtmpfs", "tmpfs", "DWARF"}

// has reports whether the kernel has feature (yes, on, full).
func (k kernelFacts) has(feature string) bool {
	switch k.values[strings.ToLower(feature)] {
	case "yes", "on", "full":
		return true
	}
	return false
}

// known reports whether kbox version names feature at all.
func (k kernelFacts) known(feature string) bool {
	_, ok := k.values[strings.ToLower(feature)]
	return ok
}

// parseKernelLine parses the output of `kbox version`.
func parseKernelLine(out string) (kernelFacts, error) {
	var k kernelFacts
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "kernel: "); ok {
			k.line = rest
		}
	}
	if k.line == "" {
		return k, fmt.Errorf("no kernel line in kbox version: %q", out)
	}
	k.values = map[string]string{}
	for i, part := range strings.Split(k.line, ", ") {
		f := strings.Fields(part)
		if len(f) < 2 {
			return k, fmt.Errorf("kernel line %q: part %q", k.line, part)
		}
		switch {
		case i == 0 && f[0] == "LKL":
			k.release = f[1]
		case f[0] == "configuration":
			k.configuration = f[1]
		default:
			k.values[strings.ToLower(f[0])] = f[1]
		}
	}
	if k.release == "" || k.configuration == "" {
		return k, fmt.Errorf("kernel line %q: no release or configuration", k.line)
	}
	return k, nil
}

var (
	kernelOnce sync.Once
	kernelInfo kernelFacts
	kernelErr  error
)

// linkedKernel returns what `kbox version` says of the kernel KBOX_BIN
// links, asked once per test binary.
func linkedKernel(t testing.TB) kernelFacts {
	t.Helper()
	bin := kboxBin(t)
	kernelOnce.Do(func() {
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			kernelErr = fmt.Errorf("%s version: %v", bin, err)
			return
		}
		kernelInfo, kernelErr = parseKernelLine(string(out))
	})
	if kernelErr != nil {
		t.Fatalf("the linked kernel: %v", kernelErr)
	}
	return kernelInfo
}

// kboxKernelClaimed reports whether the environment says the kernel is
// kbox's own configuration (KBOX_KERNEL=kbox, set by .ci/run when `kbox
// version` reports it): then a test that needs a kernel feature fails
// where it would skip, so that a green run cannot hide an untested one.
func kboxKernelClaimed() bool { return os.Getenv("KBOX_KERNEL") == "kbox" }

// needKernel skips t loudly unless the linked kernel has feature (a name
// of `kbox version`: inotify, fanotify, loop, config.gz, devtmpfs, tmpfs,
// DWARF); with KBOX_KERNEL=kbox it fails instead.
func needKernel(t testing.TB, feature string) {
	t.Helper()
	k := linkedKernel(t)
	if !k.known(feature) {
		t.Fatalf("needKernel(%q): kbox version names no such feature: %s", feature, k.line)
	}
	if kboxKernelClaimed() && k.configuration != "kbox" {
		t.Fatalf("KBOX_KERNEL=kbox, but the kernel's configuration is %s: %s", k.configuration, k.line)
	}
	if k.has(feature) {
		return
	}
	if kboxKernelClaimed() {
		t.Fatalf("the kernel lacks %s although KBOX_KERNEL=kbox: %s", feature, k.line)
	}
	t.Skipf("SKIP (the kernel lacks %s; kbox's kernel has it: make lkl, docs/lkl.md): %s", feature, k.line)
}

func init() {
	// kernel-facts: what the test binary's own liblkl has, found by
	// probes (lkl.DetectKernel without config.gz), and its configuration
	// as /proc/config.gz gives it.
	helpers["kernel-facts"] = func(string, bool) error {
		if err := lkl.Boot(lkl.Config{}); err != nil {
			return err
		}
		defer lkl.Halt()
		if err := lkl.Mkdir("/p", 0o555); err != nil {
			return err
		}
		if err := lkl.Mount("proc", "/p", "proc", 0, ""); err != nil {
			return err
		}
		fd, err := lkl.Open("/p", int(lkl.OpenFlagsToLKL(unix.O_PATH|unix.O_DIRECTORY)), 0)
		if err != nil {
			return err
		}
		k := lkl.DetectKernel(fd, true)
		fmt.Printf("release=%s\n", k.Release)
		for _, f := range k.Features {
			fmt.Printf("probe.%s=%s\n", strings.ToLower(f.Name), f.Value)
		}
		gz, err := lkl.ReadFileAt(fd, "config.gz")
		if errors.Is(err, unix.ENOENT) {
			fmt.Println("config.gz=ENOENT")
			return nil
		}
		if err != nil {
			return err
		}
		c, err := gunzipBytes(gz)
		if err != nil {
			return err
		}
		fmt.Printf("config.gz=yes\nconfig.gz.size=%d\nconfig.sha256=%x\n", len(gz), sha256.Sum256(c))
		cfg := lkl.ParseConfig(c)
		for _, o := range []string{"CONFIG_KASAN", "CONFIG_INOTIFY_USER", "CONFIG_FANOTIFY", "CONFIG_BLK_DEV_LOOP",
			"CONFIG_DEVTMPFS", "CONFIG_TMPFS", "CONFIG_DEBUG_INFO", "CONFIG_DEBUG_INFO_REDUCED"} {
			fmt.Printf("%s=%s\n", o, cfg[o])
		}
		fmt.Printf("kbox-missing=%s\n", strings.Join(lkl.Satisfies(cfg, lkl.KboxFragment()), " "))
		return nil
	}
}

func gunzipBytes(b []byte) ([]byte, error) {
	cmd := exec.Command("gzip", "-dc")
	cmd.Stdin = bytes.NewReader(b)
	return cmd.Output()
}

// TestVersionKernel: `kbox version` names the linked kernel's salient
// facts, and they are the kernel's: each agrees with a probe of the
// kernel itself (a system call it answers ENOSYS without the feature, its
// /proc/devices, /proc/filesystems, /proc/kallsyms) and, when the kernel
// has /proc/config.gz, with its configuration.
func TestVersionKernel(t *testing.T) {
	out, err := exec.Command(kboxBin(t), "version").Output()
	if err != nil {
		t.Fatalf("kbox version: %v\n%s", err, out)
	}
	k, err := parseKernelLine(string(out))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel: %s", k.line)
	for _, f := range kernelFeatures {
		if !k.known(f) {
			t.Errorf("kbox version does not name %s: %s", f, k.line)
		}
	}
	h := helper(t, "kernel-facts", "", false)
	if h["release"] != k.release {
		t.Fatalf("KBOX_BIN's kernel is %s, this test binary's %s: build both against the same liblkl", k.release, h["release"])
	}
	for _, f := range kernelFeatures {
		p, ok := h["probe."+strings.ToLower(f)]
		if !ok || p == "unknown" {
			continue // DWARF: only a configuration says
		}
		if got := k.values[strings.ToLower(f)]; got != p {
			t.Errorf("kbox version says %s %s, the kernel %s", f, got, p)
		}
	}
	if h["config.gz"] != "yes" {
		if k.has("config.gz") || k.configuration != "unknown" || k.values["dwarf"] != "unknown" {
			t.Errorf("no config.gz in the kernel, but kbox version says: %s", k.line)
		}
		return
	}
	onOff := func(v string, on string) string {
		if v == "y" {
			return on
		}
		return map[string]string{"on": "off", "yes": "no"}[on]
	}
	for f, o := range map[string]string{"kasan": "CONFIG_KASAN", "inotify": "CONFIG_INOTIFY_USER", "fanotify": "CONFIG_FANOTIFY",
		"loop": "CONFIG_BLK_DEV_LOOP", "devtmpfs": "CONFIG_DEVTMPFS", "tmpfs": "CONFIG_TMPFS"} {
		want := onOff(h[o], "yes")
		if f == "kasan" {
			want = onOff(h[o], "on")
		}
		if k.values[f] != want {
			t.Errorf("kbox version says %s %s, the kernel's configuration %s=%q", f, k.values[f], o, h[o])
		}
	}
	dwarf := "full"
	if h["CONFIG_DEBUG_INFO"] != "y" {
		dwarf = "none"
	} else if h["CONFIG_DEBUG_INFO_REDUCED"] == "y" {
		dwarf = "reduced"
	}
	if k.values["dwarf"] != dwarf {
		t.Errorf("kbox version says DWARF %s, the configuration gives %s", k.values["dwarf"], dwarf)
	}
	want := "kbox"
	if h["kbox-missing"] != "" {
		want = "other"
	}
	if k.configuration != want {
		t.Errorf("kbox version says configuration %s; the kernel lacks [%s] of lkl/kbox.config", k.configuration, h["kbox-missing"])
	}
}

// TestProcConfigGz: the guest's /proc/config.gz is the linked kernel's own
// configuration when the kernel has one (CONFIG_IKCONFIG_PROC): zcat gives
// the kernel's bytes, stat its size; and absent (ENOENT, not listed) when
// it has none; in each tier.
func TestProcConfigGz(t *testing.T) {
	img := imagePath(t)
	k := linkedKernel(t)
	h := helper(t, "kernel-facts", "", false)
	forEachTier(t, func(t *testing.T, mode string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+mode, "--", "/bin/ls", "/proc")
		if st != 0 {
			t.Fatalf("ls /proc: status %d: %s", st, stderr)
		}
		listed := strings.Contains(" "+strings.Join(strings.Fields(out), " ")+" ", " config.gz ")
		// busybox's zcat forks its decompressor, which the
		// in-process tiers cannot: gzip -dc there.
		unzip := []string{"/bin/zcat"}
		if mode != "seccomp" {
			unzip = []string{"/bin/gzip", "-dc"}
		}
		out, stderr, st = runKbox(t, append([]string{"image", "-S", img, "--syscall-mode=" + mode, "--"}, append(unzip, "/proc/config.gz")...)...)
		if h["config.gz"] != "yes" {
			if !k.known("config.gz") || k.has("config.gz") {
				t.Errorf("kbox version says config.gz %q, the kernel has none", k.values["config.gz"])
			}
			if listed {
				t.Errorf("/proc lists config.gz, the kernel has none")
			}
			if st == 0 || !strings.Contains(stderr, "No such file or directory") {
				t.Errorf("zcat /proc/config.gz: status %d, stderr %q; want ENOENT", st, stderr)
			}
			return
		}
		if !listed {
			t.Errorf("/proc does not list config.gz")
		}
		if st != 0 {
			t.Fatalf("zcat /proc/config.gz: status %d: %s", st, stderr)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256([]byte(out))); got != h["config.sha256"] {
			t.Errorf("the guest's config.gz is not the kernel's (sha256 %s, the kernel's %s)", got, h["config.sha256"])
		}
		// Its size, as the kernel gives it (ls -l shows it).
		size, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+mode, "--", "/bin/stat", "-c", "%s %A", "/proc/config.gz")
		if st != 0 || strings.TrimSpace(size) != h["config.gz.size"]+" -r--r--r--" {
			t.Errorf("stat /proc/config.gz: %q (status %d, %s), want the kernel's size %s, mode -r--r--r--", size, st, stderr, h["config.gz.size"])
		}
		inotify := strings.Contains(out, "\nCONFIG_INOTIFY_USER=y\n")
		if inotify != k.has("inotify") {
			t.Errorf("config.gz: CONFIG_INOTIFY_USER=y %v, kbox version: inotify %s", inotify, k.values["inotify"])
		}
		if k.configuration == "kbox" && !inotify {
			t.Errorf("kbox's configuration without CONFIG_INOTIFY_USER=y in the guest's config.gz")
		}
	})
}

// TestParseKernelLine: the kernel line of kbox version, parsed as the
// tests read it.
func TestParseKernelLine(t *testing.T) {
	for _, c := range []struct {
		out, release, conf string
		has, lacks         []string
		bad                bool
	}{
		{out: "kbox x (liblkl linked, API generation 1)\nkernel: LKL 6.0.0+, configuration kbox, KASAN off, inotify yes, loop yes, config.gz yes, tmpfs no (ramfs), DWARF full\n",
			release: "6.0.0+", conf: "kbox", has: []string{"inotify", "loop", "config.gz", "DWARF"}, lacks: []string{"KASAN", "tmpfs", "fanotify"}},
		{out: "kernel: LKL 6.0.0, configuration unknown (no config.gz), KASAN on, inotify no, DWARF unknown\n",
			release: "6.0.0", conf: "unknown", has: []string{"kasan"}, lacks: []string{"inotify", "DWARF"}},
		{out: "kbox x (liblkl linked, API generation 1)\n", bad: true},
		{out: "kernel: something else\n", bad: true},
	} {
		k, err := parseKernelLine(c.out)
		if (err != nil) != c.bad {
			t.Errorf("%q: error %v", c.out, err)
			continue
		}
		if c.bad {
			continue
		}
		if k.release != c.release || k.configuration != c.conf {
			t.Errorf("%q: release %q configuration %q", c.out, k.release, k.configuration)
		}
		for _, f := range c.has {
			if !k.has(f) {
				t.Errorf("%q: lacks %s", c.out, f)
			}
		}
		for _, f := range c.lacks {
			if k.has(f) {
				t.Errorf("%q: has %s", c.out, f)
			}
		}
	}
}

// TestNeedKernel: needKernel passes with the feature, skips with one loud
// line without it, and fails instead when KBOX_KERNEL=kbox; a name kbox
// version does not use fails. Each case runs this test binary again
// (TestNeedKernelChild) with a kernel line standing in for kbox version's.
func TestNeedKernel(t *testing.T) {
	kboxBin(t)
	const kboxLine = "LKL 6.0.0+, configuration kbox, KASAN off, inotify yes, loop yes, config.gz yes"
	const dfltLine = "LKL 6.0.0+, configuration unknown (no config.gz), KASAN on, inotify no, loop no, config.gz no"
	for _, c := range []struct {
		line, need, env string
		status          int
		want            string
	}{
		{kboxLine, "inotify", "", 0, "needKernel passed"},
		{kboxLine, "inotify", "kbox", 0, "needKernel passed"},
		{dfltLine, "inotify", "", 0, "SKIP (the kernel lacks inotify"},
		{dfltLine, "loop", "kbox", 1, "KBOX_KERNEL=kbox, but the kernel's configuration is unknown"},
		{strings.Replace(kboxLine, "inotify yes", "inotify no", 1), "inotify", "kbox", 1, "the kernel lacks inotify although KBOX_KERNEL=kbox"},
		{kboxLine, "nosuch", "", 1, "kbox version names no such feature"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNeedKernelChild$", "-test.v")
		cmd.Env = append(os.Environ(), "KBOX_TEST_KERNEL_LINE="+c.line, "KBOX_TEST_NEED="+c.need, "KBOX_KERNEL="+c.env)
		out, err := cmd.CombinedOutput()
		st := 0
		if ee, ok := err.(*exec.ExitError); ok {
			st = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if st != c.status || !strings.Contains(string(out), c.want) {
			t.Errorf("need %s on %q, KBOX_KERNEL=%q: status %d, want %d and %q:\n%s", c.need, c.line, c.env, st, c.status, c.want, out)
		}
	}
}

// TestNeedKernelChild is TestNeedKernel's child; it does nothing alone.
func TestNeedKernelChild(t *testing.T) {
	line := os.Getenv("KBOX_TEST_KERNEL_LINE")
	if line == "" {
		return
	}
	kernelOnce.Do(func() { kernelInfo, kernelErr = parseKernelLine("kernel: " + line) })
	needKernel(t, os.Getenv("KBOX_TEST_NEED"))
	t.Log("needKernel passed")
}
