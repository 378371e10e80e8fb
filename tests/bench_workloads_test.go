//go:build lkl

package tests

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkWorkloads times what users feel, beyond the microbenchmarks:
// whole commands over an image with python3, git, gcc and make, natively
// (a chroot of the image's tree: root may chroot) and under every tier,
// median of 5 each, in one run. kbox's start-up (`-- /bin/true` in the
// same mode) is measured apart and each command is also reported net of
// it; then the command's second run in one run of the default tier, with
// LKL's caches warm (warmRun), and warm in one process, natively and
// under the rewrite tier (warmColumns: medians of 9). `make
// bench-workloads` builds the image (ROOTFS_PACKAGES) and runs this;
// without KBOX_WORKLOADS_IMAGE it skips. docs/benchmarks.md has the
// figures.
func BenchmarkWorkloads(b *testing.B) {
	img := os.Getenv("KBOX_WORKLOADS_IMAGE")
	if img == "" {
		b.Skip("SKIP: no KBOX_WORKLOADS_IMAGE (make bench-workloads builds one)")
	}
	if os.Geteuid() != 0 {
		b.Skip("SKIP: the native rows chroot into the image's tree, which needs root")
	}
	bin := kboxBin(b)
	dir := b.TempDir()
	work := filepath.Join(dir, "work.ext4")
	copyFile(b, img, work)
	// The image gets its fixtures once, under kbox: a git repository of
	// 2000 files and a C project of 50 files. The repository's index is
	// written again a second after its files (git status refreshes it):
	// an index written in the same second as its files holds them all
	// "racily clean", and every git status reads all 2000 again, which
	// the ephemeral runs cannot record in the index while the native
	// ones do after their first run (git compares whole seconds).
	setup := `set -e
mkdir -p /work/repo /work/cproj
cd /work/repo
git init -q
i=0; while [ $i -lt 2000 ]; do echo "file $i" > f$i.txt; i=$((i+1)); done
git add .
git -c user.email=k@b -c user.name=k commit -qm init
sleep 1.1
git status --short >/dev/null
cd /work/cproj
i=0; while [ $i -lt 50 ]; do printf '#include <stdio.h>\nint f%d(int x) { return x * %d + printf("%%d", x); }\n' $i $i > f$i.c; i=$((i+1)); done
printf 'int main(void) { return 0; }\n' > main.c
printf 'OBJS := $(patsubst %%.c,%%.o,$(wildcard *.c))\nprog: $(OBJS)\n\tgcc -o $@ $(OBJS)\n%%.o: %%.c\n\tgcc -O1 -c -o $@ $<\n' > Makefile
python3 -c 'import json, sqlite3, email, http.client'
echo setup-ok`
	if out, err := exec.Command(bin, "image", "-S", work, "--syscall-mode=seccomp", "--", "/bin/sh", "-c", setup).CombinedOutput(); err != nil || !strings.Contains(string(out), "setup-ok") {
		b.Fatalf("setting up the image: %v\n%s", err, lastLines(string(out), 10))
	}
	installGuest(b, work, "warmexec")
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("debugfs", "-R", "rdump / "+tree, work).CombinedOutput(); err != nil {
		b.Fatalf("debugfs rdump: %v\n%s", err, out)
	}
	// The chroot's /dev: git opens /dev/null.
	for _, d := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"urandom", 1, 9}} {
		p := filepath.Join(tree, "dev", d.name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.Remove(p)
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			b.Fatalf("the native chroot's /dev/%s: %v", d.name, err)
		}
	}
	pyDir := "/usr/lib/python3"
	if m, _ := filepath.Glob(filepath.Join(tree, "usr/lib/python3.*")); len(m) > 0 {
		pyDir = "/usr/lib/" + filepath.Base(m[0])
	}
	specs := warmSpecs(b, tree, pyDir)
	type workload struct {
		name   string
		wd     string
		argv   []string
		writes bool // changes the image: an ephemeral run
		forks  bool // an in-process tier cannot run it
	}
	loads := []workload{
		{"find /usr | wc -l", "/", []string{"/usr/bin/find", "/usr"}, false, false},
		{"grep -r 'def main' " + pyDir, "/", []string{"/bin/grep", "-r", "def main", pyDir}, false, false},
		{"ls -lR /usr", "/", []string{"/bin/ls", "-lR", "/usr"}, false, false},
		{"python3 -c 'import json, sqlite3, email, http.client'", "/", []string{"/usr/bin/python3", "-c", "import json, sqlite3, email, http.client"}, false, false},
		{"sqlite (50 commits, python3)", "/", []string{"/usr/bin/python3", "-c", sqliteCommits}, true, false},
		{"git status (2000 files)", "/work/repo", []string{"/usr/bin/git", "status", "--short"}, true, false},
		{"make -j2 (50 C files)", "/work/cproj", []string{"/usr/bin/make", "-s", "-B", "-j2"}, true, true},
	}
	modes := []string{"native", "seccomp", "trap", "rewrite", "auto"}
	available := map[string]bool{"native": true}
	startup := map[string]float64{}
	for _, m := range modes[1:] {
		cmd := exec.Command(bin, "image", "-S", work, "--read-only", "--syscall-mode="+m, "--", "/bin/true")
		if cmd.Run() != nil {
			b.Logf("%-8s not available in this build: rows n/a", m)
			continue
		}
		available[m] = true
		var v []float64
		for i := 0; i < 5; i++ {
			v = append(v, timeRun(b, exec.Command(bin, "image", "-S", work, "--read-only", "--syscall-mode="+m, "--", "/bin/true")))
		}
		startup[m] = median(v)
	}
	var head strings.Builder
	fmt.Fprintf(&head, "%-52s %9s", "workload (median of 5, ms)", "native")
	for _, m := range modes[1:] {
		if available[m] {
			fmt.Fprintf(&head, " %22s", m+" (net, ×native)")
		}
	}
	fmt.Fprintf(&head, " %22s %26s", "seccomp warm (×native)", "warm: native / rewrite (×)")
	b.Log(head.String())
	line := fmt.Sprintf("%-52s %9s", "start-up (-- /bin/true)", "-")
	for _, m := range modes[1:] {
		if available[m] {
			line += fmt.Sprintf(" %22s", fmt.Sprintf("%.0f", startup[m]))
		}
	}
	b.Log(line)
	for _, w := range loads {
		res := map[string]float64{}
		for _, m := range modes {
			if !available[m] {
				continue
			}
			var v []float64
			failed := false
			for i := 0; i < 5 && !failed; i++ {
				var cmd *exec.Cmd
				if m == "native" {
					cmd = exec.Command("chroot", append([]string{tree, "/usr/bin/env", "-C", w.wd}, w.argv...)...)
				} else {
					args := []string{"image", "-S", work, "--syscall-mode=" + m, "-w", w.wd}
					if w.writes {
						args = append(args, "--ephemeral")
					} else {
						args = append(args, "--read-only")
					}
					cmd = exec.Command(bin, append(append(args, "--"), w.argv...)...)
				}
				cmd.Env = append(os.Environ(), "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C")
				var errb strings.Builder
				cmd.Stdout, cmd.Stderr = io.Discard, &errb
				t0 := time.Now()
				if err := cmd.Run(); err != nil {
					if m == "trap" || m == "rewrite" {
						failed = true // a tier that cannot run it (fork): n/a
						break
					}
					b.Fatalf("%s under %s: %v\n%s", w.name, m, err, lastLines(errb.String(), 5))
				}
				v = append(v, float64(time.Since(t0).Microseconds())/1000)
			}
			if !failed {
				res[m] = median(v)
			}
		}
		warm := warmRun(b, bin, work, w.wd, w.argv, w.writes)
		line := fmt.Sprintf("%-52s %9.0f", w.name, res["native"])
		for _, m := range modes[1:] {
			if !available[m] {
				continue
			}
			t, ok := res[m]
			if !ok {
				line += fmt.Sprintf(" %22s", "n/a")
				continue
			}
			net := t - startup[m]
			line += fmt.Sprintf(" %22s", fmt.Sprintf("%.0f (%.0f, %.1fx)", t, net, net/res["native"]))
			b.ReportMetric(net/res["native"], strings.Fields(w.name)[0]+"_"+m+"_net_ratio")
		}
		line += fmt.Sprintf(" %22s", fmt.Sprintf("%.0f (%.1fx)", warm, warm/res["native"]))
		b.ReportMetric(warm/res["native"], strings.Fields(w.name)[0]+"_seccomp_warm_ratio")
		spec, ok := specs[strings.Fields(w.name)[0]]
		line += warmColumns(b, bin, work, tree, w.wd, strings.Fields(w.name)[0], spec, ok && available["rewrite"] && !w.forks, w.argv, w.writes)
		b.Log(line)
	}
	workloadFloor(b, work, tree)
	b.ReportMetric(0, "ns/op")
}

