//go:build lkl

package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The rewrite tier (--syscall-mode=rewrite): the trap tier plus lazy
// patching of syscall sites. /opt/tests/rwsites (tests/guest/rwsites.c)
// has sites of the patched shape in assembly and reads their bytes back:
// "site patched" is the rewrite tier's jump, seen from inside the guest.
// kbox before the tier refused the option (exit status 125): every case
// fails there.
func TestRewriteGuests(t *testing.T) {
	img := copyImage(t, imagePath(t))
	host, _ := os.Hostname()
	runCases(t, []string{"image", "-S", img, "--syscall-mode=rewrite"}, []guestCase{
		{"static musl program", []string{"--", "/opt/tests/hello"}, 0, []string{"hello from kbox guest"}, nil},
		{"dynamic glibc program", []string{"--", "/bin/echo", "hi", "there"}, 0, []string{"hi there\n"}, nil},
		{"PIE glibc coreutils ls -l", []string{"--", "/usr/bin/ls", "-l", "/etc/hostname", "/opt/tests/hello"}, 0, []string{"-rw-r--r--", "root root", "/etc/hostname", "-rwxr-xr-x", "/opt/tests/hello"}, nil},
		{"coreutils sort over image files", []string{"--", "/usr/bin/sort", "/etc/hostname", "/etc/passwd"}, 0, []string{"kbox-rootfs\nkbox:x:1000"}, nil},
		{"coreutils ls -lR", []string{"--", "/usr/bin/ls", "-lR", "/usr/lib/x86_64-linux-gnu"}, 0, []string{"libc.so.6", "libselinux.so.1"}, []string{"goroutine"}},
		{"non-PIE static inline getpid patched", []string{"--", "/opt/tests/rwsites", "inline", "200"}, 0, []string{"inline ok 200, site patched\n"}, nil},
		{"extended sites: moves between mov and syscall go into the stub", []string{"--", "/opt/tests/rwsites", "moves", "100"}, 0, []string{"moves ok 100, kbox-rootfs\n", "moves: sites patched patched\n"}, nil},
		{"registers and flags survive a patched site", []string{"--", "/opt/tests/rwsites", "regs", "1000"}, 0, []string{"regs ok 1000, site patched\n"}, nil},
		{"threads hammer one site while it is patched", []string{"--", "/opt/tests/rwsites", "threads", "8", "20000"}, 0, []string{"threads: 8 threads x 20000 calls, 0 wrong, site patched\n"}, nil},
		{"signal handlers at a patched kill", []string{"--", "/opt/tests/rwsites", "signals", "300"}, 0, []string{"signals: 300 sent, 300 handled, site patched\n"}, nil},
		{"W^X: write and execute refused", []string{"--", "/opt/tests/rwsites", "wx"}, 0, []string{"wx: mmap Permission denied, mprotect Permission denied, then r-x allowed\n"}, nil},
		{"mprotect of patched code restores it", []string{"--", "/opt/tests/rwsites", "forget", "100"}, 0, []string{"forget: before patched, after mprotect original, called again patched\n"}, nil},
		{"bad pointers at patched sites: EFAULT", []string{"--", "/opt/tests/rwsites", "badptr", "100"}, 0, []string{"badptr: 300 calls, 0 not EFAULT, sites patched patched\n"}, []string{"goroutine"}},
		{"path escape at a patched open", []string{"--", "/opt/tests/rwsites", "escape", "100"}, 0, []string{"escape: kbox-rootfs\n", "escape: site patched\n"}, []string{host + "\n"}},
		{"exec chain: shell, env, glibc echo", []string{"-c", "echo first; exec /usr/bin/env X=1 /bin/sh -c 'echo $X; exec /bin/echo last'"}, 0, []string{"first\n1\nlast\n"}, nil},
		{"pthreads doing file work", []string{"--", "/opt/tests/trapguard", "thread"}, 0, []string{"threads: 4 joined, 2400 bytes read", "thread: hostname kbox-rootfs"}, nil},
		{"killed by its own signal", []string{"--", "/opt/tests/kill_self"}, -1, nil, []string{"goroutine"}},
	})
}

