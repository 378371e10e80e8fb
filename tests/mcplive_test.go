//go:build lkl

package tests

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A session is one live kernel (docs/agents.md, agent/live.go): what a
// run leaves running or in /tmp is there for the next call.

func openSession(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	var open struct {
		Session string `json:"session"`
	}
	if res := call(t, cs, "session_open", map[string]any{}, &open); res.IsError || open.Session == "" {
		t.Fatalf("session_open: %s", resultText(res))
	}
	return open.Session
}

// runIn runs a shell command in session sid and returns its result.
func runIn(t *testing.T, cs *mcp.ClientSession, sid, command string) runResult {
	t.Helper()
	var r runResult
	if res := call(t, cs, "run", map[string]any{"session": sid, "command": command}, &r); res.IsError {
		t.Fatalf("run %q: %s", command, resultText(res))
	}
	return r
}

func TestMCPLiveSession(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	cs := mcpSession(t, img)
	sid := openSession(t, cs)

	// A process left in the background keeps running, and /tmp is kept.
	start := time.Now()
	r := runIn(t, cs, sid, "echo start > /tmp/f; (sleep 2; echo late >> /tmp/f) >/dev/null 2>&1 &")
	if r.ExitCode != 0 || time.Since(start) > 1900*time.Millisecond {
		t.Fatalf("the run waited for its background process, or failed: %+v in %v", r, time.Since(start))
	}
	if r = runIn(t, cs, sid, "cat /tmp/f"); r.Stdout != "start\n" {
		t.Errorf("/tmp of the last run is gone: %+v", r)
	}

	// A server started by one run answers the next.
	r = runIn(t, cs, sid, "mkdir -p /tmp/www && echo hi-from-httpd > /tmp/www/index.html && busybox httpd -p 127.0.0.1:8081 -h /tmp/www")
	if r.ExitCode != 0 {
		t.Fatalf("httpd: %+v", r)
	}
	if r = runIn(t, cs, sid, "wget -qO- http://127.0.0.1:8081/index.html"); r.Stdout != "hi-from-httpd\n" {
		t.Errorf("the server of the last run does not answer: %+v", r)
	}
	// The first: a child httpd forked for wget's connection may not have
	// exited yet.
	httpd := strings.TrimSpace(runIn(t, cs, sid, "ps -o pid,args | grep '[h]ttpd -p' | head -1 | cut -c1-6").Stdout)

	// The file tools and the runs share one kernel, both ways.
	runIn(t, cs, sid, "echo fresh > /tmp/g")
	if res, rd := readFile(t, cs, map[string]any{"session": sid, "path": "/tmp/g"}); res.IsError || rd.Text != "fresh\n" {
		t.Errorf("read_file after a run: %s %+v", resultText(res), rd)
	}
	if res := call(t, cs, "write_file", map[string]any{"session": sid, "path": "/tmp/h", "content": "from-tool"}, nil); res.IsError {
		t.Fatalf("write_file: %s", resultText(res))
	}
	if r = runIn(t, cs, sid, "cat /tmp/h"); r.Stdout != "from-tool" {
		t.Errorf("a run after write_file: %+v", r)
	}

	// Nothing of kbox in the guest's /proc; a run's parent is 0, as for
	// a process entered into a container.
	r = runIn(t, cs, sid, "for p in /proc/[0-9]*; do cat $p/comm; tr '\\0' ' ' < $p/cmdline; echo; done; cut -d' ' -f4 /proc/self/stat")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	has := func(sub string) bool {
		return slices.ContainsFunc(lines, func(s string) bool { return strings.Contains(s, sub) })
	}
	if has("kbox") || !has("httpd -p 127.0.0.1:8081") || lines[len(lines)-1] != "0" {
		t.Errorf("the session's processes as the guest sees them: %q", lines)
	}

	// A run's signals are at their defaults: yes dies of SIGPIPE.
	if r = runIn(t, cs, sid, "yes | head -1"); r.Stdout != "y\n" || r.ExitCode != 0 {
		t.Errorf("yes | head: %+v", r)
	}
	if res := call(t, cs, "run", map[string]any{"session": sid, "argv": []string{"grep", "SigIgn", "/proc/self/status"}}, &r); res.IsError || r.Stdout != "SigIgn:\t0000000000000000\n" {
		t.Errorf("a run ignores signals: %s %+v", resultText(res), r)
	}

	// A timed-out run is killed; the session goes on.
	var tr runResult
	if res := call(t, cs, "run", map[string]any{"session": sid, "command": "sleep 30", "timeout_ms": 300}, &tr); res.IsError || !tr.TimedOut || tr.ExitCode != 137 {
		t.Errorf("timeout: %s %+v", resultText(res), tr)
	}
	if r = runIn(t, cs, sid, "sleep 2; cat /tmp/f"); r.Stdout != "start\nlate\n" {
		t.Errorf("the background process did not finish its work: %+v", r)
	}

	// Closing the session ends its processes; the image is unchanged.
	if res := call(t, cs, "session_close", map[string]any{"session": sid}, nil); res.IsError {
		t.Fatalf("session_close: %s", resultText(res))
	}
	if pid, err := strconv.Atoi(httpd); err != nil {
		t.Errorf("pidof httpd: %q", httpd)
	} else if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && strings.Contains(string(b), "httpd") {
		t.Errorf("the session's httpd (host pid %d) outlived the session", pid)
	}
	if after := fileSum(t, img); after != before {
		t.Errorf("the base image changed under a session")
	}
}

