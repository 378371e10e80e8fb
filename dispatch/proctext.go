package dispatch

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// The texts kbox makes for the guest's /proc: the mount table
// (/proc/PID/mounts, mountinfo, mountstats) and the system-wide files
// that would show the host's load (loadavg, uptime, stat). Each is made
// when it is opened; the parsing and formatting are pure functions
// (proctext_test.go).

// procSystemText returns the maker of a system-wide text of procTop.
func (e *Engine) procSystemText(name string) func() []byte {
	switch name {
	case "loadavg":
		return func() []byte { return []byte(formatLoadavg(e.sampleGuest())) }
	case "uptime":
		return func() []byte {
			cpus, _ := hostCPUs()
			s := e.sampleGuest()
			return []byte(formatUptime(bootTime(), len(cpus), s.user+s.sys))
		}
	case "stat":
		return func() []byte {
			cpus, btime := hostCPUs()
			return []byte(formatStat(cpus, bootTime(), btime, e.sampleGuest()))
		}
	}
	return func() []byte { return nil }
}

// hostPidMax is /proc/sys/kernel/pid_max: the host's, which bounds the
// guest's pids (they are the host's).
func hostPidMax() []byte {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return []byte("32768\n")
	}
	return b
}

// userHZ is the unit of the times in /proc (USER_HZ).
const userHZ = 100

// guestSample is what the guest's processes are doing, from the host's
// /proc of each.
type guestSample struct {
	tasks, running, blocked, procs int
	lastPid                        int
	// user and sys are the CPU time (ticks) of the guest's processes and
	// of their children that were waited for, the keeper's included: all
	// the guest has used, as long as its processes are waited for.
	user, sys uint64
}

// sampleGuest reads the state and times of every guest task.
func (e *Engine) sampleGuest() guestSample {
	var s guestSample
	for _, pid := range e.guestTgids() {
		s.procs++
		dir := "/proc/" + strconv.Itoa(pid)
		if st, ok := readStat(dir + "/stat"); ok {
			s.user += st.utime + st.cutime
			s.sys += st.stime + st.cstime
		}
		tasks, err := os.ReadDir(dir + "/task")
		if err != nil {
			continue
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			st, ok := readStat(dir + "/task/" + t.Name() + "/stat")
			if !ok {
				continue
			}
			s.tasks++
			s.lastPid = max(s.lastPid, tid)
			switch st.state {
			case 'R':
				s.running++
			case 'D':
				s.blocked++
			}
		}
	}
	if e.Keeper > 0 {
		if st, ok := readStat("/proc/" + strconv.Itoa(e.Keeper) + "/stat"); ok {
			s.user += st.cutime
			s.sys += st.cstime
		}
	}
	return s
}

// procStatFields are the fields of /proc/PID/stat that kbox reads.
type procStatFields struct {
	state                        byte
	utime, stime, cutime, cstime uint64
}

func readStat(path string) (procStatFields, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStatFields{}, false
	}
	return parseStat(string(b))
}

// parseStat parses /proc/PID/stat: the fields after the command, which
// is in parentheses and may hold anything.
func parseStat(s string) (procStatFields, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStatFields{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 || len(f[0]) != 1 {
		return procStatFields{}, false
	}
	var v [4]uint64
	for k := range v {
		n, err := strconv.ParseInt(f[11+k], 10, 64)
		if err != nil {
			return procStatFields{}, false
		}
		v[k] = uint64(max(n, 0))
	}
	return procStatFields{state: f[0][0], utime: v[0], stime: v[1], cutime: v[2], cstime: v[3]}, true
}

// hostCPUs returns the names of the host's online CPUs ("cpu0", ...) and
// its boot time, from the host's /proc/stat.
func hostCPUs() ([]string, int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return []string{"cpu0"}, 0
	}
	var cpus []string
	var btime int64
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
		case strings.HasPrefix(f[0], "cpu") && len(f[0]) > 3:
			cpus = append(cpus, f[0])
		case f[0] == "btime" && len(f) > 1:
			btime, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if len(cpus) == 0 {
		cpus = []string{"cpu0"}
	}
	return cpus, btime
}

