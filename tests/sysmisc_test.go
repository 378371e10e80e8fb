//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
			"setpriority host ESRCH\n", "setpriority user ok\n", "getpgid host ESRCH\n", "getsid host ESRCH\n",
			"get_robust_list host ESRCH\n", "sched_getaffinity host ESRCH\n", "prlimit host ESRCH\n", "getppid 0\n", inotify, "sysinfo procs<10 1 ram 1\n"}, nil},
	})
}

// TestFDLimitRaise: a guest raising its soft fd limit to its hard one, as
// servers and Python tools do at start, gets it in every tier, and reads
// it back alike through getrlimit and prlimit, as natively. The guest's
// hard limit is kbox's virtual fd base (dispatch/sys_proc_sys.go): the seccomp
// tier showed the host's hard limit, and raising the soft one to it was
// EPERM. Other limits set to their current values succeed in every tier
// too (the in-process tiers answered EPERM: Python's test_resource), and
// so does lowering the core limit (what programs holding secrets ask).
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

// TestObsoleteFSQueries: sysfs(2) and ustat(2) (x86_64 only) answer from
// the guest's kernel as Linux does from its own: types by index and back,
// their errors, and ustat of /'s device, as natively (LTP sysfs01-05,
// ustat01-02); the types are the ones the guest's /proc/filesystems lists
// (LKL's), not the host's.
func TestObsoleteFSQueries(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("SKIP: sysfs(2) and ustat(2) are x86_64 calls")
	}
	img := imagePath(t)
	native, err := exec.Command(dumpFromImage(t, img, "/opt/tests/sysmisc"), "fsinfo").Output()
	if err != nil || !strings.Contains(string(native), "ustat / ok\n") {
		t.Fatalf("native: %v\n%s", err, native)
	}
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c",
		`/opt/tests/sysmisc fsinfo && echo "proc $(awk '{print $NF}' /proc/filesystems | tr '\n' ' ')"`)
	if st != 0 {
		t.Fatalf("status %d: %s\n%s", st, out, stderr)
	}
	checks := func(s string) string { before, _, _ := strings.Cut(s, "types "); return before }
	if checks(out) != checks(string(native)) {
		t.Errorf("under kbox:\n%s\nnatively:\n%s", out, native)
	}
	var types, proc string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "types "); ok {
			types = v
		}
		if v, ok := strings.CutPrefix(l, "proc "); ok {
			proc = v
		}
	}
	if types == "" || types != proc {
		t.Errorf("sysfs's types %q, the guest's /proc/filesystems %q", types, proc)
	}
}

// TestReadaheadErrors: readahead(2) on a directory is EINVAL and on an
// O_PATH or write-only fd EBADF, as natively, in every tier (LTP
// readahead01): kbox answered 0 for every fd it serves.
func TestReadaheadErrors(t *testing.T) {
	img := imagePath(t)
	native, err := exec.Command(dumpFromImage(t, img, "/opt/tests/sysmisc"), "readahead", t.TempDir()).Output()
	if err != nil || !strings.Contains(string(native), "readahead directory EINVAL\n") {
		t.Fatalf("native: %v\n%s", err, native)
	}
	forEachTier(t, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "--", "/opt/tests/sysmisc", "readahead", "/tmp")
		if st != 0 || out != string(native) {
			t.Errorf("status %d; under kbox:\n%s\nnatively:\n%s\n%s", st, out, native, stderr)
		}
	})
}

// TestCloneNamespaces: clone(2) with a namespace flag is refused (EPERM),
// as unshare is, after Linux's EINVAL for flags that cannot go together:
// it ran on the host and made host namespaces (as root: LTP clone09's
// child got a new host network namespace while its sysctls stayed LKL's),
// which the supervisor cannot model. A plain clone still forks; so does
// every clone when an agent policy has kbox see each one.
func TestCloneNamespaces(t *testing.T) {
	img := imagePath(t)
	want := "clone plain ok\nclone newnet EPERM\nclone newuser EPERM\nclone newpid EPERM\nclone newns EPERM\n" +
		"clone newuts|newipc EPERM\nclone newuser|fs EINVAL\n"
	pol := writePolicy(t, "[limits]\nprocesses = 50\n")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"every clone seen", []string{"--policy", pol}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"image", "-S", img, "--read-only"}, c.args...)
			out, stderr, st := runKbox(t, append(args, "--", "/opt/tests/sysmisc", "clonens")...)
			if st != 0 || out != want {
				t.Errorf("status %d:\n%s\nwant:\n%s\n%s", st, out, want, stderr)
			}
		})
	}
}

// TestEntropyCount: /proc/sys/kernel/random/entropy_avail and poolsize are
// the host's, whose /dev/urandom the guest reads: its RNDGETENTCNT and the
// file agree, in every tier, as natively (LTP ioctl07). They were LKL's,
// whose pool stays near empty (entropy_avail 1 against the host's 256): a
// program that waits for entropy_avail to rise waited forever.
func TestEntropyCount(t *testing.T) {
	img := imagePath(t)
	native, err := exec.Command(dumpFromImage(t, img, "/opt/tests/sysmisc"), "entropy").Output()
	if err != nil || !strings.Contains(string(native), "entropy_avail agrees 1\n") {
		t.Fatalf("native: %v\n%s", err, native)
	}
	forEachTier(t, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "--", "/opt/tests/sysmisc", "entropy")
		if st != 0 || out != string(native) {
			t.Errorf("status %d; under kbox:\n%s\nnatively:\n%s\n%s", st, out, native, lastLines(stderr, 5))
		}
	})
}

