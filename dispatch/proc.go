package dispatch

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/fdtable"
)

// Proc is the per-process state the engine keeps explicitly: cwd, umask and
// the virtual fd table. Threads of one process share it.
type Proc struct {
	Tgid int
	mu   sync.Mutex
	cwd  string
	FDs  *fdtable.Table
	// pendingScript is the guest path of a #! script being exec'd: its
	// interpreter opens one of pendingNames (the staged string, or the
	// path as given once argFix put it back), which means this file.
	pendingScript string
	pendingNames  [2]string
	// argFix, when set, is the interpreter argument to put back after a
	// script's exec (exec.go, fixArgs).
	argFix *argFix
	// exe is the image path of the program the process runs.
	exe string
	// execPending says an execve was continued: the first notification
	// after it checks what the process now runs (checkExec).
	execPending bool
	// umask is the process's umask (umask.go): read from /proc when kbox
	// first sees the process, then kept by its umask(2) calls.
	umask atomic.Uint32
}

// isPending reports whether p is the name under which the interpreter of
// a script being exec'd opens it.
func (p *Proc) isPending(name string) bool {
	return p.pendingScript != "" && name != "" && (name == p.pendingNames[0] || name == p.pendingNames[1])
}

// Cwd returns the process's guest working directory.
func (p *Proc) Cwd() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cwd
}

// SetCwd sets the guest working directory.
func (p *Proc) SetCwd(c string) {
	p.mu.Lock()
	p.cwd = c
	p.mu.Unlock()
}

// statusField reads one "Key:\tvalue" field of /proc/PID/status.
func statusField(pid int, key string) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == key {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return n, err == nil
		}
	}
	return 0, false
}

// statusUmask reads the "Umask:" field (octal) of /proc/PID/status; 022
// if it cannot.
func statusUmask(pid int) uint32 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && k == "Umask" {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(n) & 0o777
				}
			}
		}
	}
	return 0o022
}

// Start registers the first guest process.
func (e *Engine) Start(pid int, cwd string) *Proc {
	p := &Proc{Tgid: pid, cwd: cwd, FDs: e.newTable()}
	p.umask.Store(statusUmask(pid))
	e.mu.Lock()
	e.setProcs(func(m map[int]*Proc) { m[pid] = p })
	e.mu.Unlock()
	return p
}

// setProcs applies change to a copy of the process map and publishes it.
// The caller holds e.mu.
func (e *Engine) setProcs(change func(map[int]*Proc)) {
	old := *e.procs.Load()
	m := make(map[int]*Proc, len(old)+2)
	for k, v := range old {
		m[k] = v
	}
	change(m)
	e.procs.Store(&m)
}

// Lookup returns the process of thread tid, creating it from its parent
// after a fork (a new process inherits cwd and a copy of the fd table). A
// known thread is found without a lock or an allocation.
func (e *Engine) Lookup(tid int) *Proc {
	if p := (*e.procs.Load())[tid]; p != nil {
		return p
	}
	tgid, ok := statusField(tid, "Tgid")
	if !ok {
		tgid = tid
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	procs := *e.procs.Load()
	if p := procs[tgid]; p != nil {
		e.setProcs(func(m map[int]*Proc) { m[tid] = p }) // a thread of a known process
		return p
	}
	np := &Proc{Tgid: tgid, cwd: "/"}
	np.umask.Store(statusUmask(tgid)) // as inherited at fork, or set since
	if ppid, ok := statusField(tgid, "PPid"); ok {
		if parent := procs[ppid]; parent != nil {
			np.cwd = parent.Cwd()
			np.exe = parent.exe
			np.FDs = parent.FDs.Fork()
		}
	}
	if np.FDs == nil {
		np.FDs = e.newTable()
	}
	e.setProcs(func(m map[int]*Proc) {
		m[tgid] = np
		m[tid] = np
	})
	return np
}

// Exit forgets a process (exit_group), dropping its virtual fds.
func (e *Engine) Exit(p *Proc) {
	e.mu.Lock()
	e.setProcs(func(m map[int]*Proc) {
		for k, v := range m {
			if v == p {
				delete(m, k)
			}
		}
	})
	e.mu.Unlock()
	p.FDs.CloseAll()
}

// dropProcs forgets every process left, closing its virtual fds.
func (e *Engine) dropProcs() {
	e.mu.Lock()
	var left []*Proc
	for id, p := range *e.procs.Load() {
		if id == p.Tgid {
			left = append(left, p)
		}
	}
	e.procs.Store(&map[int]*Proc{})
	e.mu.Unlock()
	for _, p := range left {
		p.FDs.CloseAll()
	}
}

// FDOccupancy reports the fullest guest fd table: its open virtual fds and
// its capacity (EMFILE beyond it). Callers are samplers, not dispatch.
func (e *Engine) FDOccupancy() (used, capacity int) {
	capacity = e.Opt.MaxFDs
	for _, p := range *e.procs.Load() {
		if n := p.FDs.Len(); n > used {
			used, capacity = n, p.FDs.Cap()
		}
	}
	return used, capacity
}

// Tgids appends the ids of the guest processes the engine knows to dst.
func (e *Engine) Tgids(dst []int) []int {
	for id, p := range *e.procs.Load() {
		if id == p.Tgid {
			dst = append(dst, id)
		}
	}
	return dst
}
