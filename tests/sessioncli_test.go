//go:build lkl

package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `kbox session` (cmd/kbox/session.go): kbox mcp's live sessions as CLI
// verbs, for scripts (docs/agents.md, "kbox session").

// sessionCLI runs `kbox session ARGS...` with stdin and checks its exit
// status; it returns stdout and stderr.
func sessionCLI(t *testing.T, stdin string, want int, args ...string) (string, string) {
	t.Helper()
	out, errOut, status := runKboxEnv(t, kboxEnv{stdin: stdin}, append([]string{"session"}, args...)...)
	if status != want {
		t.Fatalf("kbox session %q: status %d, want %d\nstdout: %s\nstderr: %s", args, status, want, out, errOut)
	}
	return out, errOut
}

// sessionPid is the pid of DIR's session kbox, from DIR/session.json.
func sessionPid(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "session.json"))
	if err != nil {
		t.Fatalf("session.json: %v", err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal(b, &info); err != nil || info.Pid <= 0 {
		t.Fatalf("session.json %s: %v", b, err)
	}
	return info.Pid
}

// hostProcGone says whether pid has ended (gone, or a zombie).
func hostProcGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// pidEnds waits a while for pid to end.
func pidEnds(pid int) bool {
	for range 200 {
		if hostProcGone(pid) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// sessionSleeper is the host pid of the session's `sleep 1000`, from
// kbox session ps.
func sessionSleeper(t *testing.T, dir string) int {
	t.Helper()
	out, _ := sessionCLI(t, "", 0, "ps", dir)
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[2] == "sleep" {
			pid, _ := strconv.Atoi(f[0])
			if b, err := os.ReadFile("/proc/" + f[0] + "/cmdline"); err == nil && strings.Contains(string(b), "1000") {
				return pid
			}
		}
	}
	t.Fatalf("no sleep 1000 in kbox session ps:\n%s", out)
	return 0
}

// closeOnFailure closes the session in dir at the test's end when the
// test left it open.
func closeOnFailure(t *testing.T, dir string) {
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(dir, "session.json")); err == nil {
			exec.Command(kboxBin(t), "session", "close", dir).Run()
		}
	})
}

