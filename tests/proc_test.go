//go:build lkl

package tests

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The guest's /proc (package procfs, docs/guest-view.md): its own
// processes only, its own fds and mounts, and no host load, kernel log
// or network.

// runGuestScript runs script with /bin/sh in the guest (kbox image -S img,
// extra options first) and gives it kbox's own host pid as $1: kbox is
// started by a shell that execs it, so the shell's pid is kbox's.
func runGuestScript(t *testing.T, img string, extra []string, script string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kboxTimeout)
	defer cancel()
	args := []string{"-c", `k=$0 img=$1 s=$2; shift 2; exec "$k" image -S "$img" "$@" -- /bin/sh -c "$s" guest "$$"`,
		kboxBin(t), img, script}
	cmd := exec.CommandContext(ctx, "sh", append(args, extra...)...)
	cmd.WaitDelay = 5 * time.Second
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kbox did not finish: stdout %s stderr %s", &so, &se)
	}
	st := 0
	if ee, ok := err.(*exec.ExitError); ok {
		st = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return so.String(), se.String(), st
}

// section returns the lines of out between the line "--- name" and the
// next "--- " line.
func section(out, name string) string {
	_, rest, ok := strings.Cut(out, "--- "+name+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "--- "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// A host process with a recognisable command line and a secret in its
// environment: the guest's ps, ls /proc, reads by pid and by listing see
// none of it; the guest's own processes are there; kbox and the keeper
// are not.
func TestProcGuestProcessesOnly(t *testing.T) {
	img := imagePath(t)
	const marker = "31.4159265"
	const secret = "kbox-proc-secret-7d1f"
	host := exec.Command("sleep", marker)
	host.Env = append(os.Environ(), "SECRET="+secret)
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer host.Wait()
	defer host.Process.Kill()
	pid := strconv.Itoa(host.Process.Pid)
	// Natively the host's /proc shows both (once the child has exec'd).
	var cmdline, environ []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		cmdline, _ = os.ReadFile("/proc/" + pid + "/cmdline")
		environ, _ = os.ReadFile("/proc/" + pid + "/environ")
		if strings.Contains(string(cmdline), marker) {
			break
		}
	}
	if !strings.Contains(string(cmdline), marker) || !strings.Contains(string(environ), secret) {
		t.Fatalf("the planted process is not as expected natively: %q", cmdline)
	}
	script := strings.ReplaceAll(`sleep 7.25 &
bg=$!
echo "--- ps"
ps
echo "--- ls"
ls /proc | tr '\n' ' '; echo
echo "--- by pid"
cat /proc/HOSTPID/cmdline; echo "cmdline st=$?"
cat /proc/HOSTPID/environ; echo "environ st=$?"
test -e /proc/HOSTPID; echo "exists st=$?"
readlink /proc/HOSTPID/exe; echo "exe st=$?"
ls /proc/HOSTPID/; echo "ls st=$?"
(cd /proc/HOSTPID) 2>/dev/null && echo "cd ok" || echo "cd failed"
echo "--- listing"
cat /proc/[0-9]*/cmdline | tr '\0' '\n' | grep -c '^sleep$'
cat /proc/[0-9]*/environ | tr '\0' '\n' | grep -c SECRET=
echo "--- own"
test -e /proc/$bg && echo bg-visible
tr '\0' ' ' < /proc/$bg/cmdline; echo
test -e /proc/$PPID && echo keeper-visible || echo keeper-hidden
test -e /proc/$1 && echo kbox-visible || echo kbox-hidden
kill $bg
`, "HOSTPID", pid)
	out, stderr, st := runGuestScript(t, img, nil, script)
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	if strings.Contains(out+stderr, marker) || strings.Contains(out+stderr, secret) {
		t.Errorf("the host process shows in the guest:\n%s\n%s", out, stderr)
	}
	ps := section(out, "ps")
	sawSleep := false
	for _, l := range strings.Split(ps, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == pid {
			t.Errorf("ps lists the host process: %q", l)
		}
		sawSleep = sawSleep || strings.Contains(l, "sleep 7.25")
	}
	if !sawSleep {
		t.Errorf("ps lacks the guest's own sleep:\n%s", ps)
	}
	for _, f := range strings.Fields(section(out, "ls")) {
		if f == pid {
			t.Errorf("ls /proc lists the host process: %s", section(out, "ls"))
		}
	}
	for _, w := range []string{"cmdline st=1", "environ st=1", "exists st=1", "exe st=1", "ls st=1", "cd failed"} {
		if !strings.Contains(section(out, "by pid"), w+"\n") {
			t.Errorf("by pid: want %q:\n%s", w, section(out, "by pid"))
		}
	}
	if n := strings.Count(stderr, "No such file or directory"); n < 3 { // cat, cat, ls (readlink says nothing)
		t.Errorf("want ENOENT for the host pid, stderr:\n%s", stderr)
	}
	// The guest's own sleep shows when listed, not the host's; no
	// environment has SECRET=.
	if l := section(out, "listing"); l != "1\n0\n" {
		t.Errorf("listing: want one sleep and no SECRET=:\n%s", l)
	}
	for _, w := range []string{"bg-visible\n", "sleep 7.25 \n", "keeper-hidden\n", "kbox-hidden\n"} {
		if !strings.Contains(section(out, "own"), w) {
			t.Errorf("own: want %q:\n%s", w, section(out, "own"))
		}
	}
}

// A process's own fds through /proc/self/fd: tests/guest/procfd natively
// and under kbox prints the same lines (links of a file, a directory and
// a pipe, stats and reopens through them, a path through a directory's
// link, a file renamed and removed while open, fdinfo). Under kbox its
// directory fd is a virtual fd and its file a shadow.
func TestProcSelfFd(t *testing.T) {
	img := imagePath(t)
	bin := dumpFromImage(t, img, "/opt/tests/procfd")
	native, err := exec.Command(bin, t.TempDir()).Output()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, native)
	}
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c", "mkdir /tmp/pf && /opt/tests/procfd /tmp/pf")
	if st != 0 || out != string(native) {
		t.Errorf("status %d\nkbox:\n%s%s\nnative:\n%s", st, out, stderr, native)
	}
	if !strings.Contains(stderr, "directory fd 10") { // 1024 and up: a virtual fd
		t.Errorf("the directory fd is not a virtual one: %s", stderr)
	}
}