// TestVhangup: vhangup(2) is served in Linux's order (LTP vhangup01,
// vhangup02): EPERM without the guest's CAP_SYS_TTY_CONFIG, 0 for a caller
// with no controlling terminal (after setsid), as natively; it was refused
// with EPERM for every caller. With a controlling terminal it stays EPERM:
// kbox cannot tell a pty of the guest's from the user's terminal, which
// Linux would hang up (so that case is not run natively).
func TestVhangup(t *testing.T) {
	img := imagePath(t)
	want := "vhangup no tty ok\nvhangup nobody EPERM\n"
	if os.Geteuid() == 0 {
		// A child of setsid has no terminal to hang up; nobody lacks the
		// capability: nothing is hung up.
		native, err := exec.Command(dumpFromImage(t, img, "/opt/tests/sysmisc"), "vhangup").Output()
		if err != nil || string(native) != want {
			t.Errorf("natively: %v\n%s\nwant:\n%s", err, native, want)
		}
	}
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c",
		"/opt/tests/sysmisc vhangup && /opt/tests/sysmisc vhangup-tty")
	if want += "vhangup tty EPERM\n"; st != 0 || out != want {
		t.Errorf("status %d:\n%s\nwant:\n%s\n%s", st, out, want, lastLines(stderr, 5))
	}
}

// TestNewerSyscalls: the syscalls newer than Linux 6.6 that kbox's tables
// name (seccomp/nr_*.go, dispatch/table.go) get the table's answers in
// every tier: futex_wake runs natively, so it answers as natively (a host
// without it: ENOSYS both ways); statmount and listmount (the host's
// mounts), lsm_list_modules (the host's security modules) and mseal (the
// in-process tiers' memory guard does not know seals) are ENOSYS, as on a
// kernel before them. futex_wake was ENOSYS while kbox's tables were
// Linux 6.6's.
func TestNewerSyscalls(t *testing.T) {
	img := imagePath(t)
	native, err := exec.Command(dumpFromImage(t, img, "/opt/tests/sysmisc"), "newer").Output()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, native)
	}
	futex, _, _ := strings.Cut(string(native), "\n")
	want := futex + "\nstatmount ENOSYS\nlistmount ENOSYS\nlsm_list_modules ENOSYS\nmseal ENOSYS\n"
	forEachTier(t, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "--", "/opt/tests/sysmisc", "newer")
		if st != 0 || out != want {
			t.Errorf("status %d; under kbox:\n%s\nwant:\n%s\nnatively:\n%s\n%s", st, out, want, native, lastLines(stderr, 5))
		}
	})
}

// TestPipeSysctls: /proc/sys/fs/pipe-max-size and pipe-user-pages-* are
// the host's, whose pipes the guest's are: a program that sizes its pipes
// by pipe-max-size (LTP fcntl30) asks for what the host allows. They were
// LKL's: on a host whose pipe-max-size was lowered, F_SETPIPE_SZ to the
// guest's value was EPERM. As root the test raises the host's value for
// the run (and puts it back), so that it differs from LKL's 1 MB default.
func TestPipeSysctls(t *testing.T) {
	img := imagePath(t)
	const maxSize = "/proc/sys/fs/pipe-max-size"
	old, err := os.ReadFile(maxSize)
	if err != nil {
		t.Skipf("no %s on the host: %v", maxSize, err)
	}
	if err := os.WriteFile(maxSize, []byte("2097152\n"), 0); err == nil {
		defer os.WriteFile(maxSize, old, 0)
	} else {
		t.Logf("the host's %s stays %s (%v): LKL's default may agree with it", maxSize, strings.TrimSpace(string(old)), err)
	}
	var want strings.Builder
	for _, f := range []string{"pipe-max-size", "pipe-user-pages-hard", "pipe-user-pages-soft"} {
		b, err := os.ReadFile("/proc/sys/fs/" + f)
		if err != nil {
			t.Fatal(err)
		}
		want.Write(b)
	}
	forEachTier(t, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "--",
			"/bin/cat", "/proc/sys/fs/pipe-max-size", "/proc/sys/fs/pipe-user-pages-hard", "/proc/sys/fs/pipe-user-pages-soft")
		if st != 0 || out != want.String() {
			t.Errorf("status %d:\n%s\nwant:\n%s\n%s", st, out, want.String(), lastLines(stderr, 5))
		}
	})
	// The host's to change, not the guest's.
	out, stderr, st := runKbox(t, "image", "-S", img, "--ephemeral", "--", "/bin/sh", "-c",
		"{ echo 4096 > /proc/sys/fs/pipe-max-size || echo refused; } 2>/dev/null; cat /proc/sys/fs/pipe-max-size")
	if want := "refused\n" + strings.SplitAfter(want.String(), "\n")[0]; st != 0 || out != want {
		t.Errorf("a write: status %d:\n%s\nwant:\n%s\n%s", st, out, want, lastLines(stderr, 5))
	}
}