// TestSessionCLI: open; a run's write and background process; checkpoint,
// write more, fork, roll back (the first content is back, the process is
// gone); the fork diverges; close leaves no process, the base image as it
// was, and a clean saved image.
func TestSessionCLI(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	top := t.TempDir()
	dir, fork := filepath.Join(top, "s"), filepath.Join(top, "f")
	closeOnFailure(t, dir)
	closeOnFailure(t, fork)

	if out, errOut := sessionCLI(t, "", 0, "open", "-S", img, dir, "--env", "GREETING=hi"); out != "" || errOut != "" {
		t.Errorf("open printed %q %q", out, errOut)
	}
	kboxPid := sessionPid(t, dir)
	if _, errOut := sessionCLI(t, "", 125, "open", "-S", img, dir); !strings.Contains(errOut, "live session") {
		t.Errorf("open on a live session: %s", errOut)
	}

	// The program has the caller's stdin, stdout and stderr, the session's
	// environment, and its status is the command's.
	if out, errOut := sessionCLI(t, "from-stdin", 0, "run", dir, "--", "sh", "-c", "cat; echo \" $GREETING\"; echo err >&2"); out != "from-stdin hi\n" || errOut != "err\n" {
		t.Errorf("run: stdout %q stderr %q", out, errOut)
	}
	if out, _ := sessionCLI(t, "", 0, "run", dir, "-w", "/etc", "--env", "GREETING=yo", "--", "sh", "-c", "echo $PWD $GREETING"); out != "/etc yo\n" {
		t.Errorf("run -w /etc --env: %q", out)
	}
	sessionCLI(t, "", 7, "run", dir, "--", "sh", "-c", "exit 7")
	sessionCLI(t, "", 143, "run", dir, "--", "sh", "-c", "kill -TERM $$")
	sessionCLI(t, "", 127, "run", dir, "--", "no-such-program")

	sessionCLI(t, "", 0, "run", dir, "--", "sh", "-c", "echo a > /root/f; sleep 1000 >/dev/null 2>&1 &")
	sleeper := sessionSleeper(t, dir)
	sessionCLI(t, "", 0, "checkpoint", dir, "c1")
	sessionCLI(t, "", 0, "run", dir, "--", "sh", "-c", "echo b > /root/f")
	sessionCLI(t, "", 0, "fork", dir, fork)

	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"checkpoint", dir, "c1"}, 125, `checkpoint "c1" exists`},
		{[]string{"checkpoint", dir, "../x"}, 2, "want letters"},
		{[]string{"checkpoint", dir, ".x"}, 2, "want letters"},
		{[]string{"rollback", dir, "nope"}, 125, `no checkpoint "nope"`},
		{[]string{"rollback", dir, "a/b"}, 2, "want letters"},
		{[]string{"fork", dir, fork}, 125, "exists"},
		{[]string{"run", filepath.Join(top, "nope"), "--", "true"}, 125, "no session in"},
		{[]string{"run", top, "--", "true"}, 125, "no session in"},
		{[]string{"run", dir, "-w", "etc", "--", "true"}, 2, "absolute"},
		{[]string{"run", dir}, 2, "usage"},
		{[]string{"checkpoint", dir}, 2, "usage"},
		{[]string{"frobnicate", dir}, 2, "unknown verb"},
		{[]string{"open", "-S", img}, 2, "usage"},
		{[]string{"open", "-S", img, top}, 125, "not empty"},
		{[]string{"close", dir, "--save", img}, 125, "exists"},
	} {
		out, errOut, status := runKbox(t, append([]string{"session"}, c.args...)...)
		if status != c.status || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || out != "" {
			t.Errorf("kbox session %q: status %d, stdout %q, stderr %q; want %d and one line with %q", c.args, status, out, errOut, c.status, c.want)
		}
	}

	start := time.Now()
	sessionCLI(t, "", 0, "rollback", dir, "c1")
	t.Logf("rollback: %v", time.Since(start))
	if out, _ := sessionCLI(t, "", 0, "run", dir, "--", "sh", "-c", "cat /root/f; pidof sleep || echo no-sleep"); out != "a\nno-sleep\n" {
		t.Errorf("after the rollback: %q", out)
	}
	if !pidEnds(sleeper) {
		t.Errorf("the session's sleep (host pid %d) outlived the rollback", sleeper)
	}
	if !pidEnds(kboxPid) {
		t.Errorf("the session's first kbox (pid %d) outlived the rollback", kboxPid)
	}

	// The fork started from b; the two now diverge.
	if out, _ := sessionCLI(t, "", 0, "run", fork, "--", "sh", "-c", "cat /root/f; pidof sleep || echo no-sleep; echo fork > /root/f"); out != "b\nno-sleep\n" {
		t.Errorf("the fork: %q", out)
	}
	sessionCLI(t, "", 0, "run", dir, "--", "sh", "-c", "echo source > /root/g")
	if out, _ := sessionCLI(t, "", 0, "run", dir, "--", "sh", "-c", "cat /root/f /root/g"); out != "a\nsource\n" {
		t.Errorf("the source after the fork wrote: %q", out)
	}
	if out, _ := sessionCLI(t, "", 0, "run", fork, "--", "sh", "-c", "cat /root/f; cat /root/g 2>/dev/null || echo no-g"); out != "fork\nno-g\n" {
		t.Errorf("the fork after the source wrote: %q", out)
	}

	// close: no process left, the directory gone, the base unchanged.
	pids := []int{sessionPid(t, dir), sessionPid(t, fork)}
	sessionCLI(t, "", 0, "run", fork, "--", "sh", "-c", "sleep 1000 >/dev/null 2>&1 &")
	pids = append(pids, sessionSleeper(t, fork))
	saved := filepath.Join(top, "saved.ext4")
	sessionCLI(t, "", 0, "close", dir, "--save", saved)
	sessionCLI(t, "", 0, "close", fork)
	for _, pid := range pids {
		if !hostProcGone(pid) {
			t.Errorf("pid %d runs after close", pid)
		}
	}
	for _, d := range []string{dir, fork} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s after close: %v", d, err)
		}
	}
	if fileSum(t, img) != before {
		t.Errorf("the base image changed")
	}
	assertCleanImage(t, saved)
	for path, want := range map[string]string{"/root/f": "a\n", "/root/g": "source\n"} {
		if got, ok := debugfsCat(t, saved, path); !ok || got != want {
			t.Errorf("the saved image's %s: %q %v, want %q", path, got, ok, want)
		}
	}
	if _, errOut := sessionCLI(t, "", 125, "run", dir, "--", "true"); !strings.Contains(errOut, "no session in") {
		t.Errorf("run after close: %s", errOut)
	}
}

