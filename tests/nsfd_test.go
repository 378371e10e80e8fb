//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestProcLinkOpens: a /proc link opened as a file (tests/guest/nsfd.c).
// /proc/PID/ns/NAME opens the namespace's nsfs file, whose NS_GET_*
// ioctls answer as natively (LTP ioctl_ns02-04), and O_NOFOLLOW is ELOOP;
// open(O_PATH|O_NOFOLLOW) of an fd, cwd, exe or ns link gives an fd of the
// link itself: it stats as a link, readlinkat(fd, "") reads it, fexecve of
// it is ELOOP (it ran the program the exe link names), its own fd link
// names it and leads to it (open ELOOP, a bind mount on it ENOENT: LTP
// mount08). Both were ELOOP. The output is the native run's (as root), in
// every tier.
func TestProcLinkOpens(t *testing.T) {
	img := imagePath(t)
	want := map[string]string{
		"ns": "ns net open ok type right ino same nofollow ELOOP\n" +
			"ns ipc open ok type right ino same nofollow ELOOP\n" +
			"ns uts open ok type right ino same nofollow ELOOP\n" +
			"ns pid open ok type right ino same nofollow ELOOP\n" +
			"ns mnt open ok type right ino same nofollow ELOOP\n" +
			"ns user open ok type right ino same nofollow ELOOP\n" +
			"ns cgroup open ok type right ino same nofollow ELOOP\n" +
			"ns uts parent EINVAL\nns uts owner EINVAL\nns user userns EPERM\n",
		"linkpath": "linkpath fd open ok fstat link readlinkat text fdlink path reopen ELOOP stat link fexecve ELOOP mount ENOENT\n" +
			"linkpath cwd open ok fstat link readlinkat text fdlink path reopen ELOOP stat link fexecve ELOOP\n" +
			"linkpath exe open ok fstat link readlinkat text fdlink path reopen ELOOP stat link fexecve ELOOP\n" +
			"linkpath ns open ok fstat link readlinkat text fdlink path reopen ELOOP stat link fexecve ELOOP\n",
	}
	if os.Geteuid() == 0 {
		// The same program natively, in a mount namespace of its own
		// (the mount it tries must fail, but stays private if not).
		prog := dumpFromImage(t, img, "/opt/tests/nsfd")
		for mode, w := range want {
			cmd := exec.Command(prog, mode)
			cmd.Dir = t.TempDir()
			cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
			out, err := cmd.Output()
			if err != nil || string(out) != w {
				t.Errorf("native %s: %v\n%s\nwant:\n%s", mode, err, out, w)
			}
		}
	}
	forEachTier(t, func(t *testing.T, tier string) {
		for _, mode := range []string{"ns", "linkpath"} {
			out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "-w", "/tmp", "--", "/opt/tests/nsfd", mode)
			if st != 0 || out != want[mode] {
				t.Errorf("%s: status %d:\n%s\nwant:\n%s\n%s", mode, st, out, want[mode], stderr)
			}
		}
	})
}

// TestNamespaceFdsInert: a namespace fd the guest opens through /proc (the
// host's, but for its network and IPC namespaces) enters nothing: setns
// with it, and with the user namespace NS_GET_USERNS gives for it, is
// refused (EPERM), and listmount and statmount, which name a mount
// namespace by the id such an fd gives, are not served (ENOSYS).
func TestNamespaceFdsInert(t *testing.T) {
	img := imagePath(t)
	const want = "setns net EPERM\nsetns userns EPERM\nsetns mnt EPERM\nlistmount ENOSYS\nstatmount ENOSYS\n"
	forEachTier(t, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "--", "/opt/tests/nsfd", "setns")
		if st != 0 || out != want {
			t.Errorf("status %d:\n%s\nwant:\n%s\n%s", st, out, want, stderr)
		}
	})
}