// TestMCPLiveSessionKilled: a session whose kernel was killed says it is
// lost, leaves nothing running, and the server serves other sessions.
func TestMCPLiveSessionKilled(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	cs := mcpSession(t, img)
	sid := openSession(t, cs)
	runIn(t, cs, sid, "sleep 1000 >/dev/null 2>&1 &")
	sleeper := strings.TrimSpace(runIn(t, cs, sid, "pidof sleep").Stdout)
	serving := serveProcesses(img)
	if len(serving) != 1 {
		t.Fatalf("want one kbox --serve on %s, found %v", img, serving)
	}
	syscall.Kill(serving[0], syscall.SIGKILL)
	var r runResult
	res := call(t, cs, "run", map[string]any{"session": sid, "command": "true"}, &r)
	if !res.IsError || !strings.Contains(resultText(res), "lost") {
		t.Errorf("a run in a killed session: %s %+v", resultText(res), r)
	}
	call(t, cs, "session_close", map[string]any{"session": sid}, nil)
	if res := call(t, cs, "read_file", map[string]any{"session": sid, "path": "/etc/hostname"}, nil); !res.IsError {
		t.Errorf("a closed session still answers")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + sleeper + "/comm")
		if err != nil || strings.TrimSpace(string(b)) != "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the killed session's sleep (host pid %s) is still running", sleeper)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	other := openSession(t, cs)
	if r := runIn(t, cs, other, "echo ok"); r.Stdout != "ok\n" {
		t.Errorf("another session after the kill: %+v", r)
	}
	call(t, cs, "session_close", map[string]any{"session": other}, nil)
	if after := fileSum(t, img); after != before {
		t.Errorf("the base image changed")
	}
}

// serveProcesses returns the host pids of the sessions' kbox --serve
// processes on image img (not the warm pool's, which are --ephemeral).
func serveProcesses(img string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if slices.Contains(args, "--serve") && slices.Contains(args, img) && !slices.Contains(args, "--ephemeral") {
			pid, _ := strconv.Atoi(filepath.Base(d))
			out = append(out, pid)
		}
	}
	return out
}

// TestServeArguments: what kbox image --serve refuses, and why.
func TestServeArguments(t *testing.T) {
	img := imagePath(t)
	base := []string{"image", "-S", img, "--ephemeral"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--serve", "/tmp/x.sock", "--", "/bin/true"}, "--serve runs no command"},
		{[]string{"--serve", "/tmp/x.sock", "--syscall-mode=trap"}, "seccomp tier"},
		{[]string{"--serve", "/tmp/x.sock", "--timeout", "5s"}, "each run has its own"},
		{[]string{"--serve", ""}, "empty --serve"},
	} {
		out, err := exec.Command(kboxBin(t), append(base, c.args...)...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%q: %v %s", c.args, err, out)
		}
	}
}

