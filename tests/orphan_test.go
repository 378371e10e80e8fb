//go:build lkl

package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("%s: process %d still alive", what, pid)
				syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// startTree starts kbox with a guest shell that leaves a background
// process, and returns kbox, the shell's pid and the background pid.
func startTree(t *testing.T, img string) (*exec.Cmd, int, int) {
	t.Helper()
	return startPair(t, context.Background(), img, "/bin/sleep 300 & echo $$ $!; wait")
}

// startPair starts kbox on a read-only image with /bin/sh -c script, where
// the script prints two guest pids on its first line ($$ and $! of a
// background process) and then keeps both busy. It waits until both have
// settled (sleeping or waiting in a syscall) and fails the test unless
// both are alive then.
func startPair(t *testing.T, ctx context.Context, img, script string) (*exec.Cmd, int, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, kboxBin(t), "image", "-S", img, "--read-only", "--", "/bin/sh", "-c", script)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("guest printed %q: %v\nstderr: %s", line, err, &stderr)
	}
	first, _ := strconv.Atoi(f[0])
	bg, _ := strconv.Atoi(f[1])
	time.Sleep(500 * time.Millisecond)
	if !alive(first) || !alive(bg) {
		firstAlive, bgAlive := alive(first), alive(bg)
		cmd.Process.Kill()
		err := cmd.Wait()
		t.Fatalf("guest processes not running: %d alive=%v, %d alive=%v; kbox: %v\nstderr: %s", first, firstAlive, bg, bgAlive, err, &stderr)
	}
	return cmd, first, bg
}

func exitStatus(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
			return -int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return -1000
	}
	return 0
}

// TestNoOrphans: whichever way a run ends, no guest process outlives kbox.
func TestNoOrphans(t *testing.T) {
	img := imagePath(t)

	t.Run("guest killed by SIGKILL", func(t *testing.T) {
		cmd, sh, bg := startTree(t, img)
		syscall.Kill(sh, syscall.SIGKILL)
		if st := exitStatus(cmd.Wait()); st != 137 {
			t.Errorf("kbox status %d, want 137", st)
		}
		waitGone(t, "background process of a killed guest", bg)
	})

	t.Run("Ctrl-C", func(t *testing.T) {
		cmd, sh, bg := startTree(t, img)
		cmd.Process.Signal(syscall.SIGINT)
		if st := exitStatus(cmd.Wait()); st != 130 {
			t.Errorf("kbox status %d, want 130", st)
		}
		waitGone(t, "guest after Ctrl-C", sh, bg)
	})

	t.Run("kbox killed by SIGKILL", func(t *testing.T) {
		cmd, sh, bg := startTree(t, img)
		cmd.Process.Kill()
		if st := exitStatus(cmd.Wait()); st != -int(syscall.SIGKILL) {
			t.Errorf("kbox status %d, want killed", st)
		}
		waitGone(t, "guest of a SIGKILLed kbox", sh, bg)
	})

	// A guest that takes a while to die (768 MiB to free at its exit):
	// its child reparents to the keeper only then, and must still be
	// killed. The keeper used to give up after 1000 rounds without
	// waiting, before the guest was gone.
	t.Run("kbox killed by SIGKILL, its guest slow to die", func(t *testing.T) {
		slow := copyImage(t, img)
		installGuest(t, slow, "slowexit")
		cmd, guest, child := startPair(t, context.Background(), slow, "exec /slowexit 768")
		cmd.Process.Kill()
		if st := exitStatus(cmd.Wait()); st != -int(syscall.SIGKILL) {
			t.Errorf("kbox status %d, want killed", st)
		}
		waitGone(t, "slow guest of a SIGKILLed kbox", guest, child)
	})
}
