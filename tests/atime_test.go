//go:build lkl

package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Reads update an image file's access time as on Linux with the image
// mounted relatime: a read of a file not read since its last change
// updates the access time and nothing else (not the change time); a read
// of one read since, less than a day ago, leaves it, in that run or a
// later one. Guests read shadows natively, and kbox carries the host's
// decision to the image (shadowfd propagateAtime), where a fresh shadow's
// change time is not the file's.
func TestAtimeRelatime(t *testing.T) {
	cp := copyImage(t, imagePath(t))
	run := func(script string) []string {
		t.Helper()
		out, stderr, st := runKbox(t, "image", "-S", cp, "--", "/bin/sh", "-c", script)
		if st != 0 {
			t.Fatalf("status %d: %s\n%s", st, out, lastLines(stderr, 5))
		}
		return strings.Fields(out)
	}
	run("echo hi > /root/a")
	time.Sleep(1100 * time.Millisecond)
	// Access and change times before a read, after it, after another.
	f := run("stat -c '%X %Z' /root/a; cat /root/a >/dev/null; stat -c '%X %Z' /root/a; cat /root/a >/dev/null; stat -c '%X %Z' /root/a")
	if len(f) != 6 {
		t.Fatalf("stat: %q", f)
	}
	if f[2] == f[0] || f[4] != f[2] {
		t.Errorf("access times before, after a read, after another: %s %s %s; want the first read to update it, the second not", f[0], f[2], f[4])
	}
	if f[1] != f[3] || f[3] != f[5] {
		t.Errorf("change times before and after reads: %s %s %s; a read leaves it", f[1], f[3], f[5])
	}
	time.Sleep(1100 * time.Millisecond)
	g := run("cat /root/a >/dev/null; stat -c '%X %Z' /root/a")
	if len(g) != 2 || g[0] != f[4] || g[1] != f[5] {
		t.Errorf("access and change times after a read in a later run %q, were %s %s: relatime leaves them", g, f[4], f[5])
	}
	// A read-only mount's reads change no time.
	out, stderr, st := runKbox(t, "image", "-S", cp, "--read-only", "--", "/bin/sh", "-c",
		"stat -c %X /etc/passwd; cat /etc/passwd >/dev/null; stat -c %X /etc/passwd")
	if h := strings.Fields(out); st != 0 || len(h) != 2 || h[0] != h[1] {
		t.Errorf("--read-only: access times before and after a read %q (status %d): a read-only mount keeps them\n%s", h, st, lastLines(stderr, 5))
	}
}

// In the in-process tiers, where kbox sees the guest's close, a read
// gives the image file its access time at the reader's close
// (shadowfd closedRead), as close to Linux's time of the read as a
// native read of the shadow allows: a later run finds a time between the
// reader's open and close (tests/guest/atimeclose.c), not the time of
// the next stat or of the run's exit, 1.5 s later. The change time stays.
// The reader is root, then uid 1000, who may read the file and not
// write it: a read's access time needs no more.
func TestAtimeAtClose(t *testing.T) {
	cp := copyImage(t, imagePath(t))
	const file = "/atime-close"
	stat := func() []string {
		t.Helper()
		out, stderr, st := runKbox(t, "image", "-S", cp, "--read-only", "--", "/bin/stat", "-c", "%X %Z", file)
		f := strings.Fields(out)
		if st != 0 || len(f) != 2 {
			t.Fatalf("stat: status %d %q\n%s", st, out, lastLines(stderr, 5))
		}
		return f
	}
	forTiers(t, []string{"trap", "rewrite"}, func(t *testing.T, tier string) {
		for _, who := range [][]string{{"-S"}, {"-R", "--change-id", "1000:1000"}} {
			if out, stderr, st := runKbox(t, "image", "-S", cp, "--", "/bin/sh", "-c", "echo hi > "+file+" && chmod 644 "+file); st != 0 {
				t.Fatalf("status %d: %s\n%s", st, out, lastLines(stderr, 5))
			}
			was := stat()
			time.Sleep(1100 * time.Millisecond)
			args := append(append([]string{"image", who[0], cp}, who[1:]...), "--syscall-mode="+tier, "--", "/opt/tests/atimeclose", file)
			out, stderr, st := runKbox(t, args...)
			f := strings.Fields(out)
			if st != 0 || len(f) != 2 {
				t.Fatalf("%v: atimeclose: status %d %q\n%s", who, st, out, lastLines(stderr, 5))
			}
			now := stat()
			before, _ := strconv.ParseInt(f[0], 10, 64)
			after, _ := strconv.ParseInt(f[1], 10, 64)
			at, _ := strconv.ParseInt(now[0], 10, 64)
			if at < before-1 || at > after {
				t.Errorf("%v: access time %d after a read between %d and %d (was %s): want one of the read, not of the exit 1.5 s later", who, at, before, after, was[0])
			}
			if now[1] != was[1] {
				t.Errorf("%v: change time %s after a read, was %s: a read leaves it", who, now[1], was[1])
			}
		}
	})
}