// TestMCPSessionLimits: --max-sessions refuses a session beyond it, and
// --session-idle closes one no call used, with its kernel.
func TestMCPSessionLimits(t *testing.T) {
	img := copyImage(t, imagePath(t))
	cs := mcpSession(t, img, "--max-sessions", "1", "--session-idle", "1500ms")
	sid := openSession(t, cs)
	if res := call(t, cs, "session_open", map[string]any{}, nil); !res.IsError || !strings.Contains(resultText(res), "the limit") {
		t.Errorf("a second session past --max-sessions 1: %s", resultText(res))
	}
	runIn(t, cs, sid, "sleep 1000 >/dev/null 2>&1 &")
	if len(serveProcesses(img)) != 1 {
		t.Fatalf("no kbox --serve for the session")
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(serveProcesses(img)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(serveProcesses(img)); n > 0 {
		t.Fatalf("the idle session's kernel is still running")
	}
	if res := call(t, cs, "run", map[string]any{"session": sid, "command": "true"}, nil); !res.IsError || !strings.Contains(resultText(res), "no session") && !strings.Contains(resultText(res), "was closed") {
		t.Errorf("an idle-closed session still answers: %s", resultText(res))
	}
	// Its slot is free again.
	openSession(t, cs)
}

// TestMCPBackgroundRun: a background run's handle, its output read by
// offset while it runs, process_list, process_signal and process_wait;
// bad handles and arguments.
func TestMCPBackgroundRun(t *testing.T) {
	cs := mcpSession(t, copyImage(t, imagePath(t)))
	sid := openSession(t, cs)
	var r runResult
	var bg struct {
		Handle string `json:"handle"`
	}
	res := call(t, cs, "run", map[string]any{"session": sid, "background": true,
		"command": "i=0; while [ $i -lt 3 ]; do echo tick$i; echo err$i >&2; i=$((i+1)); sleep 0.2; done; exec sleep 1000"}, &bg)
	if res.IsError || bg.Handle == "" {
		t.Fatalf("background run: %s", resultText(res))
	}
	type output struct {
		Stdout, Stderr string
		StdoutNext     int64 `json:"stdout_next"`
		StderrNext     int64 `json:"stderr_next"`
		Running        bool
		ExitCode       int    `json:"exit_code"`
		Signal         string `json:"signal"`
	}
	var got strings.Builder
	var off, eoff int64
	for i := 0; i < 50 && !strings.Contains(got.String(), "tick2"); i++ {
		var o output
		if res := call(t, cs, "process_output", map[string]any{"session": sid, "handle": bg.Handle, "stdout_offset": off, "stderr_offset": eoff, "wait_ms": 2000}, &o); res.IsError {
			t.Fatalf("process_output: %s", resultText(res))
		}
		got.WriteString(o.Stdout)
		off, eoff = o.StdoutNext, o.StderrNext
		if !o.Running {
			t.Fatalf("the background run ended: %+v", o)
		}
	}
	if got.String() != "tick0\ntick1\ntick2\n" {
		t.Errorf("stdout read by offset: %q", got.String())
	}
	var ps struct {
		Processes []struct {
			Pid  int    `json:"pid"`
			PPid int    `json:"ppid"`
			Args string `json:"args"`
		} `json:"processes"`
	}
	found := false
	for i := 0; i < 50 && !found; i++ {
		if res := call(t, cs, "process_list", map[string]any{"session": sid}, &ps); res.IsError {
			t.Fatalf("process_list: %s", resultText(res))
		}
		for _, p := range ps.Processes {
			found = found || strconv.Itoa(p.Pid) == bg.Handle && p.Args == "sleep 1000"
		}
		time.Sleep(100 * time.Millisecond)
	}
	found = false
	for _, p := range ps.Processes {
		if strconv.Itoa(p.Pid) == bg.Handle && p.PPid == 0 && p.Args == "sleep 1000" {
			found = true
		}
		if strings.Contains(p.Args, "kbox") {
			t.Errorf("process_list shows kbox: %+v", p)
		}
	}
	if !found {
		t.Errorf("process_list lacks the background run %s: %+v", bg.Handle, ps.Processes)
	}
	if res := call(t, cs, "process_signal", map[string]any{"session": sid, "handle": bg.Handle, "signal": "TERM"}, nil); res.IsError {
		t.Fatalf("process_signal: %s", resultText(res))
	}
	var w struct {
		Running  bool   `json:"running"`
		ExitCode int    `json:"exit_code"`
		Signal   string `json:"signal"`
	}
	if res := call(t, cs, "process_wait", map[string]any{"session": sid, "handle": bg.Handle, "timeout_ms": 10000}, &w); res.IsError || w.Running || w.ExitCode != 143 || w.Signal != "SIGTERM" {
		t.Errorf("process_wait after SIGTERM: %s %+v", resultText(res), w)
	}
	var o output
	if res := call(t, cs, "process_output", map[string]any{"session": sid, "handle": bg.Handle}, &o); res.IsError || o.Stderr != "err0\nerr1\nerr2\n" || o.Running {
		t.Errorf("stderr after the end: %s %+v", resultText(res), o)
	}
	// What a run's background process writes to the run's output after
	// the run returned is in the session's log.
	runIn(t, cs, sid, "(sleep 0.5; echo after-the-run) &")
	var lg output
	for i := 0; i < 20 && !strings.Contains(lg.Stdout, "after-the-run"); i++ {
		if res := call(t, cs, "process_output", map[string]any{"session": sid, "handle": "log", "stdout_offset": lg.StdoutNext, "wait_ms": 1000}, &lg); res.IsError {
			t.Fatalf("process_output log: %s", resultText(res))
		}
	}
	if !strings.Contains(lg.Stdout, "after-the-run\n") {
		t.Errorf("the session's log lacks a background process's output: %+v", lg)
	}

	// A foreground run meanwhile is unaffected.
	if r = runIn(t, cs, sid, "echo fg"); r.Stdout != "fg\n" {
		t.Errorf("foreground run: %+v", r)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"process_output", map[string]any{"session": sid, "handle": "1"}, "no background program"},
		{"process_output", map[string]any{"session": sid, "handle": bg.Handle, "wait_ms": 999999}, "wait_ms"},
		{"process_signal", map[string]any{"session": sid, "handle": bg.Handle, "signal": "NOPE"}, "unknown signal"},
		{"process_signal", map[string]any{"session": sid, "handle": bg.Handle}, "has exited"},
		{"process_wait", map[string]any{"session": "nope", "handle": bg.Handle}, "no session"},
		{"run", map[string]any{"background": true, "command": "true"}, "only in a session"},
	} {
		if res := call(t, cs, c.tool, c.args, nil); !res.IsError || !strings.Contains(resultText(res), c.want) {
			t.Errorf("%s %v: %s", c.tool, c.args, resultText(res))
		}
	}
}

// TestMCPCheckpointRollbackFork: write, checkpoint, write more, roll
// back: the first content is back, a process running at the rollback is
// ended, and the image is clean; a fork diverges from its source.
func TestMCPCheckpointRollbackFork(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	snaps := t.TempDir()
	cs := mcpSession(t, img, "--snapshots", snaps)
	sid := openSession(t, cs)
	runIn(t, cs, sid, "echo one > /root/state; mkdir -p /work && echo kept > /work/a")
	if res := call(t, cs, "session_checkpoint", map[string]any{"session": sid, "name": "c1"}, nil); res.IsError {
		t.Fatalf("session_checkpoint: %s", resultText(res))
	}
	runIn(t, cs, sid, "echo two > /root/state; rm /work/a; echo new > /work/b")
	runIn(t, cs, sid, "sleep 1000 >/dev/null 2>&1 &")
	sleeper := strings.TrimSpace(runIn(t, cs, sid, "pidof sleep").Stdout)

	// A fork now starts from "two"; it and its source then diverge.
	var fork struct {
		Session string `json:"session"`
	}
	if res := call(t, cs, "session_fork", map[string]any{"session": sid}, &fork); res.IsError || fork.Session == "" {
		t.Fatalf("session_fork: %s", resultText(res))
	}
	if r := runIn(t, cs, fork.Session, "cat /root/state /work/b; pidof sleep || echo no-sleep"); r.Stdout != "two\nnew\nno-sleep\n" {
		t.Errorf("the fork: %+v", r)
	}
	runIn(t, cs, fork.Session, "echo fork > /root/state")

	if res := call(t, cs, "session_rollback", map[string]any{"session": sid, "name": "c1"}, nil); res.IsError {
		t.Fatalf("session_rollback: %s", resultText(res))
	}
	if r := runIn(t, cs, sid, "cat /root/state /work/a; test -e /work/b && echo b-still-there; pidof sleep || echo no-sleep"); r.Stdout != "one\nkept\nno-sleep\n" {
		t.Errorf("after the rollback: %+v", r)
	}
	if b, err := os.ReadFile("/proc/" + sleeper + "/cmdline"); err == nil && strings.Contains(string(b), "sleep") {
		t.Errorf("a process running at the rollback (host pid %s) is still running", sleeper)
	}
	if r := runIn(t, cs, fork.Session, "cat /root/state"); r.Stdout != "fork\n" {
		t.Errorf("the fork after its source's rollback: %+v", r)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"session_rollback", map[string]any{"session": sid, "name": "nope"}, "no checkpoint"},
		{"session_rollback", map[string]any{"session": sid, "name": "../c1"}, "no checkpoint"},
		{"session_checkpoint", map[string]any{"session": sid, "name": "c1"}, "exists"},
		{"session_checkpoint", map[string]any{"session": sid, "name": "../x"}, "want letters"},
		{"session_fork", map[string]any{"session": "nope"}, "no session"},
	} {
		if res := call(t, cs, c.tool, c.args, nil); !res.IsError || !strings.Contains(resultText(res), c.want) {
			t.Errorf("%s %v: %s", c.tool, c.args, resultText(res))
		}
	}
	// The rolled-back session's image is a clean file system.
	if res := call(t, cs, "session_close", map[string]any{"session": sid, "snapshot": "after"}, nil); res.IsError {
		t.Fatalf("session_close: %s", resultText(res))
	}
	assertCleanImage(t, filepath.Join(snaps, "after.ext4"))
	if out, _ := exec.Command("debugfs", "-R", "cat /root/state", filepath.Join(snaps, "after.ext4")).Output(); string(out) != "one\n" {
		t.Errorf("the snapshot after the rollback has /root/state %q", out)
	}
	call(t, cs, "session_close", map[string]any{"session": fork.Session}, nil)
	if after := fileSum(t, img); after != before {
		t.Errorf("the base image changed")
	}
}