// TestProcSelfFdInProcess: in the in-process tiers, whose guest is kbox's
// own process, the guest's /proc/self/fd and fdinfo list its own fds only,
// as in the seccomp tier: not the placeholders of free numbers (listed,
// then "No such file or directory" for each) nor kbox's own fds (Go's
// netpoll: anon_inode:[eventpoll] and [eventfd] in the rewrite tier).
func TestProcSelfFdInProcess(t *testing.T) {
	img := imagePath(t)
	list := func(tier, dir string) string {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "--", "/bin/ls", "/proc/self/"+dir)
		if st != 0 || stderr != "" {
			t.Errorf("%s %s: status %d\n%s\n%s", tier, dir, st, out, stderr)
		}
		return out
	}
	for _, dir := range []string{"fd", "fdinfo"} {
		want := list("seccomp", dir)
		if n := len(strings.Fields(want)); n != 4 { // 0, 1, 2 and ls's directory
			t.Fatalf("seccomp %s lists %d fds:\n%s", dir, n, want)
		}
		for _, tier := range []string{"trap", "rewrite"} {
			if got := list(tier, dir); got != want {
				t.Errorf("%s: /proc/self/%s lists\n%s\nwant (as seccomp)\n%s", tier, dir, got, want)
			}
		}
	}
}

// The shell's view: ls -l /proc/self/fd shows a redirection's guest path,
// a file opened for reading, the pipe to the test; test -d works; a write
// through /proc/PID/fd/N reaches the file.
func TestProcSelfFdShell(t *testing.T) {
	img := imagePath(t)
	runCases(t, []string{"image", "-S", img}, []guestCase{
		{"ls -l /proc/self/fd", []string{"-c", "exec 3>/tmp/out 4</etc/hostname; ls -l /proc/self/fd/; test -d /proc/self/fd && echo fd-is-a-directory"}, 0,
			[]string{"1 -> pipe:[", "3 -> /tmp/out\n", "4 -> /etc/hostname\n", "fd-is-a-directory\n"}, nil},
		{"readlink and write through the link", []string{"-c", "exec 3>/tmp/out; readlink /proc/$$/fd/3; echo through-the-link > /proc/$$/fd/3; cat /tmp/out; cat /proc/self/fd/0 < /etc/hostname"}, 0,
			[]string{"/tmp/out\nthrough-the-link\nkbox-rootfs\n"}, nil},
		{"fd listing", []string{"-c", "exec 7</etc/hostname; ls /proc/$$/fd | sort -n | tr '\\n' ' '"}, 0,
			[]string{"0 1 2 7 "}, nil},
		{"a closed fd", []string{"-c", "readlink /proc/self/fd/77; echo st=$?"}, 0, []string{"st=1"}, nil},
	})
}

