//go:build lkl

package tests

import (
	"os"
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
		{"registers and flags survive a patched site", []string{"--", "/opt/tests/rwsites", "regs", "1000"}, 0, []string{"regs ok 1000, site patched\n"}, nil},
		{"threads hammer one site while it is patched", []string{"--", "/opt/tests/rwsites", "threads", "8", "20000"}, 0, []string{"threads: 8 threads x 20000 calls, 0 wrong, site patched\n"}, nil},
		{"signal handlers at a patched kill", []string{"--", "/opt/tests/rwsites", "signals", "300"}, 0, []string{"signals: 300 sent, 300 handled, site patched\n"}, nil},
		{"W^X: write and execute refused", []string{"--", "/opt/tests/rwsites", "wx"}, 0, []string{"wx: mmap Permission denied, mprotect Permission denied, then r-x allowed\n"}, nil},
		{"mprotect of patched code restores it", []string{"--", "/opt/tests/rwsites", "forget", "10"}, 0, []string{"forget: before patched, after mprotect original, called again patched\n"}, nil},
		{"bad pointers at patched sites: EFAULT", []string{"--", "/opt/tests/rwsites", "badptr", "10"}, 0, []string{"badptr: 30 calls, 0 not EFAULT, sites patched patched\n"}, []string{"goroutine"}},
		{"path escape at a patched open", []string{"--", "/opt/tests/rwsites", "escape", "10"}, 0, []string{"escape: kbox-rootfs\n", "escape: site patched\n"}, []string{host + "\n"}},
		{"exec chain: shell, env, glibc echo", []string{"-c", "echo first; exec /usr/bin/env X=1 /bin/sh -c 'echo $X; exec /bin/echo last'"}, 0, []string{"first\n1\nlast\n"}, nil},
		{"pthreads doing file work", []string{"--", "/opt/tests/trapguard", "thread"}, 0, []string{"threads: 4 joined, 2400 bytes read", "thread: hostname kbox-rootfs"}, nil},
		{"killed by its own signal", []string{"--", "/opt/tests/kill_self"}, -1, nil, []string{"goroutine"}},
	})
}

// Known bug: a patched non-PIE program that execs itself dies of SIGSEGV
// after its first exec in about 1 run in 10 (2 of 20 by hand, once in a
// CI rehearsal; docs/tiers.md, Rewrite tier). Until it is found this case
// runs only with KBOX_KNOWN_BUGS=1, and then 20 times.
func TestRewriteExecChainPatched(t *testing.T) {
	if os.Getenv("KBOX_KNOWN_BUGS") == "" {
		t.Skip("SKIP: known bug: an exec chain of a patched program in the rewrite tier dies of SIGSEGV about 1 run in 10 (KBOX_KNOWN_BUGS=1 runs it)")
	}
	img := imagePath(t)
	for i := 0; i < 20; i++ {
		stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=rewrite", "--", "/opt/tests/rwsites", "exec", "3")
		if want := "exec 3: site patched\nexec 2: site patched\nexec 1: site patched\nexec 0: site patched\n"; status != 0 || stdout != want {
			t.Fatalf("run %d: status %d\nstdout: %s\nstderr: %s", i, status, stdout, stderr)
		}
	}
}

// --stats reports the sites: the bench program's getpid through libc is
// patched to answer inline.
func TestRewriteStats(t *testing.T) {
	stdout, stderr, status := runKbox(t, "image", "-S", imagePath(t), "--read-only", "--syscall-mode=rewrite", "--stats", "--", "/opt/tests/bench", "getpid_libc", "1000")
	if status != 0 || !strings.HasPrefix(stdout, "getpid_libc ") ||
		!regexp.MustCompile(`kbox: tier rewrite \(asked for\): \d+ sites trapped, [1-9]\d* patched \([1-9]\d* inline\)`).MatchString(stderr) {
		t.Errorf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
}

// auto chooses per command, before the launch: the table of image
// programs and the tier chosen, with --stats naming it and why. kbox
// before auto ran everything in the seccomp tier and printed no tier.
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
			args := append([]string{"image", "-S", img, "--read-only", "--stats"}, cmd...)
			_, stderr, status := runKbox(t, args...)
			re := regexp.MustCompile(`kbox: tier ` + c.tier + ` \(auto: [^\n]*(` + c.why + `)`)
			if status != 0 || !re.MatchString(stderr) {
				t.Errorf("status %d, want tier %s (%s)\nstderr: %s", status, c.tier, c.why, lastLines(stderr, 20))
			}
		})
	}
}