// A patched non-PIE program exec'ing itself, again and again, in both
// in-process tiers: each exec unmaps the old image and loads the new one
// at the same addresses. kbox used to unmap the loader's ranges and then
// the guard's (the same ranges) again; a thread of kbox's (LKL's timer
// helper making a thread stack) that mapped there in between lost its
// memory, and kbox died of SIGSEGV in about 1 run of `exec 3` in 20
// (docs/tiers.md, Rewrite tier, "exec").
func TestRewriteExecChainPatched(t *testing.T) {
	img := imagePath(t)
	const n = 10
	var want strings.Builder
	for i := n; i >= 0; i-- {
		fmt.Fprintf(&want, "exec %d: site %%s\n", i)
	}
	for _, tc := range []struct {
		mode, site string
		runs       int
	}{{"rewrite", "patched", 12}, {"trap", "original", 4}} {
		for i := 0; i < tc.runs; i++ {
			stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tc.mode, "--", "/opt/tests/rwsites", "exec", fmt.Sprint(n))
			if w := strings.ReplaceAll(want.String(), "%s", tc.site); status != 0 || stdout != w {
				t.Fatalf("%s: run %d: status %d\nstdout: %s\nstderr: %s", tc.mode, i, status, stdout, stderr)
			}
		}
	}
}

// --stats reports the sites: the bench program's getpid through libc is
// patched to answer inline.
func TestRewriteStats(t *testing.T) {
	stdout, stderr, status := runKbox(t, "image", "-S", imagePath(t), "--read-only", "--syscall-mode=rewrite", "--stats", "--", "/opt/tests/bench", "getpid_libc", "1000")
	if status != 0 || !strings.HasPrefix(stdout, "getpid_libc ") ||
		!regexp.MustCompile(`kbox: tier rewrite \(asked for; not confined\): \d+ sites trapped, [1-9]\d* patched \([1-9]\d* inline\)`).MatchString(stderr) {
		t.Errorf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
}

// auto, told the program is trusted, chooses per command, before the
// launch: the table of image programs and the tier chosen, with --stats
// naming it and why; without --trusted every program gets the seccomp
// tier (docs/security.md, "Which tier confines what").
func TestAutoChoice(t *testing.T) {
	img := imagePath(t)
	cases := []struct {
		cmd  []string
		tier string
		why  string
	}{
		{[]string{"/bin/sh", "-c", "true"}, "seccomp", "a shell"},
		{[]string{"/bin/bash", "-c", "true"}, "seccomp", "a shell"},
		{[]string{"/usr/bin/env", "true"}, "seccomp", "launcher"},
		{[]string{"/bin/ls", "/"}, "rewrite", "a dynamic program importing no fork"},
		{[]string{"/bin/cat", "/etc/hostname"}, "rewrite", "a dynamic program importing no fork"},
		{[]string{"/opt/tests/hello"}, "rewrite", "a static program with no fork"},
		// The bench program forks (its append_shared row): seccomp.
		{[]string{"/opt/tests/bench", "getpid_libc", "10"}, "seccomp", "defines _Fork"},
		{[]string{"/opt/tests/rwsites", "inline", "3"}, "seccomp", "defines execve"},
		{[]string{"/usr/bin/sort", "/etc/hostname"}, "seccomp", "the program imports"},
		// busybox without symbols: its code makes fork and clone syscalls.
		{[]string{"/usr/bin/find", "/etc", "-name", "hostname"}, "seccomp", "a shell or launcher (busybox)|makes syscall"},
		// --net runs in every tier: the same choice (docs/networking.md).
		{[]string{"--net", "--", "/opt/tests/inet", "refused", "10.0.2.2", "1"}, "rewrite", "a static program with no fork"},
		{[]string{"--net", "--", "/bin/sh", "-c", "true"}, "seccomp", "a shell"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.cmd, " "), func(t *testing.T) {
			cmd := c.cmd
			if cmd[0] != "--net" {
				cmd = append([]string{"--"}, cmd...)
			}
			args := append([]string{"image", "-S", img, "--read-only", "--stats", "--trusted"}, cmd...)
			_, stderr, status := runKbox(t, args...)
			re := regexp.MustCompile(`kbox: tier ` + c.tier + ` \(auto: [^\n]*(` + c.why + `)`)
			if status != 0 || !re.MatchString(stderr) {
				t.Errorf("status %d, want tier %s (%s)\nstderr: %s", status, c.tier, c.why, lastLines(stderr, 20))
			}
			// Without --trusted, auto confines every program.
			args = append([]string{"image", "-S", img, "--read-only", "--stats"}, cmd...)
			_, stderr, status = runKbox(t, args...)
			if status != 0 || !strings.Contains(stderr, "kbox: tier seccomp (auto: not --trusted, so the tier that confines it)") {
				t.Errorf("without --trusted: status %d\nstderr: %s", status, lastLines(stderr, 20))
			}
		})
	}
}

