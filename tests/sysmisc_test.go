//go:build lkl

package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The signal, timer, scheduling and old time-setting syscalls behave as
// natively (they gave ENOSYS: rt_sigpending, sched_setscheduler,
// sched_getscheduler, sched_rr_get_interval, utime, utimes, syncfs,
// sync_file_range, readahead), and the calls that name a task reach only
// the guest's own (a host pid is ESRCH: a guest could renice, reschedule or
// re-limit host processes; a negative id is the kernel's EINVAL), sysinfo
// counts the guest's processes and its uptime is /proc/uptime's, pids are
// within /proc/sys/kernel/pid_max, a truncate beyond RLIMIT_FSIZE is EFBIG,
// SCHED_FIFO needs the guest's CAP_SYS_NICE or RLIMIT_RTPRIO (LTP
// sched_rr_get_interval03, sysinfo01, getpid01, truncate03, setrlimit03,
// sched_setscheduler02), inotify_init1 gives an fd where the linked
// kernel has inotify and ENOSYS where it has not (as a kernel without it;
// TestInotify tests inotify itself).
func TestSyscallFamilies(t *testing.T) {
	img := imagePath(t)
	inotify := "inotify_init1 ENOSYS\n"
	if linkedKernel(t).has("inotify") {
		inotify = "inotify_init1 ok\n"
	}
	prog := dumpFromImage(t, img, "/opt/tests/sysmisc")
	cmd := exec.Command(prog, "same")
	cmd.Dir = t.TempDir()
	native, err := cmd.Output()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, native)
	}
	out, stderr, st := runKbox(t, "image", "-S", img, "--", "/bin/sh", "-c", "cd /tmp && /opt/tests/sysmisc same")
	if st != 0 || out != string(native) {
		t.Errorf("status %d; under kbox:\n%s\nnatively:\n%s\n%s", st, out, native, stderr)
	}
	runCases(t, []string{"image", "-S", img, "--read-only"}, []guestCase{
		{"tasks outside the guest", []string{"--", "/opt/tests/sysmisc", "kbox", "1"}, 0, []string{
			"sched_getparam host ESRCH\n", "sched_getscheduler host ESRCH\n", "getpriority host ESRCH\n",
			"setpriority host ESRCH\n", "setpriority user EPERM\n", "getpgid host ESRCH\n", "getsid host ESRCH\n",
			"get_robust_list host ESRCH\n", "sched_getaffinity host ESRCH\n", "prlimit host ESRCH\n", "getppid 0\n", inotify, "sysinfo procs<10 1 ram 1\n"}, nil},
	})
}

// TestFDLimitRaise: a guest raising its soft fd limit to its hard one, as
// servers and Python tools do at start, gets it in every tier, and reads
// it back alike through getrlimit and prlimit, as natively. The guest's
// hard limit is kbox's virtual fd base (dispatch/sys_proc_sys.go): the seccomp
// tier showed the host's hard limit, and raising the soft one to it was
// EPERM.
func TestFDLimitRaise(t *testing.T) {
	img := imagePath(t)
	prog := dumpFromImage(t, img, "/opt/tests/sysmisc")
	native, err := exec.Command(prog, "nofile").Output()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, native)
	}
	forEachTier(t, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--", "/opt/tests/sysmisc", "nofile")
		if st != 0 || out != string(native) {
			t.Errorf("status %d; under kbox:\n%s\nnatively:\n%s\n%s", st, out, native, stderr)
		}
	})
	// Programs run under a lowered limit: kbox installs each program it
	// execs at fds 1000 and 1001, which the kernel refused above the
	// soft limit (every exec failed with EBADF after ulimit -n 256).
	t.Run("exec under a lowered limit", func(t *testing.T) {
		// A #! script too: its interpreter's loader goes at fd 1002.
		script := "printf '#!/bin/sh\\necho script ran\\n' > /tmp/s.sh && chmod +x /tmp/s.sh && " +
			"ulimit -n 256 && /usr/bin/id -u && /tmp/s.sh && ulimit -Sn 29 && /usr/bin/id -u && /bin/echo soft $(ulimit -Sn)"
		native, err := exec.Command("/bin/sh", "-c", strings.ReplaceAll(script, "/tmp/s.sh", filepath.Join(t.TempDir(), "s.sh"))).Output()
		if err != nil {
			t.Fatalf("native: %v\n%s", err, native)
		}
		out, stderr, st := runKbox(t, "image", "-S", img, "--ephemeral", "--", "/bin/sh", "-c", script)
		if st != 0 || out != "0\nscript ran\n0\nsoft 29\n" || out != string(native) {
			t.Errorf("status %d; under kbox:\n%s\nnatively:\n%s\n%s", st, out, native, lastLines(stderr, 5))
		}
	})
}