// /proc/mounts, /proc/self/mounts and mountinfo describe the guest's
// mounts: its root, /proc, /sys, /dev, /dev/shm, /tmp and a bind (without the
// bind's host path), and none of the host's other mount points. busybox
// df reads the table and finds /tmp.
func TestProcMounts(t *testing.T) {
	img := imagePath(t)
	hostDir := t.TempDir()
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "-b", hostDir+":/mnt/bound", "--", "/bin/sh", "-c",
		"echo '--- mounts'; cat /proc/mounts; echo '--- self'; cat /proc/self/mounts; echo '--- mountinfo'; cat /proc/self/mountinfo; echo '--- df'; df /tmp")
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	guest := map[string]string{"/": "ext4", "/proc": "proc", "/sys": "sysfs", "/dev": "", "/dev/shm": "ext4", "/tmp": "ext4", "/mnt/bound": ""}
	points := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(section(out, "mounts")), "\n") {
		f := strings.Fields(l)
		if len(f) != 6 {
			t.Fatalf("mounts line %q", l)
		}
		points[f[1]] = true
		if want, ok := guest[f[1]]; !ok {
			t.Errorf("a mount the guest does not have: %q", l)
		} else if want != "" && f[2] != want {
			t.Errorf("%s: type %s, want %s", f[1], f[2], want)
		}
	}
	for p := range guest {
		if !points[p] {
			t.Errorf("mounts lack %s:\n%s", p, section(out, "mounts"))
		}
	}
	if section(out, "self") != section(out, "mounts") {
		t.Errorf("/proc/self/mounts differs from /proc/mounts")
	}
	if n := strings.Count(section(out, "mountinfo"), "\n"); n != len(guest) {
		t.Errorf("mountinfo has %d lines:\n%s", n, section(out, "mountinfo"))
	}
	// None of the host's own mount points (bar the guest's) shows.
	f, err := os.Open("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 2 || guest[fl[1]] != "" || fl[1] == "/dev" || fl[1] == "/" {
			continue
		}
		if strings.Contains(section(out, "mounts")+section(out, "mountinfo"), " "+fl[1]+" ") {
			t.Errorf("the host's mount point %s shows in the guest", fl[1])
		}
	}
	if strings.Contains(out, hostDir) {
		t.Errorf("the bind's host path shows:\n%s", out)
	}
	if df := section(out, "df"); !strings.Contains(df, "/tmp\n") {
		t.Errorf("df /tmp:\n%s\n%s", df, stderr)
	}
}

// cwd, root and exe read as guest paths, and every path through them
// stays in the guest: the root's /etc/hostname is the image's, another
// process's (pid 1, the host's) does not exist, and ".." after a link
// goes up from where it led: root/../.. is the guest's root, cwd/.. the
// cwd's parent.
func TestProcLinks(t *testing.T) {
	img := imagePath(t)
	hostName, _ := os.ReadFile("/etc/hostname")
	var not []string
	if h := strings.TrimSpace(string(hostName)); h != "" && h != "kbox-rootfs" {
		not = append(not, h)
	}
	runCases(t, []string{"image", "-S", img}, []guestCase{
		{"readlink cwd, root, exe", []string{"-c", "cd /tmp && readlink /proc/self/cwd && readlink /proc/self/root && readlink /proc/$$/cwd && /usr/bin/readlink /proc/self/exe"}, 0,
			[]string{"/tmp\n/\n/tmp\n/usr/bin/readlink\n"}, nil},
		{"paths through root and cwd", []string{"-c", "cat /proc/self/root/etc/hostname; cd /etc && cat /proc/self/cwd/hostname; cd /proc/self/root/opt && readlink /proc/self/cwd"}, 0,
			[]string{"kbox-rootfs\nkbox-rootfs\n/opt\n"}, not},
		{"another process's root", []string{"-c", "cat /proc/1/root/etc/hostname; echo st=$?; ls /proc/1/cwd/; echo st=$?"}, 0,
			[]string{"st=1\nst=1\n"}, not},
		{"dot-dot through a link", []string{"-c", "cat /proc/self/root/../../etc/hostname; echo st=$?; cd /tmp; ls /proc/self/cwd/.. | grep -x -e status -e tmp"}, 0,
			[]string{"kbox-rootfs\nst=0\ntmp\n"}, not},
		{"re-exec through /proc/self/exe", []string{"--", "/bin/bash", "-c", "exec /proc/self/exe -c 'echo re-exec $BASH_VERSINFO'"}, 0,
			[]string{"re-exec 5\n"}, nil},
		// A script's exe is its interpreter. busybox's shell runs its
		// applets (readlink here) by executing /proc/self/exe: were that
		// the script, it would run itself again (D stops the loop).
		{"a script's exe is its interpreter", []string{"-c", scriptExe + " && /tmp/s.sh"}, 0,
			[]string{"exe /usr/bin/busybox\napplet /usr/bin/busybox\nnested sh\n"}, []string{"loop"}},
	})
}