// TestAutoGoSpawner: a static Go program that starts processes
// (tests/testdata/gospawn: os/exec, which makes Go's own clone and execve
// syscalls, with the number from memory) runs under auto, in the seccomp
// tier, named by its .gopclntab. Before, auto chose the rewrite tier, and
// every spawn failed with ENOSYS ("fork/exec /bin/echo: function not
// implemented").
func TestAutoGoSpawner(t *testing.T) {
	img := imagePath(t)
	dir := t.TempDir()
	for _, flags := range [][]string{nil, {"-ldflags=-s -w"}} {
		build := exec.Command("go", append(append([]string{"build", "-o", filepath.Join(dir, "gospawn")}, flags...), "./testdata/gospawn")...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build gospawn: %v\n%s", err, out)
		}
		stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--stats", "--trusted", "-b", dir+":/gs:ro", "--", "/gs/gospawn", "20")
		if status != 0 || stdout != "gospawn ok 20, pipeline 3\n" || !strings.Contains(stderr, "kbox: tier seccomp (auto: a Go program with syscall.forkExec") {
			t.Errorf("%v: status %d\nstdout: %s\nstderr: %s", flags, status, stdout, lastLines(stderr, 10))
		}
	}
}

// A dynamic musl program (tests/guest/dyn/dlplug.c, with musl's loader in
// the image) dlopens a library after start: the library's syscall site
// traps, is patched (-v names it, at the address the program prints),
// and answers right. Then another library's code is mapped over it
// (MAP_FIXED, same address, same layout, another syscall): the old patch
// must not run (it would answer getuid for getpid), and the new code is
// patched in its turn. Natively every site stays "original".
func TestRewriteDlopen(t *testing.T) {
	img := imagePath(t)
	if out, _, st := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=seccomp", "--", "/bin/ls", "/opt/tests/dlplug", "/lib/ld-musl-x86_64.so.1"); st != 0 {
		t.Skipf("SKIP (the image has no dynamic musl guest; rebuilt without musl-gcc?): %s", out)
	}
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=rewrite", "-v", "--stats", "--", "/opt/tests/dlplug", "100")
	want := "a: 100 calls ok, site patched\nb mapped: site original\nb: 100 calls ok, site patched\n"
	// -v also shows LKL's kernel log on stdout: its lines start with "[".
	if status != 0 || regexp.MustCompile(`(?m)^\[.*\n`).ReplaceAllString(stdout, "") != want {
		t.Fatalf("status %d\nstdout: %s\nwant: %s\nstderr: %s", status, stdout, want, stderr)
	}
	m := regexp.MustCompile(`dlplug: site (0x[0-9a-f]+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no site address in stderr:\n%s", stderr)
	}
	for _, nr := range []string{"102", "39"} {
		if l := "kbox: rewrite: patched syscall " + nr + " at " + m[1] + "\n"; !strings.Contains(stderr, l) {
			t.Errorf("stderr lacks %q:\n%s", l, stderr)
		}
	}
	if !regexp.MustCompile(`kbox: tier rewrite \(asked for; not confined\): \d+ sites trapped, [2-9]\d* patched`).MatchString(stderr) {
		t.Errorf("--stats: want at least the two plugin sites patched:\n%s", stderr)
	}
}

// auto falls through to the seccomp tier when the in-process tier fails
// while installing, with one line under -v: a real failure, a static
// non-PIE program linked at the rewrite tier's slot table
// (tests/guest/slotclash.c), which the seccomp tier runs as Linux does.
// Asked for explicitly, the rewrite tier reports the failure instead.
// kbox before the fall-through for load failures ended auto's run with
// an error (exit status 125).
func TestAutoFallsThrough(t *testing.T) {
	img := imagePath(t)
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "-v", "--stats", "--trusted", "--", "/opt/tests/slotclash")
	// (-v also shows LKL's kernel log on stdout.)
	if status != 0 || !strings.Contains(stdout, "slotclash: main at 0x7f061030\n") {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	if n := strings.Count(stderr, "kbox: rewrite tier not available ("); n != 1 || !strings.Contains(stderr, "address in use") ||
		!regexp.MustCompile(`kbox: tier seccomp \(auto: the in-process tier failed to install: [^\n]*slotclash`).MatchString(stderr) {
		t.Errorf("want one fall-through line and --stats naming it:\n%s", stderr)
	}
	if strings.Contains(stderr, "kbox: maps:") {
		t.Errorf("the fall-through dumps kbox's maps:\n%s", stderr)
	}
	_, stderr, status = runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=rewrite", "--", "/opt/tests/slotclash")
	if status == 0 || !strings.Contains(stderr, "address in use") {
		t.Errorf("--syscall-mode=rewrite: status %d, want a failure naming the address\n%s", status, stderr)
	}
}

// TestRewriteBigKernel: a kernel given a GiB of memory (-k mem=1024M)
// does not take the rewrite tier's slot table's address. Its memory was
// placed at 1 GiB whatever its size, reaching past 0x7F060000, and the
// rewrite tier failed to install ("slot table at 0x7f060000: file
// exists", exit status 125).
func TestRewriteBigKernel(t *testing.T) {
	_, stderr, status := runKbox(t, "image", "-S", imagePath(t), "-k", "mem=1024M", "--read-only", "--syscall-mode=rewrite", "--trusted", "--", "/bin/true")
	if status != 0 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
}

// Sites whose number is in a register (/opt/tests/rwdyn,
// tests/guest/rwdyn.c: musl's __syscall_cp_c byte for byte, which every
// open, read and close of a static musl program goes through): the
// rewrite tier patches them where the CPU has BMI2, and the guest sees
// what it sees unpatched, whether the number is one kbox serves or one
// the kernel makes: results, errors, a path escape, signal handlers
// using the site, every register and flag, and musl's cancellation. The seccomp tier never
// patches. kbox before such sites left them trapping: "site original".
func TestRewriteDynamicSites(t *testing.T) {
	img := imagePath(t)
	site := "original"
	if c, err := os.ReadFile("/proc/cpuinfo"); err == nil && regexp.MustCompile(`(?m)^flags\s*:.*\bbmi2\b`).Match(c) {
		site = "patched"
	} else {
		t.Logf("no BMI2: such sites keep trapping")
	}
	for _, mode := range []string{"rewrite", "seccomp"} {
		want := site
		if mode == "seccomp" {
			want = "original"
		}
		runCases(t, []string{"image", "-S", img, "--read-only", "--syscall-mode=" + mode}, []guestCase{
			{mode + ": calls", []string{"--", "/opt/tests/rwdyn", "calls", "100"}, 0,
				[]string{"calls ok 100, kbox-rootfs\n", "calls: 100 signals handled, 0 wrong in the handler\n", "calls: site " + want + "\n"}, []string{"goroutine"}},
			{mode + ": registers and flags", []string{"--", "/opt/tests/rwdyn", "regs", "200"}, 0,
				[]string{"regs ok 200, site " + want + "\n"}, nil},
			// A signal handler sees the site's own address, not the
			// stub's: musl acts on a cancel only in __cp_begin ...
			// __cp_end (without that, the reader never ends).
			{mode + ": pthread_cancel of a read blocked at musl's patched __syscall_cp_asm", []string{"--", "/opt/tests/rwdyn", "cancel"}, 0,
				[]string{"cancel: joined, canceled\n", "cancel: site " + want + "\n"}, nil},
		})
	}
	_, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=rewrite", "--stats", "--", "/opt/tests/rwdyn", "calls", "100")
	if site == "patched" && (status != 0 || !strings.Contains(stderr, ", 1 patched with the number in a register")) {
		t.Errorf("--stats: status %d, want the site counted:\n%s", status, stderr)
	}
}

// The guest's vector registers across trips into kbox: xmm, ymm, zmm0-31,
// k0-7 and MXCSR hold what they held before a syscall that ran kbox's
// code (LKL, memcpy), what was in its initial state is zero after it, a
// signal handler finds them in its frame and its changes are the
// registers after sigreturn, and x87 values survive (tests/guest/fpregs.c;
// the in-process tiers move the registers by hand when the CPU says only
// those are in use: trap/fpstate.c). Every tier must print what the
// program prints natively; the rewrite tier patches the site too.
func TestFPRegisters(t *testing.T) {
	img := imagePath(t)
	native := nativeOutput(t, img, "/opt/tests/fpregs", "300")
	if !strings.Contains(native, "x87 ok 300\n") {
		t.Fatalf("natively:\n%s", native)
	}
	for _, mode := range []string{"seccomp", "trap", "rewrite"} {
		stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+mode, "--", "/opt/tests/fpregs", "300")
		want := native
		if mode == "rewrite" {
			want = strings.Replace(native, "site original", "site patched", 1)
		}
		if status != 0 || stdout != want {
			t.Errorf("%s: status %d\n%s\nnatively:\n%s\nstderr: %s", mode, status, stdout, native, lastLines(stderr, 5))
		}
	}
}
