//go:build lkl

package tests

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The GDB and Delve helpers (scripts/gdb/kbox-gdb.py, scripts/dlv/kbox.star,
// docs/gdb-workflow.md) against a real kbox running a real guest.

// debuggerLimit bounds one debugger run: attaching and loading kbox's
// symbols takes a few seconds, more on a loaded machine.
const debuggerLimit = 3 * time.Minute

// waitingGuest is a kbox running /opt/tests/gdbwait with the debug mirror
// on (KBOX_GDB=1), and the fds the guest itself says it got.
type waitingGuest struct {
	kbox, guest int
	file, dir   string // the guest's fd numbers, as it printed them
}

// startWaitingGuest starts kbox with gdbwait and waits for its line.
func startWaitingGuest(t *testing.T) *waitingGuest {
	t.Helper()
	img := imagePath(t)
	cmd := exec.Command(kboxBin(t), "image", "--syscall-mode=seccomp", "--read-only", "-S", img, "--", "/opt/tests/gdbwait", "300")
	cmd.Env = append(os.Environ(), "KBOX_GDB=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // the keeper kills the guest
		cmd.Wait()
	})
	w := &waitingGuest{kbox: cmd.Process.Pid}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	re := regexp.MustCompile(`^gdbwait: pid (\d+) file fd (\d+) dir fd (\d+)$`)
	select {
	case l := <-line:
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("gdbwait said %q; stderr: %s", l, stderr.String())
		}
		w.guest, _ = strconv.Atoi(m[1])
		w.file, w.dir = m[2], m[3]
	case <-time.After(time.Minute):
		t.Fatalf("gdbwait did not start within a minute; stderr: %s", stderr.String())
	}
	return w
}

// gdbPath returns gdb, or skips loudly.
func gdbPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("gdb")
	if err != nil {
		t.Skip("SKIP (needs gdb): not in PATH: apt-get install gdb")
	}
	return p
}

// runDebugger runs a debugger and returns its output (stdout and stderr).
func runDebugger(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), debuggerLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.WaitDelay = 5 * time.Second
	b, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %v:\n%s", name, debuggerLimit, lastLines(string(b), 40))
	}
	if err != nil {
		t.Logf("%s: %v", name, err)
	}
	return string(b)
}

// gdbHelpers is the GDB script and the commands to run, as gdb arguments.
func gdbHelpers(cmds ...string) []string {
	args := []string{"-batch", "-nx", "-x", filepath.Join(repoRoot(), "scripts", "gdb", "kbox-gdb.py")}
	for _, c := range cmds {
		args = append(args, "-ex", c)
	}
	return args
}

// wantMatch checks that out matches each regular expression.
func wantMatch(t *testing.T, out, what string, res ...string) {
	t.Helper()
	for _, r := range res {
		if !regexp.MustCompile(r).MatchString(out) {
			t.Errorf("%s: output lacks %q", what, r)
		}
	}
}