// warmRun times argv's second run in one kbox run of the default tier (a
// shell runs it twice and times the second with coreutils' date, less the
// time of a date alone): LKL's caches are warm then, as the host's are
// for the native rows, and no start-up is in it. Median of 5, ms.
func warmRun(b *testing.B, bin, img, wd string, argv []string, writes bool) float64 {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	cmd := strings.Join(q, " ") + " >/dev/null 2>&1"
	// c-b is the command and one date, b-a one date alone.
	date := "$(/bin/date +%s%N)"
	script := cmd + "; a=" + date + "; b=" + date + "; " + cmd + "; c=" + date + "; echo $(( ((c - b) - (b - a)) / 1000 ))"
	mode := "--read-only"
	if writes {
		mode = "--ephemeral"
	}
	var v []float64
	for i := 0; i < 5; i++ {
		c := exec.Command(bin, "image", "-S", img, "--syscall-mode=seccomp", mode, "-w", wd, "--", "/bin/sh", "-c", script)
		c.Env = append(os.Environ(), "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C")
		out, err := c.Output()
		var us float64
		if _, serr := fmt.Sscan(strings.TrimSpace(string(out)), &us); err != nil || serr != nil {
			b.Fatalf("%s twice under seccomp: %v %q", cmd, err, out)
		}
		v = append(v, us/1000)
	}
	return median(v)
}