// bootTime is the host's uptime in ticks (CLOCK_BOOTTIME): the start
// times of the guest's processes in their stat files count from the same
// boot.
func bootTime() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return uint64(ts.Sec)*userHZ + uint64(ts.Nsec)/(1e9/userHZ)
}

// formatLoadavg is /proc/loadavg for the guest: kbox does not sample the
// guest's load over time, so the averages are 0; the running and total
// task counts and the last pid are the guest's.
func formatLoadavg(s guestSample) string {
	return fmt.Sprintf("0.00 0.00 0.00 %d/%d %d\n", s.running, max(s.tasks, 1), s.lastPid)
}

// formatUptime is /proc/uptime: the host's uptime (process start times
// count from its boot) and, as idle time, what the guest left of every
// CPU's time.
func formatUptime(up uint64, ncpu int, busy uint64) string {
	idle := up*uint64(max(ncpu, 1)) - min(busy, up*uint64(max(ncpu, 1)))
	return fmt.Sprintf("%d.%02d %d.%02d\n", up/userHZ, up%userHZ, idle/userHZ, idle%userHZ)
}

// formatStat is /proc/stat as if the guest were alone: each CPU's time
// split between the guest's user and system time (spread evenly over
// the CPUs) and idle; no interrupts, context switches or other
// processes; btime the host's (start times count from it).
func formatStat(cpus []string, up uint64, btime int64, s guestSample) string {
	n := uint64(max(len(cpus), 1))
	user, sys := s.user/n, s.sys/n
	idle := up - min(up, user+sys)
	var b strings.Builder
	line := func(name string, k uint64) {
		fmt.Fprintf(&b, "%s %d 0 %d %d 0 0 0 0 0 0\n", name, user*k, sys*k, idle*k)
	}
	line("cpu ", n)
	for _, c := range cpus {
		line(c, 1)
	}
	fmt.Fprintf(&b, "intr 0\nctxt 0\nbtime %d\nprocesses %d\nprocs_running %d\nprocs_blocked %d\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n",
		btime, s.procs, max(s.running, 1), s.blocked)
	return b.String()
}

// mountEntry is one mount of the guest's table, as mountinfo has it.
type mountEntry struct {
	id, parent            int
	dev                   string // major:minor
	root, point, opts     string
	optional              string // optional fields ("shared:1"), if any
	fstype, source, super string
}

// parseMountinfo parses a mountinfo text; lines it cannot read are left
// out.
func parseMountinfo(s string) []mountEntry {
	var out []mountEntry
	for _, l := range strings.Split(s, "\n") {
		pre, post, found := strings.Cut(l, " - ")
		if !found {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 6 || len(g) < 3 {
			continue
		}
		id, err1 := strconv.Atoi(f[0])
		parent, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, mountEntry{id: id, parent: parent, dev: f[2], root: f[3], point: f[4], opts: f[5],
			optional: strings.Join(f[6:], " "), fstype: g[0], source: g[1], super: g[2]})
	}
	return out
}

// under reports whether guest path p is dir or beneath it.
func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// mergeMounts makes the guest's table from LKL's mounts (as seen from
// the image's root) and kbox's own (host routes, binds: extra): an LKL
// mount at or beneath one of kbox's is hidden by it. kbox's come after
// the root, numbered after LKL's, each the child of the deepest mount
// holding it.
func mergeMounts(lklMounts, extra []mountEntry) []mountEntry {
	var root []mountEntry
	var rest []mountEntry
	maxID := 0
	for _, m := range lklMounts {
		maxID = max(maxID, m.id)
		hidden := false
		for _, x := range extra {
			hidden = hidden || under(m.point, x.point)
		}
		switch {
		case m.point == "/" && len(root) == 0:
			root = append(root, m)
		case !hidden && m.point != "/":
			rest = append(rest, m)
		}
	}
	if len(root) == 0 {
		root = []mountEntry{{id: 1, parent: 1, dev: "0:0", root: "/", point: "/", opts: "rw", fstype: "ext4", source: "/dev/root", super: "rw"}}
		maxID = max(maxID, 1)
	}
	out := append(root, extra...)
	for i := range extra {
		maxID++
		out[1+i].id = maxID
	}
	out = append(out, rest...)
	for i := 1; i <= len(extra); i++ {
		best := out[0]
		for j, m := range out {
			if j != i && m.point != out[i].point && under(out[i].point, m.point) && len(m.point) > len(best.point) {
				best = m
			}
		}
		out[i].parent = best.id
	}
	return out
}