// TestGDBHelpersAttached attaches GDB to a kbox whose guest holds an image
// file (a shadow, host fd) and a directory (a virtual fd) and sleeps, and
// runs the four state commands: each must print real values.
func TestGDBHelpersAttached(t *testing.T) {
	gdb := gdbPath(t)
	w := startWaitingGuest(t)
	out := runDebugger(t, "", gdb, append(gdbHelpers(
		"kbox-fdtable",
		"kbox-vfs-path /etc/passwd",
		"kbox-vfs-path /proc/../etc//hostname",
		"kbox-vfs-path /proc/self/status",
		"kbox-task-walk",
		"kbox-mem-check",
	), "-p", strconv.Itoa(w.kbox))...)
	if !alive(w.kbox) {
		t.Errorf("kbox did not survive GDB's detach")
	}
	if testing.Verbose() {
		t.Logf("gdb output:\n%s", out)
	}
	if strings.Contains(out, "cannot on this build") || strings.Contains(out, "Python Exception") {
		t.Errorf("a command failed:\n%s", out)
	}
	// The fd table has the fds the guest says it has, with their paths.
	wantMatch(t, out, "kbox-fdtable",
		`guest pid `+strconv.Itoa(w.guest)+`  /opt/tests/gdbwait  \(cwd /\)`,
		`\n\s+`+w.file+`\s+shadow\s+\d+\s+-\s+/etc/passwd  \[content `,
		`\n\s+`+w.dir+`\s+lkl\s+\d+\s+-\s+/etc  O_RDONLY\|O_DIRECTORY\n`)
	// The guest opened /etc/passwd: the engine's own resolution; the other
	// two are cleaned and predicted.
	wantMatch(t, out, "kbox-vfs-path",
		`placed    image  \(the engine's resolution #\d+: pid `+strconv.Itoa(w.guest)+`, open, given '/etc/passwd'\)`,
		`lexical   /etc/hostname  \(cleaned lexically\)`,
		`placed    kbox /proc  \(predicted from the configuration`)
	// LKL's own tasks: kernel threads and host-thread tasks; walked
	// through DWARF when liblkl's describes task_struct (kbox's kernel:
	// pid, state, comm), else read from LKL's /proc.
	if linkedKernel(t).values["dwarf"] == "full" {
		wantMatch(t, out, "kbox-task-walk",
			`\n\s+2\s+\d+\s+kthreadd\n`,
			`\s+ksoftirqd/0\n`,
			`\s+host0\n`,
			`\n\d+ tasks \(walked init_task.tasks\)\n`)
	} else {
		wantMatch(t, out, "kbox-task-walk",
			`\n\s+2\s+2\s+0\s+S\s+kthreadd\n`,
			`\s+S\s+ksoftirqd/0\n`,
			`\s+host0\n`,
			`\n\d+ tasks\n`)
	}
	// kbox mounts its disks so that ext4 starts no background thread
	// (rootfs.ext4Defaults).
	if strings.Contains(out, "ext4lazyinit") {
		t.Errorf("kbox-task-walk: ext4's background thread runs:\n%s", out)
	}
	// A nonzero free page count that agrees with the kernel's meminfo, and
	// slab caches.
	m := regexp.MustCompile(`free pages: (\d+) \(`).FindStringSubmatch(out)
	if m == nil {
		t.Errorf("kbox-mem-check: no free page count:\n%s", out)
	} else if n, _ := strconv.Atoi(m[1]); n <= 0 {
		t.Errorf("kbox-mem-check: free pages %d", n)
	}
	wantMatch(t, out, "kbox-mem-check",
		`check: zones' free pages \d+ KiB, meminfo MemFree \d+ KiB: agrees`,
		`\n  [1-9]\d* slab caches; largest by bytes in use:`,
		`\n    kmalloc-\d+\s+[1-9]\d*\s+`)
}

