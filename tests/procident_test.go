//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// A guest process's identity in its /proc (package procfs,
// docs/guest-view.md "The guest's /proc"): oom_score_adj and oom_adj kept by
// kbox with Linux's rules for the guest's credentials, comm, cmdline and
// the names after an exec in every tier, the parent of the first guest
// process, and nothing of kbox among the guest's processes.
// tests/guest/procident runs natively (as root) and under kbox.

// procidentNative runs the image's procident natively with args.
func procidentNative(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PROCIDENT="+bin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("native procident %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// oom_score_adj and oom_adj, written and read by the C program: with
// CAP_SYS_RESOURCE dropped first it prints natively (root) what it prints
// under kbox, in every tier (without a child) and in the seccomp tier
// (with a child: fork, a parent writing the child's value, nobody raising
// and lowering, exec). As root with the capability, guest root may lower
// the values, as Linux's rules say: the lines that differ from the run
// without it are checked one by one (the host's root here may lack
// CAP_SYS_RESOURCE, as a container's does, so no native run shows them).
func TestProcOOMScoreAdj(t *testing.T) {
	img := imagePath(t)
	bin := dumpFromImage(t, img, "/opt/tests/procident")
	native := procidentNative(t, bin, "oom", "nocap")
	nativeSelf := procidentNative(t, bin, "oomself", "nocap")
	forEachTier(t, func(t *testing.T, m string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+m, "--", "/opt/tests/procident", "oomself", "nocap")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "oomself nocap", nativeSelf, out)
	})
	t.Run("child", func(t *testing.T) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode=seccomp", "--", "/opt/tests/procident", "oom", "nocap")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "oom nocap", native, out)
	})
	t.Run("root", func(t *testing.T) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode=seccomp", "--", "/opt/tests/procident", "oom")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		// What CAP_SYS_RESOURCE changes, from the line it is on in the
		// run without it: lowering succeeds, and each privileged
		// write of oom_score_adj sets the floor nobody may not go
		// below (100, the last value root wrote).
		want := native
		for _, r := range []struct{ from, to string }{
			{"write self oom_score_adj \"-1000\": EACCES\nafter: oom_score_adj 0 oom_adj 0\n",
				"write self oom_score_adj \"-1000\": ok\nafter: oom_score_adj -1000 oom_adj -17\n"},
			{"write self oom_adj \"-17\": EACCES\nafter: oom_score_adj 1000 oom_adj 15\n" +
				"write self oom_adj \"8\": EACCES\nafter: oom_score_adj 1000 oom_adj 15\n" +
				"write self oom_adj \"-16\": EACCES\nafter: oom_score_adj 1000 oom_adj 15\n" +
				"write self oom_adj \"0\": EACCES\nafter: oom_score_adj 1000 oom_adj 15\n",
				"write self oom_adj \"-17\": ok\nafter: oom_score_adj -1000 oom_adj -17\n" +
					"write self oom_adj \"8\": ok\nafter: oom_score_adj 470 oom_adj 7\n" +
					"write self oom_adj \"-16\": ok\nafter: oom_score_adj -941 oom_adj -15\n" +
					"write self oom_adj \"0\": ok\nafter: oom_score_adj 0 oom_adj 0\n"},
			{"fopen/fprintf/fclose: ok EACCES\nafter fprintf: oom_score_adj 5 oom_adj 0\n",
				"fopen/fprintf/fclose: ok ok\nafter fprintf: oom_score_adj -1000 oom_adj -17\n"},
			{"write self oom_score_adj \"-500\": EACCES\nchild: oom_score_adj 3 oom_adj 0\n",
				"write self oom_score_adj \"-500\": ok\nchild: oom_score_adj -500 oom_adj -8\n"},
			{"parent: oom_score_adj 3 oom_adj 0\n", "parent: oom_score_adj -500 oom_adj -8\n"},
			{"write child oom_score_adj \"-900\": EACCES\nthe child's by pid: oom_score_adj 300 oom_adj 5\n",
				"write child oom_score_adj \"-900\": ok\nthe child's by pid: oom_score_adj -900 oom_adj -15\n"},
			{"child after the parent's write: oom_score_adj 300 oom_adj 5\n",
				"child after the parent's write: oom_score_adj -900 oom_adj -15\n"},
			{"write self oom_score_adj \"99\": ok\n", "write self oom_score_adj \"99\": EACCES\n"},
			{"nobody: oom_score_adj 99 oom_adj 1\n", "nobody: oom_score_adj 100 oom_adj 1\n"},
			{"parent at the end: oom_score_adj 3 oom_adj 0\n", "parent at the end: oom_score_adj -500 oom_adj -8\n"},
		} {
			if !strings.Contains(want, r.from) {
				t.Fatalf("the native run lacks %q:\n%s", r.from, native)
			}
			want = strings.Replace(want, r.from, r.to, 1)
		}
		diffLines(t, "oom as root", want, out)
	})
	// A shell: guest root lowers its value, reads it back, a subshell
	// inherits it, oom_adj is scaled; nobody raises its own and cannot
	// lower it below that (the redirection's pipe cannot report the
	// refusal: the value stays).
	runCases(t, []string{"image", "-S", img, "--syscall-mode=seccomp"}, []guestCase{
		{"root", []string{"--", "/bin/sh", "-c", "echo -1000 > /proc/self/oom_score_adj; cat /proc/self/oom_score_adj; (cat /proc/self/oom_score_adj /proc/self/oom_adj); " +
			"echo 5 > /proc/self/oom_adj; cat /proc/self/oom_score_adj /proc/$$/oom_adj"}, 0,
			[]string{"-1000\n-1000\n-17\n294\n4\n"}, nil},
	})
	runCases(t, []string{"image", "-R", img, "--change-id", "1000:1000", "--syscall-mode=seccomp"}, []guestCase{
		{"nobody", []string{"--", "/bin/sh", "-c", "echo 100 > /proc/self/oom_score_adj; cat /proc/self/oom_score_adj; echo -5 > /proc/self/oom_score_adj; cat /proc/self/oom_score_adj"}, 0,
			[]string{"100\n100\n"}, nil},
	})
}