// formatMountinfo is /proc/PID/mountinfo.
func formatMountinfo(ms []mountEntry) string {
	var b strings.Builder
	for _, m := range ms {
		opt := m.optional
		if opt != "" {
			opt = " " + opt
		}
		fmt.Fprintf(&b, "%d %d %s %s %s %s%s - %s %s %s\n", m.id, m.parent, m.dev, m.root, m.point, m.opts, opt, m.fstype, m.source, m.super)
	}
	return b.String()
}

// formatMounts is /proc/PID/mounts: the mount's options, then the
// filesystem's (without its rw or ro, which the mount's say).
func formatMounts(ms []mountEntry) string {
	var b strings.Builder
	for _, m := range ms {
		opts := m.opts
		for _, o := range strings.Split(m.super, ",") {
			if o != "rw" && o != "ro" && o != "" && !strings.Contains(","+opts+",", ","+o+",") {
				opts += "," + o
			}
		}
		fmt.Fprintf(&b, "%s %s %s %s 0 0\n", m.source, m.point, m.fstype, opts)
	}
	return b.String()
}

// formatMountstats is /proc/PID/mountstats.
func formatMountstats(ms []mountEntry) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "device %s mounted on %s with fstype %s\n", m.source, m.point, m.fstype)
	}
	return b.String()
}

