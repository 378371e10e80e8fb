package dispatch

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"golang.org/x/sys/unix"
)

// The guest's processes as its /proc shows them (procfs.go): which host
// pids are the guest's, the listing of /proc, and who may inspect whom.

// guestTask reports whether host pid (a process or a thread) is one of
// the guest's: the caller, or a descendant of the keeper (which the
// keeper and kbox are not; see isGuest).
func (e *Engine) guestTask(r *Request, pid int) bool {
	if pid == r.P.Tgid || pid == r.G.Pid() {
		return true
	}
	if e.Keeper <= 0 && e.RootPid <= 0 {
		return e.procOf(pid) != nil // no supervisor (tests): what the engine knows
	}
	return e.isGuest(pid)
}

// procOf returns the process the engine knows by a thread or process id.
func (e *Engine) procOf(id int) *Proc { return (*e.procs.Load())[id] }

// tgidOf returns the process id of guest task pid.
func (e *Engine) tgidOf(r *Request, pid int) int {
	if pid == r.P.Tgid {
		return pid
	}
	if p := e.procOf(pid); p != nil {
		return p.Tgid
	}
	if tgid, ok := statusField(pid, "Tgid"); ok {
		return tgid
	}
	return pid
}

// capSysPtrace is CAP_SYS_PTRACE's bit.
const capSysPtrace = 19

// mayInspect reports whether the caller may see guest task pid's
// sensitive entries (procSensitive), as Linux's ptrace access check in
// PTRACE_MODE_READ_FSCREDS mode decides, with the emulated credentials:
// its own process, CAP_SYS_PTRACE, or a filesystem uid and gid equal to
// the target's real, effective and saved ones.
func (e *Engine) mayInspect(r *Request, pid int) bool {
	if pid == r.P.Tgid || pid == r.G.Pid() {
		return true
	}
	c := r.P.creds()
	if c.Has(capSysPtrace) {
		return true
	}
	t := e.initCred
	if p := e.procOf(e.tgidOf(r, pid)); p != nil {
		if p.Tgid == r.P.Tgid {
			return true
		}
		t = p.creds()
	}
	return c.FSUID == t.UID && c.FSUID == t.EUID && c.FSUID == t.SUID &&
		c.FSGID == t.GID && c.FSGID == t.EGID && c.FSGID == t.SGID
}

// procRootList makes /proc's entries: the system-wide names, then the
// guest's processes.
func (e *Engine) procRootList() []fdtable.Dirent {
	ents := []fdtable.Dirent{{Ino: 1, Type: unix.DT_DIR, Name: "."}, {Ino: 1, Type: unix.DT_DIR, Name: ".."}}
	for i, t := range procTop {
		if t.kind == procLKL && !e.Opt.HasKernelProc {
			continue
		}
		if t.name == "config.gz" && !e.kernelProcHas(t.name) {
			continue
		}
		ents = append(ents, fdtable.Dirent{Ino: uint64(0xf0000000 + i), Type: t.dt, Name: t.name})
		if t.name == "sys" && e.ipcBinder() != nil {
			ents = append(ents, fdtable.Dirent{Ino: 0xf0000100, Type: unix.DT_DIR, Name: "sysvipc"})
		}
	}
	for _, pid := range e.guestTgids() {
		ents = append(ents, fdtable.Dirent{Ino: uint64(pid) << 16, Type: unix.DT_DIR, Name: strconv.Itoa(pid)})
	}
	return ents
}

// guestTgids returns the guest's processes, in increasing order: the
// keeper's descendants (found through the host's
// /proc/PID/task/TID/children, so that a process that has made no
// notified syscall yet is there too), or, without a keeper, the processes
// the engine knows.
func (e *Engine) guestTgids() []int {
	var out []int
	if e.Keeper > 0 {
		seen := map[int]bool{e.Keeper: true, e.Binder: true} // the binder is the keeper's child, not the guest's
		queue := childrenOf(e.Keeper)
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if seen[p] {
				continue
			}
			seen[p] = true
			out = append(out, p)
			queue = append(queue, childrenOf(p)...)
		}
	}
	if len(out) == 0 {
		for _, p := range e.Tgids(nil) {
			if exists(p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// childrenOf returns the child processes of every thread of process pid.
func childrenOf(pid int) []int {
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
