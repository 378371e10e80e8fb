package dispatch

import (
	"os"
	"strconv"
	"strings"
	"sync"

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
	// interpreter opens the stage name, which means this file.
	pendingScript string
	pendingName   string
	// exe is the image path of the program the process runs.
	exe string
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

// Start registers the first guest process.
func (e *Engine) Start(pid int, cwd string) *Proc {
	p := &Proc{Tgid: pid, cwd: cwd, FDs: e.newTable()}
	e.mu.Lock()
	e.procs[pid] = p
	e.mu.Unlock()
	return p
}

// Lookup returns the process of thread tid, creating it from its parent
// after a fork (a new process inherits cwd and a copy of the fd table).
func (e *Engine) Lookup(tid int) *Proc {
	e.mu.Lock()
	p := e.procs[tid]
	e.mu.Unlock()
	if p != nil {
		return p
	}
	tgid, ok := statusField(tid, "Tgid")
	if !ok {
		tgid = tid
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.procs[tgid]; p != nil {
		e.procs[tid] = p // a thread of a known process
		return p
	}
	np := &Proc{Tgid: tgid, cwd: "/"}
	if ppid, ok := statusField(tgid, "PPid"); ok {
		if parent := e.procs[ppid]; parent != nil {
			np.cwd = parent.Cwd()
			np.exe = parent.exe
			np.FDs = parent.FDs.Fork()
		}
	}
	if np.FDs == nil {
		np.FDs = e.newTable()
	}
	e.procs[tgid] = np
	if tid != tgid {
		e.procs[tid] = np
	}
	return np
}

// Exit forgets a process (exit_group), dropping its virtual fds.
func (e *Engine) Exit(p *Proc) {
	e.mu.Lock()
	for k, v := range e.procs {
		if v == p {
			delete(e.procs, k)
		}
	}
	e.mu.Unlock()
	p.FDs.CloseAll()
}

// dropProcs forgets every process left, closing its virtual fds.
func (e *Engine) dropProcs() {
	e.mu.Lock()
	var left []*Proc
	for id, p := range e.procs {
		if id == p.Tgid {
			left = append(left, p)
		}
	}
	clear(e.procs)
	e.mu.Unlock()
	for _, p := range left {
		p.FDs.CloseAll()
	}
}

// FDOccupancy reports the fullest guest fd table: its open virtual fds and
// its capacity (EMFILE beyond it). It takes the process lock, so callers
// are samplers, not dispatch.
func (e *Engine) FDOccupancy() (used, capacity int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	capacity = e.Opt.MaxFDs
	for _, p := range e.procs {
		if n := p.FDs.Len(); n > used {
			used, capacity = n, p.FDs.Cap()
		}
	}
	return used, capacity
}

// Tgids appends the ids of the guest processes the engine knows to dst.
func (e *Engine) Tgids(dst []int) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, p := range e.procs {
		if id == p.Tgid {
			dst = append(dst, id)
		}
	}
	return dst
}
