package procfs

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// The texts kbox makes for the guest's /proc: the system-wide files that
// would show the host's load (loadavg, uptime, stat), the sysctls that are
// the host's (hostSysctls), and LKL's config.gz. Each is made when it is opened; the parsing and formatting
// are pure functions (text_test.go). The mount tables: mounts.go.

// systemText returns the maker of a system-wide text of top.
func systemText(s System, name string) func() []byte {
	switch name {
	case "loadavg":
		return func() []byte { return []byte(formatLoadavg(sampleGuest(s))) }
	case "uptime":
		return func() []byte {
			cpus, _ := hostCPUs()
			g := sampleGuest(s)
			return []byte(formatUptime(bootTime(), len(cpus), g.user+g.sys))
		}
	case "stat":
		return func() []byte {
			cpus, btime := hostCPUs()
			return []byte(formatStat(cpus, bootTime(), btime, sampleGuest(s)))
		}
	}
	return func() []byte { return nil }
}

// hostSysctls are the sysctls of /proc/sys that describe what the guest
// gets from the host, not from LKL: read from the host's. Guest pids are
// the host's, so is their bound (LKL's own pid_max is 4096); /dev/random
// and /dev/urandom are the host's, so is their pool (LKL's entropy count
// stays near 0, and RNDGETENTCNT on the guest's /dev/urandom answers the
// host's); pipes are the host's, so are the bounds of their sizes
// (F_SETPIPE_SZ is refused above the host's pipe-max-size, whatever
// LKL's says).
var hostSysctls = map[string]bool{
	"sys/kernel/pid_max":              true,
	"sys/kernel/random/entropy_avail": true,
	"sys/kernel/random/poolsize":      true,
	"sys/fs/pipe-max-size":            true,
	"sys/fs/pipe-user-pages-hard":     true,
	"sys/fs/pipe-user-pages-soft":     true,
}

// hostSysctlDefaults are what a host that hides one of hostSysctls shows.
var hostSysctlDefaults = map[string]string{
	"sys/kernel/pid_max":              "32768\n",
	"sys/kernel/random/entropy_avail": "256\n",
	"sys/kernel/random/poolsize":      "256\n",
	"sys/fs/pipe-max-size":            "1048576\n",
	"sys/fs/pipe-user-pages-hard":     "0\n",
	"sys/fs/pipe-user-pages-soft":     "16384\n",
}

// hostSysctl reads rel (one of hostSysctls) from the host's /proc.
func hostSysctl(rel string) []byte {
	b, err := hostproc.Read("/proc/" + rel)
	if err != nil {
		return []byte(hostSysctlDefaults[rel])
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
func sampleGuest(sys System) guestSample {
	var s guestSample
	for _, pid := range GuestTgids(sys) {
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
	if keeper, _ := sys.Keepers(); keeper > 0 {
		if st, ok := readStat("/proc/" + strconv.Itoa(keeper) + "/stat"); ok {
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
	b, err := hostproc.Read("/proc/stat")
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

// kprocCall calls LKL syscall nr with name, a path beneath LKL's proc, as
// its second argument (the first is LKL's proc); a[2:] are as given.
func kprocCall(cfg Config, nr uintptr, name string, a [6]uintptr) (uintptr, unix.Errno) {
	if !cfg.HasKernelProc {
		return 0, unix.ENOENT
	}
	b := make([]byte, len(name)+1)
	copy(b, name)
	a[0], a[1] = uintptr(cfg.KernelProc), lkl.Ptr(b)
	r, en := lkl.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	runtime.KeepAlive(b)
	return r, en
}

// kernelProcHas reports whether LKL's own proc has the file name.
func kernelProcHas(cfg Config, name string) bool {
	_, le := kprocCall(cfg, lkl.SysFaccessat, name, [6]uintptr{0, 0, unix.F_OK})
	return le == 0
}

// configGz is /proc/config.gz: LKL's own, when the kernel has one
// (CONFIG_IKCONFIG_PROC; /proc lists it only then), else ENOENT as such a
// kernel answers. Its bytes are read from LKL's proc at each open and
// given as a text (a sealed memfd), not as an LKL fd: zcat (busybox's,
// LTP's tst_kconfig through it) moves a pipe onto the file's fd number
// with dup2, which a virtual fd number cannot take. stat is LKL's, size
// included.
func configGz(cfg Config, abs string) (Found, unix.Errno) {
	const name = "config.gz"
	if !kernelProcHas(cfg, name) {
		return Found{}, unix.ENOENT
	}
	n := &Node{Kind: Text, Like: name}
	n.Text = func() []byte {
		b, _ := lkl.ReadFileAt(cfg.KernelProc, name)
		return b
	}
	n.Stat = func(st *unix.Stat_t) unix.Errno {
		var lst lkl.Stat64
		_, le := kprocCall(cfg, lkl.SysNewfstatat, name, [6]uintptr{0, 0, lkl.PtrOf(&lst), 0})
		runtime.KeepAlive(&lst)
		if le == 0 {
			lst.ToHost(st)
		}
		return le
	}
	return node(abs, n)
}