// comm writes rename the thread: comm, status Name: and stat's command
// follow, natively and in every tier; a thread's own comm and a new
// thread's inherited name too; another process's comm is EINVAL (a fork:
// the seccomp tier).
func TestProcComm(t *testing.T) {
	img := imagePath(t)
	bin := dumpFromImage(t, img, "/opt/tests/procident")
	native := procidentNative(t, bin, "comm")
	forEachTier(t, func(t *testing.T, m string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+m, "--", "/opt/tests/procident", "comm")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "comm", native, out)
	})
	nativeChild := procidentNative(t, bin, "commchild")
	out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode=seccomp", "--", "/opt/tests/procident", "commchild")
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	diffLines(t, "commchild", nativeChild, out)
	// The shell's comm renamed, seen by number from a child.
	runCases(t, []string{"image", "-S", img, "--syscall-mode=seccomp"}, []guestCase{
		{"sh", []string{"--", "/bin/sh", "-c", "printf renamed > /proc/self/comm; cat /proc/$$/comm; grep Name: /proc/$$/status; cut -d' ' -f2 /proc/$$/stat; ps -o pid,comm | awk -v p=$$ '$1 == p { print $2 }'"}, 0,
			[]string{"renamed\nName:\trenamed\n(renamed)\nrenamed\n"}, nil},
	})
}

// After an exec the process's cmdline, comm, stat's and status's names
// and exe are the new program's, by self and by pid: a child read by its
// parent (seccomp tier), a program that execs itself (every tier).
func TestProcExecIdentity(t *testing.T) {
	img := imagePath(t)
	bin := dumpFromImage(t, img, "/opt/tests/procident")
	native := procidentNative(t, bin, "exec")
	out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode=seccomp", "--", "/opt/tests/procident", "exec")
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	diffLines(t, "exec", native, out)
	nativeSelf := procidentNative(t, bin, "self")
	forEachTier(t, func(t *testing.T, m string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+m, "--", "/opt/tests/procident", "self")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "self", nativeSelf, out)
	})
}

// A process's ids in its /proc are the guest's: status's Uid:, Gid: and
// Groups: lines, and the owner of its entries (its effective ids), by
// self, by pid and by thread, after it took three different uids and
// gids and two groups (and stayed dumpable). The host's show kbox's ids
// (the old answer: root's here, kbox's user's for a rootless run). In
// every tier, as natively.
func TestProcIDs(t *testing.T) {
	img := imagePath(t)
	bin := dumpFromImage(t, img, "/opt/tests/procident")
	native := procidentNative(t, bin, "ids")
	if !strings.Contains(native, "Uid:\t1000\t1001\t1002\t1001\n") {
		t.Fatalf("natively:\n%s", native)
	}
	forEachTier(t, func(t *testing.T, m string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+m, "--trusted", "--", "/opt/tests/procident", "ids")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		diffLines(t, "ids", native, out)
	})
}

