//go:build lkl

package tests

import (
	"strings"
	"testing"
	"time"
)

// TestFileAboveShadowCap: a file larger than the shadow size cap is not
// copied into a memfd; it is served through a virtual fd, and the
// vectored-I/O and fallocate handlers work on it (tests/guest/vecio.c).
// The cap is lowered to 4 KiB with KBOX_SHADOW_MAX for the test.
func TestFileAboveShadowCap(t *testing.T) {
	img := copyImage(t, imagePath(t))
	small := kboxEnv{vars: []string{"KBOX_SHADOW_MAX=4096"}}
	out, stderr, st := runKboxEnv(t, small, "image", "-S", img, "-c",
		"head -c 10000 /dev/zero > /root/big && /opt/tests/vecio /root/big && head -c 11 /root/big && echo && wc -c /root/big")
	if st != 0 {
		t.Fatalf("status %d\n%s%s", st, out, stderr)
	}
	for _, want := range []string{"(virtual)", "vecio ok", "hello world\n", "50000"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, stderr, st := runKboxEnv(t, kboxEnv{vars: []string{"KBOX_SHADOW_MAX=lots"}}, "image", "-S", img, "--", "/bin/true"); st == 0 || !strings.Contains(stderr, "KBOX_SHADOW_MAX") {
		t.Errorf("bad KBOX_SHADOW_MAX accepted: status %d %s", st, stderr)
	}
}

// TestShellRedirectVirtual: busybox sh redirections of files served as
// virtual fds (above KBOX_SHADOW_MAX). The shell saves the fd it redirects
// with fcntl(fd, F_DUPFD_CLOEXEC, 1025), above the virtual fd it opened at
// 1024; natively that is EINVAL (above RLIMIT_NOFILE) and the shell gave
// up with status 1. Now the filter notifies it and kbox keeps a copy of
// the saved fd, which the shell's dup2 puts back: stdin after `read <`
// is the host's stdin again.
func TestShellRedirectVirtual(t *testing.T) {
	img := copyImage(t, imagePath(t))
	script := strings.Join([]string{
		`head -c 10000 /dev/zero | tr '\0' a > /root/big`,
		`wc -c < /root/big`,                    // < for a program
		`read -n 5 x < /root/big; echo "x=$x"`, // < for a builtin
		`cat`,                                  // the shell's own stdin, restored
		`echo appended >> /root/big`,           // >> for a builtin
		`/opt/tests/hello >> /root/big`,        // >> for a program
		`ls /no/such 2>> /root/big; tail -c 71 /root/big; wc -c < /root/big`,
		`exec 3</etc/hostname; exec 3< /root/big; head -c 4 <&3; echo; exec 3<&-`,
		`(exec 4>> /root/big; echo via-fd4 >&4); tail -c 8 /root/big`,
		`mknod /root/null c 1 3; echo gone > /root/null; echo to-device=$?`, // > onto a virtual fd (a device)
		`echo replaced > /root/big; cat /root/big`,                          // > truncates: a shadow
	}, "\n")
	out, stderr, st := runKboxEnv(t, kboxEnv{vars: []string{"KBOX_SHADOW_MAX=4096"}, stdin: "from-host-stdin\n"}, "image", "-S", img, "-c", script)
	want := "10000\nx=aaaaa\nfrom-host-stdin\n" +
		"appended\nhello from kbox guest\nls: /no/such: No such file or directory\n10071\n" +
		"aaaa\nvia-fd4\nto-device=0\nreplaced\n"
	if st != 0 || out != want {
		t.Errorf("status %d\nstdout %q\nwant   %q\nstderr %s", st, out, want, stderr)
	}
	assertCleanImage(t, img)

	// A shell killed inside nested redirections leaves kbox holding its
	// saved copy of the outer redirection's pipe: kbox still exits at
	// once (it used to wait for that pipe forever: a minute's deadline
	// stands for "never", with no timing to depend on) and unmounts
	// cleanly.
	t0 := time.Now()
	out, stderr, st, _ = runKboxOpts(t, time.Minute, kboxEnv{vars: []string{"KBOX_SHADOW_MAX=4096"}}, "image", "-S", img, "-c", "head -c 10000 /dev/zero > /root/k; { { kill -9 $$; } >> /root/k; } >> /root/k")
	if st != 128+9 || out+stderr != "" {
		t.Errorf("killed shell: status %d after %v, output %q; want status 137, no output", st, time.Since(t0), out+stderr)
	}
	assertCleanImage(t, img)
}
