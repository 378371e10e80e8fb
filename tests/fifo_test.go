//go:build lkl

package tests

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFIFO: a FIFO of the image between guest processes behaves as on Linux
// (package fifo, dispatch/sys_file_dev.go). Before host FIFOs, the first blocking
// open of a FIFO stalled kbox's serving loop, and with it every guest.
func TestFIFO(t *testing.T) {
	img := copyImage(t, imagePath(t))
	bash := func(script string) []string { return []string{"--", "/bin/bash", "-c", script} }
	busybox := func(script string) []string { return []string{"--", "/bin/busybox", "sh", "-c", script} }
	const pair = "mkfifo /tmp/p && { (echo hello > /tmp/p) & cat /tmp/p; wait; }"
	const rw = "mkfifo /tmp/p && exec 3<>/tmp/p && echo through-rw >&3 && read x <&3 && echo got $x"
	runCases(t, []string{"image", "-S", img}, []guestCase{
		{"bash: writer in the background, cat reads", bash(pair), 0, []string{"hello\n"}, nil},
		{"busybox sh: writer in the background, cat reads", busybox(pair), 0, []string{"hello\n"}, nil},
		{"the reader opens first", bash("mkfifo /tmp/p && { cat /tmp/p & sleep 0.2; echo second > /tmp/p; wait; }"),
			0, []string{"second\n"}, nil},
		{"the writer opens first", bash("mkfifo /tmp/p && { (echo first > /tmp/p) & sleep 0.2; cat /tmp/p; wait; }"),
			0, []string{"first\n"}, nil},
		{"bash: exec 3<> never blocks", bash(rw), 0, []string{"got through-rw\n"}, nil},
		{"busybox sh: exec 3<> never blocks", busybox(rw), 0, []string{"got through-rw\n"}, nil},
		{"EOF when the writer closes", bash("mkfifo /tmp/p && { (for i in 1 2 3; do echo $i; done > /tmp/p) & " +
			"n=0; while read l; do n=$((n+l)); done < /tmp/p; echo sum=$n; wait; }"), 0, []string{"sum=6\n"}, nil},
		{"a reader that waits can be ended, and the next one waits for a writer", bash("mkfifo /tmp/p && " +
			"{ timeout 0.3 cat /tmp/p; echo status=$?; (sleep 0.2; echo after > /tmp/p) & cat /tmp/p; wait; }"),
			0, []string{"status=124\n", "after\n"}, nil},
		{"many rounds", bash("mkfifo /tmp/p && s=0 && for i in $(seq 200); do (echo $i > /tmp/p) & read x < /tmp/p; " +
			"s=$((s+x)); wait; done; echo sum=$s"), 0, []string{"sum=20100\n"}, nil},
		{"the guest exits while a FIFO open waits", bash("mkfifo /tmp/p && { cat /tmp/p & exit 3; }"), 3, nil, nil},
		{"executing a FIFO fails, it does not wait", bash("mkfifo /tmp/p && { /tmp/p; echo status=$?; }"),
			0, []string{"status=126\n"}, nil},
		{"open flags, blocking opens, EOF, EPIPE (tmpfs)", []string{"--", "/opt/tests/fifo", "/tmp/t.fifo"}, 0, []string{"fifo ok\n"}, []string{"FAIL"}},
		{"open flags, blocking opens, EOF, EPIPE (ext4)", []string{"--", "/opt/tests/fifo", "/root/t.fifo"}, 0, []string{"fifo ok\n"}, []string{"FAIL"}},
		{"a FIFO made in the image", bash("mkfifo /root/kept.fifo && stat -c %F /root/kept.fifo"), 0, []string{"fifo\n"}, nil},
	})
	// It is an inode of the image, left after the run.
	out, err := exec.Command("debugfs", "-R", "stat /root/kept.fifo", img).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Type: FIFO") {
		t.Errorf("the image has no FIFO /root/kept.fifo: %v\n%s", err, out)
	}
	const use = "test -p /root/kept.fifo && { (echo again > /root/kept.fifo) & cat /root/kept.fifo; wait; }"
	runCases(t, []string{"image", "-S", img}, []guestCase{
		{"a later run uses it, read-only", append([]string{"--read-only"}, bash(use)...), 0, []string{"again\n"}, nil},
		{"a later run uses it and removes it", bash(use + " && rm /root/kept.fifo"), 0, []string{"again\n"}, nil},
	})
	assertCleanImage(t, img)
}

// startFIFOWait starts kbox with a guest whose first process and a
// background one both wait in opens of FIFOs, and returns kbox and their
// pids.
func startFIFOWait(t *testing.T, ctx context.Context, img string) (*exec.Cmd, int, int) {
	t.Helper()
	return startPair(t, ctx, img, "mkfifo /tmp/p /tmp/q; /bin/cat /tmp/p & echo $$ $!; exec /bin/cat /tmp/q")
}