// TestMCPRunProgress: a client that gives a progress token gets a run's
// output as it comes, in a session and on an image.
func TestMCPRunProgress(t *testing.T) {
	type note struct {
		at          time.Time
		msg, stream string
	}
	var mu sync.Mutex
	var notes []note
	c := mcp.NewClient(&mcp.Implementation{Name: "kbox-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			stream, _ := r.Params.Meta["stream"].(string)
			notes = append(notes, note{time.Now(), r.Params.Message, stream})
		}})
	ctx := context.Background()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(kboxBin(t), "mcp", "--image", copyImage(t, imagePath(t)))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	sid := openSession(t, cs)
	for _, where := range []map[string]any{{"session": sid}, {}} {
		mu.Lock()
		notes = nil
		mu.Unlock()
		args := map[string]any{"command": "echo first; echo oops >&2; sleep 2; echo second"}
		for k, v := range where {
			args[k] = v
		}
		params := &mcp.CallToolParams{Name: "run", Arguments: args}
		params.SetProgressToken("tok")
		res, err := cs.CallTool(ctx, params)
		done := time.Now()
		if err != nil || res.IsError {
			t.Fatalf("run %v: %v %v", where, err, res)
		}
		// The server sends every notification before the result, but
		// the SDK's client hands notifications to the handler on a
		// goroutine of their own: the last may land just after
		// CallTool returned.
		var out, errs string
		early := false
		for wait := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			got := notes
			mu.Unlock()
			out, errs, early = "", "", false
			for _, n := range got {
				switch n.stream {
				case "stdout":
					out += n.msg
					if n.msg == "first\n" && done.Sub(n.at) > time.Second {
						early = true
					}
				case "stderr":
					errs += n.msg
				}
			}
			if out == "first\nsecond\n" && errs == "oops\n" || time.Now().After(wait) {
				break
			}
		}
		if out != "first\nsecond\n" || errs != "oops\n" || !early {
			t.Errorf("progress of a run %v: stdout %q stderr %q, first line a second before the end: %v", where, out, errs, early)
		}
	}
}

