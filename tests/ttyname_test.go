//go:build lkl

package tests

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInheritedTerminalName: run on a host terminal (a pty of the host's
// /dev/pts), the guest finds its terminal by the name its fd links give,
// /dev/pts/N, as on the host: tty prints it (ttyname: the link's text,
// then a stat of that path matching the fd's), it stats as the fd, and
// opens for writing. The guest's /dev/pts is kbox's private instance,
// which lacks the host's pty: tty said "not a tty". In each tier.
func TestInheritedTerminalName(t *testing.T) {
	img := imagePath(t)
	run := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
		if err != nil {
			t.Skipf("SKIP (no host pty: %v)", err)
		}
		defer master.Close()
		if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
			t.Fatal(err)
		}
		n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
		if err != nil {
			t.Fatal(err)
		}
		slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(kboxBin(t), args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		var out strings.Builder
		io.Copy(&out, master) // EIO once the last slave fd is gone
		cmd.Wait()
		return strings.ReplaceAll(out.String(), "\r\n", "\n"), n
	}
	out, n := run(t, "image", "-S", img, "--ephemeral", "--", "/bin/sh", "-c",
		`tty; [ "$(stat -L -c %d:%i "$(tty)")" = "$(stat -L -c %d:%i /proc/self/fd/0)" ] && echo same; echo to-the-name > "$(tty)"; ls /dev/pts`)
	name := "/dev/pts/" + strconv.Itoa(n)
	for _, w := range []string{name + "\n", "same\n", "to-the-name\n", "ptmx\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("seccomp: missing %q in:\n%s", w, out)
		}
	}
	for _, m := range []string{"trap", "rewrite"} {
		out, n := run(t, "image", "-S", img, "--ephemeral", "--trusted", "--syscall-mode="+m, "--", "/bin/busybox", "tty")
		if !strings.Contains(out, "/dev/pts/"+strconv.Itoa(n)+"\n") {
			t.Errorf("%s: tty printed:\n%s", m, out)
		}
	}
}