// TestSessionCLIKilled: a session whose kbox was SIGKILLed says so
// (status 125) to every verb that needs its kernel, refuses to save its
// incomplete image, can be rolled back to a checkpoint, and can be closed.
func TestSessionCLIKilled(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	dir := filepath.Join(t.TempDir(), "s")
	closeOnFailure(t, dir)
	sessionCLI(t, "", 0, "open", "-S", img, dir)
	sessionCLI(t, "", 0, "run", dir, "--", "sh", "-c", "echo kept > /root/k")
	sessionCLI(t, "", 0, "checkpoint", dir, "k1")
	sessionCLI(t, "", 0, "run", dir, "--", "sh", "-c", "echo lost > /root/k; sleep 1000 >/dev/null 2>&1 &")
	sleeper := sessionSleeper(t, dir)
	pid := sessionPid(t, dir)
	syscall.Kill(pid, syscall.SIGKILL)
	if !pidEnds(pid) {
		t.Fatalf("kbox %d survived SIGKILL", pid)
	}
	if !pidEnds(sleeper) {
		t.Errorf("the session's sleep (host pid %d) outlived its kbox", sleeper)
	}
	for _, args := range [][]string{
		{"run", dir, "--", "true"},
		{"ps", dir},
		{"checkpoint", dir, "k2"},
		{"fork", dir, dir + "-fork"},
	} {
		if _, errOut := sessionCLI(t, "", 125, args...); !strings.Contains(errOut, "has ended") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("kbox session %q on a killed session: %s", args, errOut)
		}
	}
	if _, errOut := sessionCLI(t, "", 125, "open", "-S", img, dir); !strings.Contains(errOut, "has ended") {
		t.Errorf("open on a killed session: %s", errOut)
	}
	saved := filepath.Join(t.TempDir(), "saved.ext4")
	if _, errOut := sessionCLI(t, "", 125, "close", dir, "--save", saved); !strings.Contains(errOut, "incomplete") {
		t.Errorf("close --save of a killed session: %s", errOut)
	}
	if _, err := os.Stat(saved); err == nil {
		t.Errorf("close --save of a killed session wrote %s", saved)
	}

	// Its checkpoint is whole: a rollback brings the session back.
	sessionCLI(t, "", 0, "rollback", dir, "k1")
	if out, _ := sessionCLI(t, "", 0, "run", dir, "--", "cat", "/root/k"); out != "kept\n" {
		t.Errorf("after rolling the killed session back: %q", out)
	}

	// Killed again, it closes without a save: nothing is left.
	pid = sessionPid(t, dir)
	syscall.Kill(pid, syscall.SIGKILL)
	pidEnds(pid)
	sessionCLI(t, "", 0, "close", dir)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s after close: %v", dir, err)
	}
	if fileSum(t, img) != before {
		t.Errorf("the base image changed")
	}
}
