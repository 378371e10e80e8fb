package procfs

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"golang.org/x/sys/unix"
)

// The guest's processes as its /proc shows them: the listing of /proc,
// and who may inspect whom.

// capSysPtrace is CAP_SYS_PTRACE's bit.
const capSysPtrace = 19

// mayInspect reports whether the caller may see guest task pid's
// sensitive entries, as Linux's ptrace access check in
// PTRACE_MODE_READ_FSCREDS mode decides, with the emulated credentials:
// its own process, CAP_SYS_PTRACE, or a filesystem uid and gid equal to
// the target's real, effective and saved ones.
func mayInspect(s System, c *Caller, pid int) bool {
	if pid == c.Tgid || pid == c.Tid {
		return true
	}
	f := c.Self.IDs()
	if f.Has(capSysPtrace) {
		return true
	}
	t := s.InitCreds()
	tgid := s.TgidOf(c, pid)
	if p := s.Process(tgid, false); p != nil {
		if tgid == c.Tgid {
			return true
		}
		t = p.IDs()
	}
	return f.FSUID == t.UID && f.FSUID == t.EUID && f.FSUID == t.SUID &&
		f.FSGID == t.GID && f.FSGID == t.EGID && f.FSGID == t.SGID
}

// rootList makes /proc's entries: the system-wide names, then the
// guest's processes.
func rootList(s System) []fdtable.Dirent {
	ents := dots()
	cfg := s.Config()
	for i, t := range top {
		if t.kind == LKL && !cfg.HasKernelProc {
			continue
		}
		if t.name == "config.gz" && !kernelProcHas(cfg, t.name) {
			continue
		}
		ents = append(ents, fdtable.Dirent{Ino: uint64(0xf0000000 + i), Type: t.dt, Name: t.name})
		if t.name == "sys" {
			if _, en := s.Sysvipc("/proc/sysvipc", ""); en == 0 {
				ents = append(ents, fdtable.Dirent{Ino: 0xf0000100, Type: unix.DT_DIR, Name: "sysvipc"})
			}
		}
	}
	for _, pid := range GuestTgids(s) {
		ents = append(ents, fdtable.Dirent{Ino: uint64(pid) << 16, Type: unix.DT_DIR, Name: strconv.Itoa(pid)})
	}
	return ents
}

// GuestTgids returns the guest's processes, in increasing order: the
// keeper's descendants (found through the host's
// /proc/PID/task/TID/children, so that a process that has made no
// notified syscall yet is there too), or, without a keeper, the processes
// the engine knows.
func GuestTgids(s System) []int {
	var out []int
	keeper, binder := s.Keepers()
	if keeper > 0 {
		seen := map[int]bool{keeper: true, binder: true} // the binder is the keeper's child, not the guest's
		queue := ChildrenOf(keeper)
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if seen[p] {
				continue
			}
			seen[p] = true
			out = append(out, p)
			queue = append(queue, ChildrenOf(p)...)
		}
	}
	if len(out) == 0 {
		for _, p := range s.Known() {
			if p > 0 && unix.Access("/proc/"+strconv.Itoa(p), unix.F_OK) == nil {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ChildrenOf returns the child processes of every thread of host process
// pid.
func ChildrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