// TestGDBBreakAndTrace runs kbox under GDB: kbox-break-syscall, given
// before run, arranges KBOX_GDB=1 itself and stops at the guest's open of
// /etc/passwd, with its pid and number; kbox-syscall-trace
// then follows its openat of /etc from dispatch through LKL to the answer
// (a virtual fd, as the guest reports it).
func TestGDBBreakAndTrace(t *testing.T) {
	gdb := gdbPath(t)
	img := imagePath(t)
	args := gdbHelpers(
		"kbox-break-syscall open", // before run: the helper sets KBOX_GDB=1
		"run",
		"delete",
		"kbox-syscall-trace openat",
		"continue",
		"kill",
	)
	args = append(args, "--args", kboxBin(t), "image", "--syscall-mode=seccomp", "--read-only", "-S", img, "--", "/opt/tests/gdbwait", "0")
	out := runDebugger(t, "", gdb, args...)
	if testing.Verbose() {
		t.Logf("gdb output:\n%s", out)
	}
	m := regexp.MustCompile(`kbox: guest pid (\d+) calls open \(nr 2\)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("kbox-break-syscall did not stop at open:\n%s", lastLines(out, 40))
	}
	wantMatch(t, out, "kbox-break-syscall",
		`kbox: kbox has not started: KBOX_GDB=1 set in its environment\n`,
		`kbox_gdb_dispatch \(pid=`+m[1]+`, nr=2\) at mirror.c`)
	wantMatch(t, out, "kbox-syscall-trace",
		`\[kbox-trace\] dispatch   pid `+m[1]+` openat \(nr 257\)`,
		`\[kbox-trace\]   LKL      lkl_syscall\(56\) -> sys_openat\n`,
		`\[kbox-trace\]   kernel   do_sys_openat2\(dfd -100, '/etc'\)\n`,
		`\[kbox-trace\]   path     '/etc' -> image /etc\n`,
		`\[kbox-trace\] answered   openat = 1024\n`)
}

// TestGDBAttachWithoutFlag attaches to a kbox started without KBOX_GDB:
// the state commands say the mirror is off, kbox-break-syscall turns the
// dispatch hook on from GDB and stops at the guest's next openat.
func TestGDBAttachWithoutFlag(t *testing.T) {
	gdb := gdbPath(t)
	cmd := exec.Command(kboxBin(t), "image", "--syscall-mode=seccomp", "--read-only", "-S", imagePath(t), "--", "/bin/sh", "-c",
		"echo started; i=0; while [ $i -lt 600 ]; do cat /etc/hostname >/dev/null; sleep 0.1; i=$((i+1)); done")
	cmd.Env = os.Environ()
	for i, kv := range cmd.Env {
		if strings.HasPrefix(kv, "KBOX_GDB=") {
			cmd.Env[i] = "KBOX_GDB=0"
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if l, _ := bufio.NewReader(out).ReadString('\n'); l != "started\n" {
		t.Fatalf("guest said %q", l)
	}
	res := runDebugger(t, "", gdb, append(gdbHelpers("kbox-fdtable", "kbox-break-syscall openat", "continue",
		"print kbox_gdb_enabled", "set var kbox_gdb_enabled = 0", "delete"), "-p", strconv.Itoa(cmd.Process.Pid))...)
	if testing.Verbose() {
		t.Logf("gdb output:\n%s", res)
	}
	wantMatch(t, res, "without KBOX_GDB",
		`kbox-fdtable: cannot on this build: the debug mirror is off: start kbox with KBOX_GDB=1\n`,
		`kbox: dispatch hook turned on \(kbox_gdb_enabled = 1\)`,
		`kbox: guest pid \d+ calls openat \(nr 257\)\n`,
		`kbox_gdb_dispatch \(pid=\d+, nr=257\) at mirror.c`,
		`\$1 = 1\n`)
	if !alive(cmd.Process.Pid) {
		t.Errorf("kbox did not survive GDB's detach")
	}
}

// dlvPath returns dlv (KBOX_DLV, PATH, or GOPATH/bin), or skips loudly.
func dlvPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KBOX_DLV"); p != "" {
		return p
	}
	if p, err := exec.LookPath("dlv"); err == nil {
		return p
	}
	if b, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(b)), "bin", "dlv")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("SKIP (needs dlv): go install github.com/go-delve/delve/cmd/dlv@v1.27.2, or set KBOX_DLV")
	return ""
}

// TestDelveHelpers attaches Delve to the same kind of kbox and runs
// kbox.star's commands: the process map, fd table, shadow cache and stat
// cache must show the guest's process and files.
func TestDelveHelpers(t *testing.T) {
	dlv := dlvPath(t)
	w := startWaitingGuest(t)
	init := filepath.Join(t.TempDir(), "init")
	os.WriteFile(init, []byte("source "+filepath.Join(repoRoot(), "scripts", "dlv", "kbox.star")+"\nkbox_all\n"), 0o644)
	// After the init file, the prompt reads stdin: leave, keeping kbox.
	// Delve gives up when a thread exits while it attaches ("could not
	// attach to new thread"): kbox's threads come and go; try again.
	var out string
	for try := 0; try < 3; try++ {
		out = runDebugger(t, "exit\nn\n", dlv, "attach", strconv.Itoa(w.kbox), "--init", init, "--allow-non-terminal-interactive=true")
		if !strings.Contains(out, "could not attach") {
			break
		}
		t.Logf("dlv attach, try %d: %s", try+1, lastLines(out, 1))
	}
	if testing.Verbose() {
		t.Logf("dlv output:\n%s", out)
	}
	g := strconv.Itoa(w.guest)
	wantMatch(t, out, "kbox_procs",
		`1 guest processes \(root `+g+`, keeper \d+\)`,
		`pid `+g+`\s+vfds 1\s+cwd /\s+exe /opt/tests/gdbwait`)
	wantMatch(t, out, "kbox_fds",
		`guest pid `+g+` \(virtual fds from 1024, at most \d+\)`,
		`\n\s+`+w.dir+`  lkl\s+lkl \d+\s+host -1\s+refs 1  /etc  flags \d+`)
	wantMatch(t, out, "kbox_shadows",
		`[1-9]\d* shadow nodes`,
		`lkl \d+\s+content fd \d+\s+host \d+:\d+ ro  /etc/passwd\n`)
	// gdbwait's opens and stat change nothing: its stat is live.
	wantMatch(t, out, "kbox_statcache", `stat cache: generation \d+, [1-9]\d* of 4096 slots live`)
	if !alive(w.kbox) {
		t.Errorf("kbox did not survive Delve's detach")
	}
}
