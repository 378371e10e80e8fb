package tests

import (
	"bufio"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kboxProc is a kbox the test started and talks to while it runs: its
// stdout line by line, its stdin, its end. Every test that keeps kbox
// running while it acts starts it with startKbox; runKbox is for a run
// the test only waits for.
type kboxProc struct {
	t     testing.TB
	args  []string
	cmd   *exec.Cmd
	Stdin io.WriteCloser

	mu     sync.Mutex
	stdout strings.Builder
	stderr strings.Builder
	lines  []string      // stdout's lines so far
	next   int           // the next line Line returns
	eof    bool          // stdout has ended
	more   chan struct{} // a line came, or stdout ended

	done chan struct{} // closed when kbox has ended
	ws   syscall.WaitStatus
	err  error
}

// lockedWriter appends to a builder under the process's lock.
type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// startKbox starts kbox with args. The test's end kills it if it still
// runs, so no kbox outlives its test.
func startKbox(t testing.TB, args ...string) *kboxProc {
	t.Helper()
	k := &kboxProc{t: t, args: args, cmd: exec.Command(kboxBin(t), args...), more: make(chan struct{}, 1), done: make(chan struct{})}
	k.cmd.Stderr = lockedWriter{&k.mu, &k.stderr}
	in, err := k.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	k.Stdin = in
	if err := k.cmd.Start(); err != nil {
		t.Fatalf("start kbox %q: %v", args, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			k.mu.Lock()
			k.stdout.WriteString(sc.Text() + "\n")
			k.lines = append(k.lines, sc.Text())
			k.mu.Unlock()
			k.wake()
		}
		k.mu.Lock()
		k.eof = true
		k.mu.Unlock()
		k.wake()
		k.err = k.cmd.Wait()
		if k.cmd.ProcessState != nil {
			k.ws = k.cmd.ProcessState.Sys().(syscall.WaitStatus)
		}
		close(k.done)
	}()
	t.Cleanup(func() {
		select {
		case <-k.done:
		default:
			k.cmd.Process.Kill()
			<-k.done
		}
	})
	return k
}

// Pid is kbox's pid.
func (k *kboxProc) Pid() int { return k.cmd.Process.Pid }

// Stdout is what kbox printed on stdout so far.
func (k *kboxProc) Stdout() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stdout.String()
}

// Stderr is what kbox printed on stderr so far.
func (k *kboxProc) Stderr() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stderr.String()
}

func (k *kboxProc) wake() {
	select {
	case k.more <- struct{}{}:
	default:
	}
}

// Line returns kbox's next line of stdout; the test fails when none comes
// within kboxTimeout, or kbox ends first.
func (k *kboxProc) Line() string {
	k.t.Helper()
	l, ok := k.Next()
	if !ok {
		k.t.Fatalf("kbox %q ended before the line the test waited for\nstdout: %s\nstderr: %s", k.args, lastLines(k.Stdout(), 20), lastLines(k.Stderr(), 20))
	}
	return l
}

// Next returns kbox's next line of stdout, or false once stdout has ended;
// the test fails when neither comes within kboxTimeout.
func (k *kboxProc) Next() (string, bool) {
	k.t.Helper()
	deadline := time.After(kboxTimeout)
	for {
		k.mu.Lock()
		l, have, eof := "", k.next < len(k.lines), k.eof
		if have {
			l = k.lines[k.next]
			k.next++
		}
		k.mu.Unlock()
		switch {
		case have:
			return l, true
		case eof:
			return "", false
		}
		select {
		case <-k.more:
		case <-deadline:
			k.t.Fatalf("kbox %q printed no line within %v\nstdout: %s\nstderr: %s", k.args, kboxTimeout, lastLines(k.Stdout(), 20), lastLines(k.Stderr(), 20))
		}
	}
}

// Await reads lines until one contains s, and returns it.
func (k *kboxProc) Await(s string) string {
	k.t.Helper()
	for {
		if l := k.Line(); strings.Contains(l, s) {
			return l
		}
	}
}

// Wait waits (within kboxTimeout; then kbox is killed and the test fails)
// for kbox's end and returns its exit status, or 128+N for death by
// signal N, as a shell reports it.
func (k *kboxProc) Wait() int {
	k.t.Helper()
	select {
	case <-k.done:
	case <-time.After(kboxTimeout):
		k.cmd.Process.Kill()
		<-k.done
		k.t.Fatalf("kbox %q did not end within %v: killed\nstdout: %s\nstderr: %s", k.args, kboxTimeout, lastLines(k.Stdout(), 20), lastLines(k.Stderr(), 20))
	}
	var ee *exec.ExitError
	if k.err != nil && !errors.As(k.err, &ee) {
		k.t.Fatalf("kbox %q: %v", k.args, k.err)
	}
	if k.ws.Signaled() {
		return 128 + int(k.ws.Signal())
	}
	return k.ws.ExitStatus()
}

// WaitStatus is how kbox ended (after Wait).
func (k *kboxProc) WaitStatus() syscall.WaitStatus { return k.ws }