// An exec reads the program, which moves its access time as a read does
// (relatime: a program not read since its last change). A stat after the
// exec sees the new time, though the same process's stat before it is
// in kbox's stat cache, which an exec keeps when it moves no time
// (tests/guest/execatime.c). In every tier.
func TestAtimeExec(t *testing.T) {
	cp := copyImage(t, imagePath(t))
	forTiers(t, []string{"seccomp", "trap", "rewrite"}, func(t *testing.T, tier string) {
		prog := "/root/execatime-" + tier
		if out, stderr, st := runKbox(t, "image", "-S", cp, "--", "/bin/cp", "/opt/tests/execatime", prog); st != 0 {
			t.Fatalf("cp: status %d: %s\n%s", st, out, lastLines(stderr, 5))
		}
		time.Sleep(1100 * time.Millisecond)
		out, stderr, st := runKbox(t, "image", "-S", cp, "--syscall-mode="+tier, "--trusted", "--", "/opt/tests/execatime", prog)
		var s0, n0, s1, n1 int64
		if k, _ := fmt.Sscan(out, &s0, &n0, &s1, &n1); st != 0 || k != 4 {
			t.Fatalf("execatime: status %d %q\n%s", st, out, lastLines(stderr, 5))
		}
		if s1 < s0 || s1 == s0 && n1 <= n0 {
			t.Errorf("access time %d.%09d after the exec, %d.%09d before: want the exec's, later", s1, n1, s0, n0)
		}
	})
}

// A read of a file whose access time is due gives it a new one, which a
// stat after it shows, though kbox's stat cache holds the answer of the
// stat before it: the read leaves the cache's entries valid, and an
// entry takes the access time LKL's inode was given since
// (shadowfd/atime.go; tests/guest/atimecache.c). In every tier.
func TestAtimeStatCache(t *testing.T) {
	cp := copyImage(t, imagePath(t))
	forTiers(t, []string{"seccomp", "trap", "rewrite"}, func(t *testing.T, tier string) {
		file := "/root/atimecache-" + tier
		if out, stderr, st := runKbox(t, "image", "-S", cp, "--", "/bin/sh", "-c", "echo hi > "+file); st != 0 {
			t.Fatalf("status %d: %s\n%s", st, out, lastLines(stderr, 5))
		}
		time.Sleep(1100 * time.Millisecond)
		out, stderr, st := runKbox(t, "image", "-S", cp, "--syscall-mode="+tier, "--trusted", "--", "/opt/tests/atimecache", file)
		var at [6]int64
		if k, _ := fmt.Sscan(out, &at[0], &at[1], &at[2], &at[3], &at[4], &at[5]); st != 0 || k != 6 {
			t.Fatalf("atimecache: status %d %q\n%s", st, out, lastLines(stderr, 5))
		}
		if at[2] < at[0] || at[2] == at[0] && at[3] <= at[1] {
			t.Errorf("access time %d.%09d after a read, %d.%09d before: want the read's, later", at[2], at[3], at[0], at[1])
		}
		if at[4] != at[2] || at[5] != at[3] {
			t.Errorf("access times of two stats after a read: %d.%09d, then %d.%09d; want the same", at[2], at[3], at[4], at[5])
		}
	})
}