// TestFIFOWaitInterrupted: a guest killed while it waits in FIFO opens ends
// the run as any guest death does: kbox exits with the guest's status and
// no guest process survives. Before host FIFOs, kbox itself was stuck in
// LKL's open.
func TestFIFOWaitInterrupted(t *testing.T) {
	img := imagePath(t)
	for _, c := range []struct {
		name   string
		kill   func(cmd *exec.Cmd, first int)
		status int
	}{
		{"guest killed by SIGKILL", func(_ *exec.Cmd, first int) { syscall.Kill(first, syscall.SIGKILL) }, 137},
		{"Ctrl-C", func(cmd *exec.Cmd, _ int) { cmd.Process.Signal(syscall.SIGINT) }, 130},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd, first, bg := startFIFOWait(t, ctx, img)
			c.kill(cmd, first)
			err := cmd.Wait()
			if ctx.Err() != nil {
				t.Fatalf("kbox did not exit")
			}
			if st := exitStatus(err); st != c.status {
				t.Errorf("kbox status %d, want %d", st, c.status)
			}
			waitGone(t, "guest waiting in a FIFO open", first, bg)
		})
	}
}

// TestFIFOInBind: a FIFO in a bind (-b) is the host's own, which guests
// and host processes both open; a blocking open of it waits as on Linux
// without stalling kbox (dispatch/hostfifo.go). Before, kbox made the open
// itself on its serving thread: the other end's opener was never served
// (sed's test suite: `printf a > f &` hung every guest), and kbox hung
// after the guest's end, SIGTERM or not.
func TestFIFOInBind(t *testing.T) {
	img := imagePath(t)
	dir := t.TempDir()
	if native := nativeGuest(t, "fifo"); native != "" {
		if out, err := exec.Command(native, dir+"/native.fifo").CombinedOutput(); err != nil || string(out) != "fifo ok\n" {
			t.Fatalf("natively: %v\n%s", err, out)
		}
	}
	sh := func(script string) []string { return []string{"--", "/bin/sh", "-c", script} }
	runCases(t, []string{"image", "-S", img, "--read-only", "-b", dir + ":/mnt"}, []guestCase{
		{"open flags, blocking opens, EOF, EPIPE, signals", []string{"--", "/opt/tests/fifo", "/mnt/t.fifo"}, 0,
			[]string{"fifo ok\n"}, []string{"FAIL"}},
		{"writer in the background, cat reads", sh("cd /mnt && mkfifo p && { echo hello > p & cat p; wait; }"), 0,
			[]string{"hello\n"}, nil},
		// bash: busybox's ash handles SIGCHLD without SA_RESTART, and
		// its notified calls may then fail with EINTR (docs/tiers.md,
		// "Signals and notified calls").
		{"many rounds", []string{"--", "/bin/bash", "-c", "cd /mnt && rm -f p && mkfifo p && s=0 && for i in $(seq 100); do (echo $i > p) & read x < p; " +
			"s=$((s+x)); wait; done; echo sum=$s"}, 0, []string{"sum=5050\n"}, nil},
		{"a writer that waits on when the guest ends", sh("cd /mnt && rm -f p && mkfifo p && { printf a > p & sleep 0.2; echo served; exit 3; }"), 3,
			[]string{"served\n"}, nil},
	})
	// Host processes at the other end, in each tier.
	for _, tier := range []string{"seccomp", "trap", "rewrite"} {
		t.Run(tier, func(t *testing.T) {
			p := dir + "/h-" + tier
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"image", "-S", img, "--read-only", "-b", dir + ":/mnt", "--syscall-mode=" + tier, "--trusted", "--"}
			writer := exec.Command("/bin/sh", "-c", "sleep 0.3; echo from-host > "+p)
			if err := writer.Start(); err != nil {
				t.Fatal(err)
			}
			out, stderr, st := runKbox(t, append(args, "/bin/cat", "/mnt/h-"+tier)...)
			writer.Wait()
			if st != 0 || out != "from-host\n" {
				t.Errorf("guest reader: status %d, stdout %q\nstderr: %s", st, out, stderr)
			}
			reader := exec.Command("/bin/cat", p)
			var got strings.Builder
			reader.Stdout = &got
			if err := reader.Start(); err != nil {
				t.Fatal(err)
			}
			_, stderr, st = runKbox(t, append(args, "/bin/sh", "-c", "echo to-host > /mnt/h-"+tier)...)
			reader.Wait()
			if st != 0 || got.String() != "to-host\n" {
				t.Errorf("guest writer: status %d, host read %q\nstderr: %s", st, got.String(), stderr)
			}
		})
	}
}