// escapeMount escapes a path as the kernel writes it in a mount table.
func escapeMount(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// renameDisks gives LKL's disk devices ("/dev/0000fe00", its name for
// device 254:0) their names from LKL's /proc/partitions ("/dev/vda").
func renameDisks(ms []mountEntry, partitions string) {
	names := map[string]string{}
	for _, l := range strings.Split(partitions, "\n") {
		if f := strings.Fields(l); len(f) == 4 {
			names[f[0]+":"+f[1]] = f[3]
		}
	}
	for i, m := range ms {
		if name, found := names[m.dev]; found && strings.HasPrefix(m.source, "/dev/") {
			ms[i].source = "/dev/" + name
		}
	}
}

// routeMounts describes kbox's host routes in the guest's table.
var routeMounts = map[string][3]string{ // fstype, mount options, filesystem options
	"/proc": {"proc", "rw,nosuid,nodev,noexec,relatime", "rw"},
	"/sys":  {"sysfs", "rw,nosuid,nodev,noexec,relatime", "rw"},
	"/dev":  {"tmpfs", "rw,nosuid,relatime", "rw,mode=755"},
}

// fsNames names the filesystem types a bind's host directory may be on,
// by statfs magic.
var fsNames = map[int64]string{
	0xef53: "ext4", 0x58465342: "xfs", 0x9123683e: "btrfs", 0x01021994: "tmpfs", 0x794c7630: "overlay",
	0x6969: "nfs", 0x65735546: "fuse", 0x2fc12fc1: "zfs", 0xf2f52010: "f2fs", 0x01021997: "9p", 0x4d44: "vfat",
	0x9fa0: "proc", 0x62656572: "sysfs", 0x858458f6: "ramfs",
}

// kboxMounts describes the mounts kbox itself serves: host routes and
// binds (whose host paths the guest never sees).
func (e *Engine) kboxMounts() []mountEntry {
	var out []mountEntry
	devOf := func(fd int, path string) string {
		var st unix.Stat_t
		var err error
		if fd >= 0 {
			err = unix.Fstat(fd, &st)
		} else {
			err = unix.Stat(path, &st)
		}
		if err != nil {
			return "0:0"
		}
		return fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	}
	for _, rt := range e.Opt.HostRoutes {
		if rt == CPURoute {
			continue // a directory of the guest's /sys, not a mount of its own
		}
		d, found := routeMounts[rt]
		if !found {
			d = [3]string{"none", "rw", "rw"}
		}
		out = append(out, mountEntry{dev: devOf(-1, rt), root: "/", point: escapeMount(rt), opts: d[1], fstype: d[0], source: d[0], super: d[2]})
	}
	for _, b := range e.Opt.Binds {
		fstype := "none"
		var sf unix.Statfs_t
		if unix.Fstatfs(b.Root, &sf) == nil {
			if n, found := fsNames[int64(sf.Type)]; found {
				fstype = n
			}
		}
		rw := "rw"
		if b.ReadOnly {
			rw = "ro"
		}
		out = append(out, mountEntry{dev: devOf(b.Root, ""), root: "/", point: escapeMount(b.Guest), opts: rw + ",relatime", fstype: fstype, source: fstype, super: rw})
	}
	return out
}

// guestMounts is the guest's mount table: LKL's mounts as the image's
// root sees them (kbox's private mounts, outside that root, do not show),
// then kbox's own.
func (e *Engine) guestMounts() []mountEntry {
	var lklMounts []mountEntry
	if e.Opt.HasKernelProc {
		if b, err := lkl.ReadFileAt(e.Opt.KernelProc, "self/mountinfo"); err == nil {
			lklMounts = parseMountinfo(string(b))
		}
		if b, err := lkl.ReadFileAt(e.Opt.KernelProc, "partitions"); err == nil {
			renameDisks(lklMounts, string(b))
		}
	}
	return mergeMounts(lklMounts, e.kboxMounts())
}

// mountText returns the maker of mounts, mountinfo or mountstats.
func (e *Engine) mountText(which string) func() []byte {
	return func() []byte {
		ms := e.guestMounts()
		switch which {
		case "mountinfo":
			return []byte(formatMountinfo(ms))
		case "mountstats":
			return []byte(formatMountstats(ms))
		}
		return []byte(formatMounts(ms))
	}
}

// kernelProcHas reports whether LKL's own proc has the file name.
func (e *Engine) kernelProcHas(name string) bool {
	_, le := e.kprocPath(lkl.SysFaccessat, 1, name, [6]uintptr{0, 0, unix.F_OK})
	return le == 0
}

// procConfigGz is /proc/config.gz: LKL's own, when the kernel has one
// (CONFIG_IKCONFIG_PROC; /proc lists it only then), else ENOENT as such a
// kernel answers. Its bytes are read from LKL's proc at each open and
// given as a sealed memfd (openText), not as an LKL fd: zcat (busybox's,
// LTP's tst_kconfig through it) moves a pipe onto the file's fd number
// with dup2, which a virtual fd number cannot take (bridge.go). stat is
// LKL's, size included.
func (e *Engine) procConfigGz(abs string) (Target, unix.Errno) {
	const name = "config.gz"
	if !e.kernelProcHas(name) {
		return Target{}, unix.ENOENT
	}
	n := &procNode{kind: procText, like: name}
	n.text = func() []byte {
		b, _ := lkl.ReadFileAt(e.Opt.KernelProc, name)
		return b
	}
	n.stat = func(st *unix.Stat_t) unix.Errno {
		var lst lkl.Stat64
		_, le := e.kprocPath(lkl.SysNewfstatat, 1, name, [6]uintptr{0, 0, lkl.PtrOf(&lst), 0})
		runtime.KeepAlive(&lst)
		if le == 0 {
			lst.ToHost(st)
		}
		return le
	}
	return procTarget(abs, n), 0
}
