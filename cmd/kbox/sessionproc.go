package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sessiondir"
	"golang.org/x/sys/unix"
)

// The process of a `kbox session` (session.go): started detached, named
// in DIR/session.json, asked on its socket, ended.

// startSessionKbox starts the session's kbox on dir, detached (its own
// session, stdio to DIR/log), records it in DIR/session.json and waits
// until its socket answers.
func startSessionKbox(dir string, info *sessionInfo) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	sock := filepath.Join(abs, sessionSock)
	os.Remove(sock) // a killed kbox's
	args := append([]string{"image", "--syscall-mode=seccomp"}, info.Args...)
	args = append(args, "--overlay", abs, "--serve", sock)
	logf, err := os.OpenFile(filepath.Join(abs, sessionLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd := exec.Command(exe, args...)
	cmd.Dir = info.Cwd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, logf, logf
	cmd.Env = append(os.Environ(), "KBOX_DEBUG=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the session's kbox: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	info.Pid = cmd.Process.Pid
	info.Start, _ = procStart(info.Pid)
	if err := writeSessionInfo(abs, info); err != nil {
		cmd.Process.Kill()
		<-exited
		return err
	}
	deadline := time.Now().Add(sessionStart)
	for {
		// The socket answers once the kernel is up and the spawner
		// serves: a ps before then waits for its accept.
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, _, err := sessiondir.Call(ctx, sock, &ServeRequest{Op: "ps"}, nil, nil)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the session's kbox did not start: %s", lastLogLine(abs))
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("the session's kbox did not start in %v: %s", sessionStart, lastLogLine(abs))
		}
	}
}

func lastLogLine(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, sessionLog))
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "it said nothing (DIR/log)"
	}
	return s
}

func writeSessionInfo(dir string, info *sessionInfo) error {
	b, _ := json.MarshalIndent(info, "", "  ")
	tmp := filepath.Join(dir, sessionState+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, sessionState))
}

// readSessionInfo reads DIR/session.json: an error that says what DIR is
// when it is no session.
func readSessionInfo(dir string) (*sessionInfo, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("no session in %s: %w", dir, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("no session in %s: not a directory", dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, sessionState))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no session in %s (no %s: open one with kbox session open)", dir, sessionState)
	}
	if err != nil {
		return nil, err
	}
	var info sessionInfo
	if err := json.Unmarshal(b, &info); err != nil || info.Pid <= 0 || info.Image == "" {
		return nil, fmt.Errorf("%s: %s is not a session's (%v)", dir, sessionState, err)
	}
	return &info, nil
}

// lockSessionDir takes DIR's lock: one verb at a time changes a session
// (run and ps take none).
func lockSessionDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: lock: %w", dir, err)
	}
	return func() { unix.Close(fd) }, nil
}

// ---- the session's process

// procStart is /proc/PID/stat's starttime, and whether the process is
// running (not a zombie).
func procStart(pid int) (uint64, bool) {
	st, ok := procfs.ReadPidStat(pid)
	return st.Start, ok && st.State != 'Z' && st.State != 'X'
}

// running says whether the session's kbox is still the process info names.
func (info *sessionInfo) running() bool {
	start, ok := procStart(info.Pid)
	return ok && start == info.Start
}

// errSessionEnded says a session's kbox has ended.
func errSessionEnded(dir string, info *sessionInfo) error {
	return fmt.Errorf("the session in %s has no live kernel: its kbox (pid %d) has ended, and its processes with it; close it (kbox session close %s) or roll back to a checkpoint", dir, info.Pid, dir)
}

// sessionAlive returns DIR's session when its kbox runs.
func sessionAlive(dir string) (*sessionInfo, error) {
	info, err := readSessionInfo(dir)
	if err != nil {
		return nil, err
	}
	if !info.running() {
		return nil, errSessionEnded(dir, info)
	}
	return info, nil
}

// call sends req to DIR's session and decodes its answer; a kbox that
// has gone is said so.
func sessionCall(ctx context.Context, dir string, info *sessionInfo, req *ServeRequest, fds []int, onStart func(int)) (*ServeAnswer, error) {
	body, _, err := sessiondir.Call(ctx, filepath.Join(dir, sessionSock), req, fds, onStart)
	var ce *sessiondir.ConnError
	if errors.As(err, &ce) {
		time.Sleep(10 * time.Millisecond) // a kbox that just died is not reaped yet
		if !info.running() {
			return nil, errSessionEnded(dir, info)
		}
		return nil, fmt.Errorf("the session in %s does not answer: %v", dir, ce.Err)
	}
	if err != nil {
		return nil, err
	}
	var a ServeAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("the session's kernel answered badly: %v", err)
	}
	return &a, nil
}

// stopSessionKbox ends the session's kbox: asked to close (its processes
// end, its overlay and map are saved) or, with discard, to end its
// processes and leave the rest to its exit (a rollback: what it wrote
// since its last checkpoint is thrown away), else SIGTERM, then SIGKILL;
// it returns once the process has gone.
func stopSessionKbox(dir string, info *sessionInfo, discard bool) {
	if !info.running() {
		return
	}
	op := "close"
	if discard {
		op = "discard"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := sessionCall(ctx, dir, info, &ServeRequest{Op: op}, nil, nil)
	cancel()
	if err != nil && info.running() {
		unix.Kill(info.Pid, unix.SIGTERM)
	}
	deadline := time.Now().Add(sessionStart)
	for info.running() {
		if time.Now().After(deadline) {
			unix.Kill(info.Pid, unix.SIGKILL)
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// removeSessionDir removes what a session keeps in dir, and dir when it
// made it or it is then empty.
func removeSessionDir(dir string, made bool) {
	for _, f := range []string{sessiondir.Overlay, sessiondir.Dirty, sessiondir.Dirty + ".tmp", sessiondir.Busy,
		sessiondir.Chain, sessiondir.Chain + ".tmp", sessionSock, sessionLog, sessionState, sessionState + ".tmp"} {
		os.Remove(filepath.Join(dir, f))
	}
	os.RemoveAll(filepath.Join(dir, sessiondir.Checkpoints))
	os.RemoveAll(filepath.Join(dir, sessiondir.Layers))
	if made {
		os.RemoveAll(dir)
	} else {
		os.Remove(dir)
	}
}
