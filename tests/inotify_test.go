//go:build lkl

package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// inotifyKnownDiffs are the lines of tests/guest/inotifyt.c that differ
// under kbox by design (docs/tiers.md, "inotify"), as kbox prints
// them, with what native prints: a file written through a shadow has its
// LKL file open for writing in kbox until kbox drops the shadow (here at
// its unlink), and LKL reports that close too.
var inotifyKnownDiffs = map[string]string{
	"unlink: [CLOSE_WRITE renamed] [DELETE renamed] [DELETE_SELF -] [IGNORED -]": "unlink: [DELETE renamed] [DELETE_SELF -] [IGNORED -]",
}

// TestInotify: the guest's inotify on LKL's files (dispatch/sys_file_inotify.go)
// gives what Linux gives, in each tier: inotify_init1's flags, add_watch's
// path resolution and errors, rm_watch, the events of files created,
// written, renamed and removed by the same process and by another one,
// and the fd in a blocking read woken by another process, IN_NONBLOCK's
// EAGAIN, epoll and select and poll beside a pipe. tests/guest/inotifyt.c
// runs natively in a temporary directory and under kbox in /tmp; their
// lines are compared. (The in-process tiers run one process: there and
// in the native run compared with them, the other process is a thread.)
func TestInotify(t *testing.T) {
	needKernel(t, "inotify")
	img := imagePath(t)
	prog := dumpFromImage(t, img, "/opt/tests/inotifyt")
	natives := map[bool]string{}
	for _, one := range []bool{false, true} {
		args := []string{filepath.Join(t.TempDir(), "d")}
		if one {
			args = append([]string{"-oneproc"}, args...)
		}
		out, err := exec.Command(prog, args...).CombinedOutput()
		if err != nil || !strings.HasSuffix(string(out), "inotifyt done\n") {
			t.Fatalf("native %v: %v\n%s", args, err, out)
		}
		natives[one] = string(out)
	}
	forEachTier(t, func(t *testing.T, tier string) {
		// The in-process tiers run one process: the other
		// process's changes come from a thread there.
		args := []string{"image", "-S", img, "--read-only", "--syscall-mode=" + tier, "--", "/opt/tests/inotifyt"}
		one := tier != "seccomp"
		if one {
			args = append(args, "-oneproc")
		}
		native := natives[one]
		out, stderr, st := runKbox(t, append(args, "/tmp/inotifyt")...)
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			if n, ok := inotifyKnownDiffs[l]; ok {
				lines[i] = n
			}
		}
		if got := strings.Join(lines, "\n"); st != 0 || got != native {
			t.Errorf("status %d; lines that differ (kbox | native):\n%s\nstderr:\n%s", st, lineDiff(got, native), stderr)
		}
	})
}

// lineDiff lists the lines of a and b that differ, by position.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out.WriteString(x + " | " + y + "\n")
		}
	}
	return out.String()
}

// TestInotifyTailF: coreutils' tail -F follows a file another guest
// process appends to, through inotify: with a polling interval of 30 s
// (-s 30), tail without inotify would show nothing in the few seconds
// the test waits.
func TestInotifyTailF(t *testing.T) {
	needKernel(t, "inotify")
	img := imagePath(t)
	const script = `cd /tmp && : > f && { tail -F -s 30 f > out 2> err & pid=$!; sleep 0.5
/bin/sh -c 'echo one >> f'; /bin/sh -c 'echo two >> f'
for i in $(seq 80); do [ "$(cat out)" = "$(printf 'one\ntwo')" ] && break; sleep 0.1; done
kill $pid; wait; cat out err; }`
	runCases(t, []string{"image", "-S", img, "--read-only"}, []guestCase{
		{"tail -F", []string{"--", "/bin/bash", "-c", script}, 0, []string{"one\ntwo\n"}, []string{"polling", "reverting"}},
	})
}