// TestProcMapsShowImageFiles: a guest's /proc/PID/maps, smaps and
// numa_maps show
// the image's files it maps (its program, its loader, libc) by their
// paths, devices and inodes in the guest's kernel, as Linux shows a
// process's files: not kbox's sealed copies ("/memfd:kbox-exec:...
// (deleted)") or a shadow's content (a memfd, or "/#N (deleted)" in
// kbox's store on a writable image).
func TestProcMapsShowImageFiles(t *testing.T) {
	img := imagePath(t)
	const script = `/usr/bin/cat /proc/self/maps; echo ---; grep -c -e kbox -e memfd -e '(deleted)' /proc/self/smaps; ` +
		`/usr/bin/cat /proc/self/numa_maps | grep -c -e kbox -e memfd -e '(deleted)'; /usr/bin/cat /proc/self/numa_maps | grep -c file=/usr/bin/cat; ` +
		`stat -L -c "%i %n" /usr/bin/cat /lib/x86_64-linux-gnu/libc.so.6`
	for _, mode := range []string{"--read-only", "-w"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"image", "-S", img, "--read-only", "--", "/bin/sh", "-c", script}
			if mode == "-w" {
				args = []string{"image", "-S", copyImage(t, img), "--", "/bin/sh", "-c", script}
			}
			out, stderr, st := runKbox(t, args...)
			maps, rest, _ := strings.Cut(out, "---\n")
			if st != 0 && !strings.HasPrefix(rest, "0\n") { // grep -c finds none: status 1
				t.Fatalf("status %d\n%s\n%s", st, out, stderr)
			}
			if !strings.HasPrefix(rest, "0\n0\n") || regexp.MustCompile(`kbox|memfd|\(deleted\)|/#`).MatchString(maps) {
				t.Errorf("kbox's files show in the guest's maps, smaps or numa_maps:\n%s", out)
			}
			lines := strings.Split(strings.TrimSpace(rest), "\n")
			if len(lines) < 3 || lines[2] == "0" {
				t.Errorf("numa_maps does not name the program's file /usr/bin/cat:\n%s", out)
			}
			inodes := map[string]string{} // path → inode, from maps
			devs := map[string]bool{}
			for _, l := range strings.Split(maps, "\n") {
				if f := strings.Fields(l); len(f) == 6 && strings.HasPrefix(f[5], "/") {
					inodes[f[5]] = f[4]
					devs[f[3]] = true
				}
			}
			for _, l := range lines[min(3, len(lines)):] {
				ino, name, _ := strings.Cut(l, " ")
				if name == "/lib/x86_64-linux-gnu/libc.so.6" {
					name = "/usr/lib/x86_64-linux-gnu/libc.so.6" // maps names the file, not the link
				}
				if inodes[name] != ino {
					t.Errorf("%s: inode %s in maps, %s by stat\n%s", name, inodes[name], ino, out)
				}
			}
			if len(devs) != 1 {
				t.Errorf("the image's files on %d devices in maps, want 1:\n%s", len(devs), maps)
			}
		})
	}
}

