//go:build lkl

package tests

import (
	"bufio"
	"debug/elf"
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

var lddPath = regexp.MustCompile(`(/[^ ]+) \(0x`)

// inTree resolves p's symlinks in tree's terms (an absolute link is
// tree's, not the host's).
func inTree(tree, p string) string {
	for range 16 {
		target, err := os.Readlink(filepath.Join(tree, p))
		if err != nil {
			return p
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = target
	}
	return p
}

// libsOf lists the program files (in tree's terms) that loading each of
// progs maps: the program, and for a dynamic one what its loader lists
// (LD_TRACE_LOADED_OBJECTS, as ldd; the image has no ldd).
func libsOf(b *testing.B, tree string, progs ...string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range progs {
		real := inTree(tree, p)
		add(real)
		f, err := elf.Open(filepath.Join(tree, real))
		if err != nil {
			b.Fatalf("%s in the image: %v", p, err)
		}
		dynamic := false
		for _, ph := range f.Progs {
			dynamic = dynamic || ph.Type == elf.PT_INTERP
		}
		f.Close()
		if !dynamic {
			continue
		}
		got, err := exec.Command("chroot", tree, "/usr/bin/env", "LD_TRACE_LOADED_OBJECTS=1", real).Output()
		if err != nil {
			b.Fatalf("the libraries of %s in the chroot: %v", p, err)
		}
		for _, m := range lddPath.FindAllStringSubmatch(string(got), -1) {
			add(m[1])
		}
	}
	return out
}

// warmInProc times argv after warmexec warmed spec, in one run of mode
// ("native": in the chroot of tree), net of /bin/true warmed the same
// way right after it, ms.
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
	return once(argv) - once([]string{"/bin/true"})
}

// warmRounds is how many times warmColumns times each side, in
// warmBlocks blocks.
const warmRounds, warmBlocks = 9, 3

// warmSpecs gives each workload (by its first word) what warmexec warms:
// the trees it walks and the files it reads, with its program's files.
func warmSpecs(b *testing.B, tree, pyDir string) map[string]warmSpec {
	// python3's own libraries, and those its imports' modules
	// (lib-dynload, in pyDir) load.
	py := libsOf(b, tree, "/usr/bin/python3")
	for _, lib := range []string{"libsqlite3", "libssl", "libcrypto", "libexpat", "libffi", "libmpdec", "liblzma", "libbz2", "libz"} {
		m, _ := filepath.Glob(filepath.Join(tree, "lib/x86_64-linux-gnu", lib+".so*"))
		for _, f := range m {
			py = append(py, inTree(tree, strings.TrimPrefix(f, tree)))
		}
	}
	return map[string]warmSpec{
		"find":    {stat: []string{"/usr"}, read: libsOf(b, tree, "/usr/bin/find")},
		"grep":    {read: append(libsOf(b, tree, "/bin/grep"), pyDir)},
		"ls":      {stat: []string{"/usr"}, read: append(libsOf(b, tree, "/bin/ls"), "/etc/passwd", "/etc/group", "/etc/nsswitch.conf")},
		"python3": {read: append(py, pyDir)},
		"git":     {read: append(libsOf(b, tree, "/usr/bin/git"), "/work/repo")},
	}
}

// warmColumns are the in-process warm rows: native and the rewrite tier
// (the tier for trusted programs), each net of /bin/true, and the ratio:
// medians of warmRounds runs each, in warmBlocks blocks of native runs
// then rewrite runs, each block after one run of its side that is not
// counted. Runs in turn would time native runs in the wake of kbox's (git
// status natively took 2.9 ms after kbox runs, 2.1 after its own); all
// of one side before the other measured the two sides minutes apart,
// and a VM's load moves within minutes.
func warmColumns(b *testing.B, bin, img, tree, wd, name string, spec warmSpec, ok bool, argv []string, writes bool) string {
	if !ok {
		return fmt.Sprintf(" %26s", "n/a")
	}
	var natv, rwv []float64
	for range warmBlocks {
		for _, side := range []struct {
			mode string
			into *[]float64
		}{{"native", &natv}, {"rewrite", &rwv}} {
			warmInProc(b, bin, img, tree, side.mode, wd, spec, argv, writes)
			for range warmRounds / warmBlocks {
				*side.into = append(*side.into, warmInProc(b, bin, img, tree, side.mode, wd, spec, argv, writes))
			}
		}
	}
	nat, rw := median(natv), median(rwv)
	b.ReportMetric(rw/nat, name+"_rewrite_warm_ratio")
	return fmt.Sprintf(" %26s", fmt.Sprintf("%.1f / %.1f (%.1fx)", nat, rw, rw/nat))
}