// TestInotifyHostPaths: a path kbox serves from the host (a -b bind,
// /proc) cannot be watched (EOPNOTSUPP: kbox never watches host paths for
// the guest), an LKL path can, and the fd's /proc link reads as Linux's
// (anon_inode:inotify), in each tier.
func TestInotifyHostPaths(t *testing.T) {
	needKernel(t, "inotify")
	img := imagePath(t)
	host := t.TempDir()
	forTiers(t, []string{"seccomp", "trap"}, func(t *testing.T, tier string) {
		runCases(t, []string{"image", "-S", img, "--read-only", "--syscall-mode=" + tier, "-b", host + ":/mnt/b"}, []guestCase{
			{"bind", []string{"--", "/opt/tests/inotifyt", "-do", "watch", "/mnt/b"}, 0,
				[]string{"watch /mnt/b EOPNOTSUPP link anon_inode:inotify\n"}, nil},
			{"proc", []string{"--", "/opt/tests/inotifyt", "-do", "watch", "/proc/self"}, 0,
				[]string{"watch /proc/self EOPNOTSUPP link anon_inode:inotify\n"}, nil},
			{"tmp", []string{"--", "/opt/tests/inotifyt", "-do", "watch", "/tmp"}, 0,
				[]string{"watch /tmp ok link anon_inode:inotify\n"}, nil},
		})
	})
}

// TestInotifyNodeWatch: Node's fs.watch (Debian's nodejs) sees a file that
// another guest process makes in the watched directory. Without inotify
// fs.watch throws ENOSYS.
func TestInotifyNodeWatch(t *testing.T) {
	needKernel(t, "inotify")
	img := packageImage(t, "nodejs")
	const js = `const fs = require("fs"), cp = require("child_process");
fs.mkdirSync("/tmp/w");
const w = fs.watch("/tmp/w", (ev, name) => { console.log("event " + ev + " " + name); w.close(); process.exit(0); });
cp.spawn("/bin/sh", ["-c", "echo hi > /tmp/w/made-by-sh"], { stdio: "inherit" });
setTimeout(() => { console.log("no event"); process.exit(1); }, 20000);`
	runCases(t, []string{"image", "-S", img, "--read-only"}, []guestCase{
		{"fs.watch", []string{"--", "/usr/bin/node", "-e", js}, 0, []string{"event rename made-by-sh\n"}, []string{"ENOSYS"}},
	})
}

// BenchmarkInotifyDelay: how long a guest's inotify watcher waits for
// IN_MODIFY after a write to a shadow and for IN_CLOSE_WRITE after its
// close (tests/guest/inotifylat.c, median of 9 rounds), natively and in
// each tier. Both reach LKL when kbox writes the shadow back
// (docs/tiers.md, "inotify").
func BenchmarkInotifyDelay(b *testing.B) {
	img := imagePath(b)
	bin := kboxBin(b)
	prog := dumpFromImage(b, img, "/opt/tests/inotifylat")
	out, err := exec.Command(prog, filepath.Join(b.TempDir(), "f"), "9").CombinedOutput()
	if err != nil {
		b.Fatalf("native: %v\n%s", err, out)
	}
	b.Logf("inotify delay, ms (modify, close_write): native %s", strings.TrimSpace(string(out)))
	for _, m := range tiers {
		args := []string{"image", "-S", copyImage(b, img), "--syscall-mode=" + m}
		if m != "seccomp" {
			args = append(args, "--trusted")
		}
		out, err := exec.Command(bin, append(args, "--", "/opt/tests/inotifylat", "/tmp/f", "9")...).Output()
		var mod, cw float64
		if _, serr := fmt.Sscanf(string(out), "modify %f close_write %f", &mod, &cw); err != nil || serr != nil {
			b.Fatalf("%s: %v %v\n%s", m, err, serr, out)
		}
		b.Logf("  %-8s %s", m, strings.TrimSpace(string(out)))
		b.ReportMetric(mod, "inotify_modify_"+m+"_ms")
		b.ReportMetric(cw, "inotify_close_write_"+m+"_ms")
	}
	b.ReportMetric(0, "ns/op")
}