// Nothing of kbox among the guest's processes: /proc lists the guest's
// processes only (not the socket binder, kbox's helper process beside the
// guest, named kbox and carrying the guest's arguments), none is named
// kbox or shows kbox's arguments, and the first guest process's parent is
// 0 in stat, status and getppid (as a pid namespace's first process:
// kbox's keeper is outside). In every tier: the guest in kbox's own
// process shows its own name and arguments, not kbox's.
func TestProcNoKbox(t *testing.T) {
	img := imagePath(t)
	kboxArgs := regexp.QuoteMeta(img)
	bad := regexp.MustCompile(`\bkbox\b|` + kboxArgs + `|--syscall-mode|\bimage\b`)
	forEachTier(t, func(t *testing.T, m string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode="+m, "--", "/opt/tests/procident", "list")
		if st != 0 {
			t.Fatalf("status %d\n%s\n%s", st, out, stderr)
		}
		want := "pid self comm procident cmdline /opt/tests/procident|list| Name procident PPid 0\n"
		if out != want || bad.MatchString(out) {
			t.Errorf("the guest's /proc lists:\n%s\nwant:\n%s", out, want)
		}
		out, stderr, st = runKbox(t, "image", "-S", img, "--syscall-mode="+m, "--", "/opt/tests/procident", "ppid")
		if st != 0 || out != "getppid, stat and status agree: yes\nppid: 0\n" && m != "seccomp" ||
			m == "seccomp" && out != "getppid, stat and status agree: yes\nppid: 0\nchild's parent is its parent: yes\n" {
			t.Errorf("status %d\n%s\n%s", st, out, stderr)
		}
	})
	// A shell with a child in the background: every listed process is
	// the shell, its sleep or the lister; the shell's parent is 0, the
	// others' the shell; ps aux shows the same three and no other.
	out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode=seccomp", "--", "/bin/sh", "-c",
		// busybox runs sleep as /proc/self/exe, named exe until its
		// main renames it (natively too): the list waits for that.
		`sleep 7.25 & echo "sh $$ bg $!"; i=0; while [ "$(cat /proc/$!/comm)" != sleep ] && [ $i -lt 1000 ]; do i=$((i+1)); done; `+
			`/opt/tests/procident list; echo ---; ps -o pid,ppid,comm,args; kill $!`)
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	if bad.MatchString(out) {
		t.Errorf("kbox shows in the guest:\n%s", out)
	}
	var sh, bg string
	lines := strings.Split(out, "\n")
	if f := strings.Fields(lines[0]); len(f) == 4 {
		sh, bg = f[1], f[3]
	}
	list, ps, _ := strings.Cut(strings.Join(lines[1:], "\n"), "---\n")
	want := map[string]string{
		sh:     "pid " + sh + " comm sh cmdline /bin/sh|-c|",
		bg:     "pid " + bg + " comm sleep cmdline sleep|7.25| Name sleep PPid -2", // the shell, the lister's parent
		"self": "pid self comm procident cmdline /opt/tests/procident|list| Name procident PPid -2",
	}
	got := strings.Split(strings.TrimSpace(list), "\n")
	if len(got) != 3 {
		t.Errorf("the guest's /proc lists %d processes, want 3:\n%s", len(got), list)
	}
	for _, l := range got {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasPrefix(l, want[f[1]]) {
			t.Errorf("unexpected: %q", l)
		}
		if len(f) > 1 && f[1] == sh && !strings.HasSuffix(l, " Name sh PPid 0") {
			t.Errorf("the first process's parent: %q", l)
		}
	}
	pids := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(ps), "\n")[1:] {
		f := strings.Fields(l)
		pids[f[0]] = true
		if f[0] == sh && f[1] != "0" || f[0] != sh && f[1] != sh {
			t.Errorf("ps: %q (the shell is %s)", l, sh)
		}
	}
	if len(pids) != 3 || !pids[sh] || !pids[bg] {
		t.Errorf("ps lists %v, want the shell %s, its sleep %s and ps:\n%s", pids, sh, bg, ps)
	}
	t.Run("ps", func(t *testing.T) { psSelf(t, img) })
	// An orphan, adopted by the keeper: its parent is outside too.
	runCases(t, []string{"image", "-S", img, "--syscall-mode=seccomp"}, []guestCase{
		{"orphan", []string{"--", "/bin/sh", "-c", `sh -c "sh -c \"sleep 0.5; grep PPid: /proc/\\\$\\\$/status; cut -d' ' -f4 /proc/\\\$\\\$/stat\" & sleep 0.1"; sleep 1.5`}, 0,
			[]string{"PPid:\t0\n0\n"}, nil},
	})
}

// psSelf: ps in the guest shows its own line and the shell's as busybox
// does natively (ps is a "noexec" applet: busybox's sh forks and runs it
// without an exec, so it keeps the shell's command line, shown
// "{ps} sh -c ...", natively too), and no other process but the
// script's.
func psSelf(t *testing.T, img string) {
	bb := dumpFromImage(t, img, "/bin/busybox")
	const script = `echo "sh $$"; ps -o pid,args | cat; ps aux`
	// Only the script's shell and its ps: cat's line, if there is one,
	// may be from before its exec.
	pick := func(out string) string {
		sh := ""
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) == 2 && f[0] == "sh":
				sh = f[1]
			case len(f) > 2 && sh != "" && (f[0] == sh || strings.Contains(l, "{ps}")):
				l = strings.ReplaceAll(l, sh, "SH")
				l = regexp.MustCompile(`^ *[0-9]+`).ReplaceAllString(l, "PID")
				keep = append(keep, strings.Join(strings.Fields(l), " "))
			}
		}
		return strings.Join(keep, "\n")
	}
	cmd := exec.Command(bb, "sh", "-c", script)
	nout, err := cmd.Output()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, nout)
	}
	native := strings.ReplaceAll(pick(string(nout)), bb+" sh", "/bin/sh")
	out, stderr, st := runKbox(t, "image", "-S", img, "--syscall-mode=seccomp", "--", "/bin/sh", "-c", script)
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	if got := pick(out); got != native {
		t.Errorf("ps under kbox:\n%s\nnatively:\n%s\n(kbox's output:\n%s)", got, native, out)
	}
	// Every line of ps aux is the shell, ps, or cat (before or after
	// its exec); none is kbox's socket binder ("{kbox} /bin/sh -c ...":
	// it carried the guest's arguments).
	_, aux, _ := strings.Cut(out, "PID   USER")
	for _, l := range strings.Split(strings.TrimSpace(aux), "\n")[1:] {
		if !strings.Contains(l, " /bin/sh -c ") && !strings.HasSuffix(l, " cat") || strings.Contains(l, "kbox") {
			t.Errorf("ps aux lists %q", l)
		}
	}
}