// scriptExe writes /tmp/s.sh, a #!/bin/sh script that prints its exe
// as the shell reads it and as a busybox applet (readlink) does, then
// runs the applet sh, which busybox executes as /proc/self/exe.
const scriptExe = `printf '%s\n' '#!/bin/sh' 'export D=x$D' '[ ${#D} -gt 2 ] && { echo loop; exit 1; }' ` +
	`'echo exe $(/usr/bin/readlink /proc/$$/exe)' 'echo applet $(readlink /proc/$$/exe)' 'sh -c "echo nested sh"' > /tmp/s.sh && chmod +x /tmp/s.sh`

// System-wide files: no host load average, kernel log or symbols; LKL's
// kernel version, sysctls (writes refused) and network; an uptime that
// agrees with the host's boot (process start times count from it); the
// root of a cgroup hierarchy of its own.
func TestProcSystemFiles(t *testing.T) {
	img := imagePath(t)
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c", `
echo '--- loadavg'; cat /proc/loadavg
echo '--- absent'
for f in kmsg kallsyms kcore sysrq-trigger timer_list sched_debug; do test -e /proc/$f && echo "$f present"; done
echo '--- osrelease'; cat /proc/sys/kernel/osrelease
echo '--- version'; cat /proc/version
echo '--- netdev'; cat /proc/net/dev
echo '--- sysctl'; echo 1 > /proc/sys/kernel/ostype && echo written || echo refused
echo '--- guest sysctl'; echo 7 > /proc/sys/net/ipv4/conf/lo/tag && cat /proc/sys/net/ipv4/conf/lo/tag
f=/proc/sys/fs/inotify/max_user_watches; test -e $f && echo 4321 > $f && cat $f
su -s /bin/sh nobody -c 'echo 9 > /proc/sys/net/ipv4/conf/lo/tag' 2>/dev/null && echo nobody-wrote || echo nobody-refused
echo '--- uptime'; cat /proc/uptime
echo '--- stat'; cat /proc/stat
echo '--- ls'; ls /proc | grep -v '^[0-9]*$' | tr '\n' ' '; echo
echo '--- cgroup'; cat /proc/self/cgroup
`)
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	la := strings.Fields(section(out, "loadavg"))
	hostLA, _ := os.ReadFile("/proc/loadavg")
	if len(la) != 5 || la[0] != "0.00" || la[1] != "0.00" || la[2] != "0.00" {
		t.Errorf("loadavg %q (host: %s)", la, hostLA)
	} else {
		_, total, _ := strings.Cut(la[3], "/")
		_, hostTotal, _ := strings.Cut(strings.Fields(string(hostLA))[3], "/")
		if n, _ := strconv.Atoi(total); n > 10 {
			t.Errorf("loadavg counts %d tasks: the host's? (host: %s)", n, hostTotal)
		}
	}
	if a := section(out, "absent"); a != "" {
		t.Errorf("host kernel files show:\n%s", a)
	}
	hostRel, _ := exec.Command("uname", "-r").Output()
	// LKL's release: 6.0.0, with a "+" when liblkl was built from a git
	// tree not at a tagged commit (the kernel's setlocalversion).
	if r := strings.TrimSpace(section(out, "osrelease")); strings.TrimSuffix(r, "+") != "6.0.0" || r == strings.TrimSpace(string(hostRel)) {
		t.Errorf("osrelease %q, want LKL's 6.0.0 (host %s)", r, hostRel)
	}
	if !strings.HasPrefix(section(out, "version"), "Linux version 6.0.0") {
		t.Errorf("version %q", section(out, "version"))
	}
	nd := section(out, "netdev")
	if !strings.Contains(nd, "lo:") {
		t.Errorf("net/dev lacks LKL's lo:\n%s", nd)
	}
	if hostND, err := os.ReadFile("/proc/net/dev"); err == nil {
		for _, l := range strings.Split(string(hostND), "\n") {
			if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && name != "lo" && strings.Contains(nd, name+":") {
				t.Errorf("the host's interface %s shows in the guest", name)
			}
		}
	}
	if s := section(out, "sysctl"); s != "refused\n" || !strings.Contains(stderr, "Permission denied") {
		t.Errorf("sysctl write: %q %s", s, stderr)
	}
	// The sandbox kernel's own sysctls (procfs.GuestSysctl) are root's to
	// write, as on Linux: the network's, and inotify's limits where the
	// kernel has inotify.
	want := "7\n4321\nnobody-refused\n"
	if !linkedKernel(t).has("inotify") {
		want = "7\nnobody-refused\n"
	}
	if s := section(out, "guest sysctl"); s != want {
		t.Errorf("guest sysctl writes: %q, want %q\n%s", s, want, stderr)
	}
	up := strings.Fields(section(out, "uptime"))
	hostUp, _ := os.ReadFile("/proc/uptime")
	if len(up) != 2 {
		t.Errorf("uptime %q", up)
	} else {
		g, _ := strconv.ParseFloat(up[0], 64)
		h, _ := strconv.ParseFloat(strings.Fields(string(hostUp))[0], 64)
		if g > h || h-g > 120 {
			t.Errorf("uptime %v, host's %v", g, h)
		}
	}
	stat := section(out, "stat")
	for _, w := range []string{"cpu ", "cpu0 ", "btime ", "processes ", "procs_running "} {
		if !strings.Contains(stat, w) {
			t.Errorf("stat lacks %q:\n%s", w, stat)
		}
	}
	if !strings.Contains(stat, "intr 0\n") {
		t.Errorf("stat shows the host's interrupts:\n%s", stat)
	}
	if cg := section(out, "cgroup"); cg != "0::/\n" {
		t.Errorf("cgroup %q: the host's hierarchy?", cg)
	}
	allowed := map[string]bool{"cmdline": true, "config.gz": true, "cpuinfo": true, "devices": true, "diskstats": true, "filesystems": true,
		"loadavg": true, "meminfo": true, "mounts": true, "net": true, "partitions": true, "self": true, "stat": true,
		"sys": true, "sysvipc": true, "thread-self": true, "uptime": true, "version": true}
	for _, n := range strings.Fields(section(out, "ls")) {
		if !allowed[n] {
			t.Errorf("/proc lists %q", n)
		}
	}
}

// nproc, free and top size themselves from the guest's /proc and
// syscalls: nproc as natively, top lists the guest's processes only.
func TestProcTools(t *testing.T) {
	img := imagePath(t)
	native, err := exec.Command("nproc").Output()
	if err != nil {
		t.Skip("SKIP (no nproc on the host)")
	}
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c",
		"echo '--- nproc'; nproc; echo '--- free'; free; echo '--- top'; top -b -n1")
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	if got := section(out, "nproc"); got != string(native) {
		t.Errorf("nproc %q, natively %q", got, native)
	}
	if !regexp.MustCompile(`Mem: +[1-9][0-9]* `).MatchString(section(out, "free")) {
		t.Errorf("free:\n%s", section(out, "free"))
	}
	top := section(out, "top")
	if !strings.Contains(top, "Load average: 0.00 0.00 0.00") {
		t.Errorf("top shows another load:\n%s", top)
	}
	rows := 0
	for _, l := range strings.Split(top, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			if _, err := strconv.Atoi(f[0]); err == nil {
				rows++
			}
		}
	}
	if rows < 1 || rows > 4 {
		t.Errorf("top lists %d processes (the guest has sh and top):\n%s", rows, top)
	}
}