// workloadFloor measures, in the same run, what LKL itself costs for the
// find row with no kbox at all: scripts/lkl_floor.c boots the same liblkl
// with kbox's kernel command line, mounts the image and walks /usr as
// find does, cold (a fresh kernel, as every kbox run is) and warm, and
// walks the native tree too. KBOX_LKL_LIB and KBOX_LKL_INC name the
// liblkl.a and its headers (the Makefile passes those kbox links).
func workloadFloor(b *testing.B, img, tree string) {
	lib, inc := os.Getenv("KBOX_LKL_LIB"), os.Getenv("KBOX_LKL_INC")
	if _, err := os.Stat(lib); lib == "" || inc == "" || err != nil {
		b.Logf("lkl_floor not measured: no liblkl.a (KBOX_LKL_LIB=%q)", lib)
		return
	}
	bin := filepath.Join(b.TempDir(), "lkl_floor")
	src := filepath.Join(repoRoot(), "scripts", "lkl_floor.c")
	if out, err := exec.Command("cc", "-O2", "-I"+inc, "-o", bin, src, lib, "-lpthread", "-lrt").CombinedOutput(); err != nil {
		b.Logf("lkl_floor not built (%v): %s", err, lastLines(string(out), 5))
		return
	}
	for _, f := range []struct{ what, dir, mode string }{
		{"find's walk of /usr", "/usr", ""},
		{"git status's walk of /work/repo, reading each file", "/work/repo", "read"},
	} {
		out, err := exec.Command(bin, img, f.dir, tree, f.mode).CombinedOutput()
		if err != nil {
			b.Logf("lkl_floor: %v: %s", err, lastLines(string(out), 5))
			return
		}
		b.Logf("the floor of LKL itself, %s (scripts/lkl_floor.c, no kbox):", f.what)
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			b.Log("  " + l)
		}
	}
}

func timeRun(b *testing.B, cmd *exec.Cmd) float64 {
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%v: %v\n%s", cmd.Args, err, lastLines(string(out), 5))
	}
	return float64(time.Since(t0).Microseconds()) / 1000
}

func copyFile(b *testing.B, src, dst string) {
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// sqliteCommits is the sqlite row's program: a new database in /tmp and 50
// transactions of one insert each (sqlite makes, writes, syncs and
// removes its journal at every commit).
const sqliteCommits = `import os, sqlite3
p = "/tmp/kbox-bench.db"
if os.path.exists(p):
    os.remove(p)
db = sqlite3.connect(p)
db.execute("create table t(a, b)")
db.commit()
for i in range(50):
    db.execute("insert into t values (?, ?)", (i, "x" * 100))
    db.commit()
db.close()`