// TestMCPSessionDefaults: session_open's workdir and env are the runs'
// defaults; a run's own override them.
func TestMCPSessionDefaults(t *testing.T) {
	cs := mcpSession(t, copyImage(t, imagePath(t)))
	var open struct {
		Session string `json:"session"`
	}
	if res := call(t, cs, "session_open", map[string]any{"workdir": "/etc", "env": map[string]string{"FOO": "session"}}, &open); res.IsError {
		t.Fatalf("session_open: %s", resultText(res))
	}
	if r := runIn(t, cs, open.Session, "pwd; echo $FOO"); r.Stdout != "/etc\nsession\n" {
		t.Errorf("the session's defaults: %+v", r)
	}
	var r runResult
	if res := call(t, cs, "run", map[string]any{"session": open.Session, "command": "pwd; echo $FOO", "workdir": "/tmp", "env": map[string]string{"FOO": "run"}}, &r); res.IsError || r.Stdout != "/tmp\nrun\n" {
		t.Errorf("a run's own: %s %+v", resultText(res), r)
	}
	if res := call(t, cs, "session_open", map[string]any{"workdir": "etc"}, nil); !res.IsError || !strings.Contains(resultText(res), "absolute") {
		t.Errorf("a relative workdir: %s", resultText(res))
	}
}
