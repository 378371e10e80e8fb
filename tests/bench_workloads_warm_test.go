//go:build lkl

package tests

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The in-process tiers run one process: a command cannot run twice in one
// kbox run, as warmRun does under the seccomp tier. tests/guest/warmexec
// warms what a command reads (a walk that stats a tree, files read
// whole), then execs the command in the same process: its time is from
// warmexec's stamp to the process's end, less the same for /bin/true
// (the exec, the exit and kbox's teardown). The native figure is taken
// the same way in the chroot, so the ratio compares like with like.

// warmSpec is what warmexec warms before a workload's command: trees to
// stat (-s) and paths to read (-r).
type warmSpec struct{ stat, read []string }

func (w warmSpec) args() []string {
	var a []string
	for _, s := range w.stat {
		a = append(a, "-s", s)
	}
	for _, r := range w.read {
		a = append(a, "-r", r)
	}
	return a
}

// installWarmexec builds tests/guest/warmexec (musl, static) and writes
// it to the image as /warmexec.
func installWarmexec(b *testing.B, img string) { installGuest(b, img, "warmexec") }

var lddPath = regexp.MustCompile(`(/[^ ]+) \(0x`)

// libsOf lists the program files (in tree's terms) that loading each of
// progs maps: the programs and what ldd names for them in the chroot.
func libsOf(b *testing.B, tree string, progs ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range progs {
		got, err := exec.Command("chroot", tree, "/usr/bin/ldd", p).Output()
		if err != nil {
			b.Fatalf("ldd %s in the chroot: %v", p, err)
		}
		for _, m := range append([][]string{{"", p}}, lddPath.FindAllStringSubmatch(string(got), -1)...) {
			if !seen[m[1]] {
				seen[m[1]] = true
				out = append(out, m[1])
			}
		}
	}
	return out
}

// warmInProc times argv after warmexec warmed spec, in one run of mode
// ("native": in the chroot of tree), net of /bin/true warmed the same
// way; median of 5 each, ms.
func warmInProc(b *testing.B, bin, img, tree, mode, wd string, spec warmSpec, argv []string, writes bool) float64 {
	once := func(cmdArgv []string) float64 {
		wargs := append(append(spec.args(), "--"), cmdArgv...)
		var cmd *exec.Cmd
		if mode == "native" {
			cmd = exec.Command("chroot", append([]string{tree, "/usr/bin/env", "-C", wd, "/warmexec"}, wargs...)...)
		} else {
			args := []string{"image", "-S", img, "--syscall-mode=" + mode, "-w", wd, "--read-only"}
			if writes {
				args[len(args)-1] = "--ephemeral"
			}
			cmd = exec.Command(bin, append(append(args, "--", "/warmexec"), wargs...)...)
		}
		cmd.Env = append(os.Environ(), "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C")
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		io.Copy(io.Discard, out)
		werr := cmd.Wait()
		var end unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &end)
		stamp, perr := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if werr != nil || perr != nil {
			b.Fatalf("warmexec %q under %s: %v %q\n%s", cmdArgv, mode, werr, line, lastLines(errb.String(), 5))
		}
		return float64(end.Nano()-stamp) / 1e6
	}
	var v []float64
	for i := 0; i < 5; i++ {
		v = append(v, once(argv)-once([]string{"/bin/true"}))
	}
	return median(v)
}

// warmSpecs gives each workload (by its first word) what warmexec warms:
// the trees it walks and the files it reads, with its program's files.
func warmSpecs(b *testing.B, tree, pyDir string) map[string]warmSpec {
	dynload, _ := filepath.Glob(filepath.Join(tree, pyDir, "lib-dynload", "*.so"))
	py := []string{"/usr/bin/python3"}
	for _, so := range dynload {
		py = append(py, strings.TrimPrefix(so, tree))
	}
	return map[string]warmSpec{
		"find":    {stat: []string{"/usr"}, read: libsOf(b, tree, "/usr/bin/find")},
		"grep":    {read: append(libsOf(b, tree, "/bin/grep"), pyDir)},
		"ls":      {stat: []string{"/usr"}, read: append(libsOf(b, tree, "/bin/ls"), "/etc/passwd", "/etc/group", "/etc/nsswitch.conf")},
		"python3": {read: append(libsOf(b, tree, py...), pyDir)},
		"git":     {read: append(libsOf(b, tree, "/usr/bin/git"), "/work/repo")},
	}
}

// warmColumns are the in-process warm rows: native and the rewrite tier
// (the tier for trusted programs), each net of /bin/true, and the ratio.
func warmColumns(b *testing.B, bin, img, tree, wd, name string, spec warmSpec, ok bool, argv []string, writes bool) string {
	if !ok {
		return fmt.Sprintf(" %26s", "n/a")
	}
	nat := warmInProc(b, bin, img, tree, "native", wd, spec, argv, writes)
	rw := warmInProc(b, bin, img, tree, "rewrite", wd, spec, argv, writes)
	b.ReportMetric(rw/nat, name+"_rewrite_warm_ratio")
	return fmt.Sprintf(" %26s", fmt.Sprintf("%.1f / %.1f (%.1fx)", nat, rw, rw/nat))
}
