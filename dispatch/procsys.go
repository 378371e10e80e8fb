package dispatch

import (
	"os"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

// procSys is the engine as package procfs sees it (procfs.System): its
// processes, their fds, kbox's mounts. Only paths under /proc reach it.
// A guest process (Proc) is a procfs.Process: the values kbox keeps of its
// identity (procfs.Ident: oom_score_adj, the in-process tier's main
// thread and strings) live in it; the parent a process shows (stat,
// status, getppid) is the engine's to know (shownParent).
type procSys Engine

var _ procfs.System = (*procSys)(nil)

// procCaller is the calling thread as package procfs sees it.
func (e *Engine) procCaller(r *Request) *procfs.Caller {
	return &procfs.Caller{Tgid: r.P.Tgid, Tid: r.G.Pid(), Self: r.P, Mem: r.G}
}

// procOf returns the process the engine knows by a thread or process id.
func (e *Engine) procOf(id int) *Proc { return (*e.procs.Load())[id] }

func (s *procSys) Config() procfs.Config {
	return procfs.Config{VirtualFDs: s.Opt.VirtualFDs, KernelProc: s.Opt.KernelProc, HasKernelProc: s.Opt.HasKernelProc}
}

// GuestTask: the caller, or a descendant of the keeper (which the keeper
// and kbox are not; see isGuest).
func (s *procSys) GuestTask(c *procfs.Caller, pid int) bool {
	e := (*Engine)(s)
	if pid == c.Tgid || pid == c.Tid {
		return true
	}
	if e.Keeper <= 0 && e.RootPid <= 0 {
		return e.procOf(pid) != nil // no supervisor (tests): what the engine knows
	}
	return e.isGuest(pid)
}

func (s *procSys) TgidOf(c *procfs.Caller, pid int) int { return (*Engine)(s).tgidOf(c.Tgid, pid) }

// tgidOf returns the process id of guest task pid, for a caller of
// process id self.
func (e *Engine) tgidOf(self, pid int) int {
	if pid == self {
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

func (s *procSys) Process(tgid int, register bool) procfs.Process {
	e := (*Engine)(s)
	p := e.procOf(tgid)
	if p == nil && register {
		p = e.Lookup(tgid)
	}
	if p == nil {
		return nil
	}
	return p
}

func (s *procSys) InitCreds() procfs.Creds { return s.initCred.ids() }

func (s *procSys) ShownParent(tgid int) (int, bool) { return (*Engine)(s).shownParent(tgid) }

func (s *procSys) Keepers() (int, int) { return s.Keeper, s.Binder }

func (s *procSys) Known() []int { return (*Engine)(s).Tgids(nil) }

func (s *procSys) FdRef(tgid, fd int) (*procfs.FdRef, unix.Errno) {
	return (*Engine)(s).fdRefOf(tgid, fd)
}

func (s *procSys) VirtualFds(tgid int) []int {
	p := (*Engine)(s).procOf(tgid)
	if p == nil {
		return nil
	}
	v, _ := p.FDs.Fds()
	return v
}

// HostFdHidden: only in the in-process tiers, whose guest is kbox's own
// process, is a host fd none of the guest's (GuestFdOpen).
func (s *procSys) HostFdHidden(tgid, fd int) bool { return (*Engine)(s).hostFdHidden(tgid, fd) }

func (e *Engine) hostFdHidden(tgid, fd int) bool {
	return e.GuestFdOpen != nil && tgid == os.Getpid() && !e.GuestFdOpen(fd)
}

func (s *procSys) HostProc() (int, error) { return guestpath.RouteRoot("/proc") }

func (s *procSys) BindPath(path string) (string, bool) { return (*Engine)(s).bindGuestPath(path) }

func (s *procSys) OnRoute(path string) bool {
	_, on := (*Engine)(s).route(path)
	return on
}

func (s *procSys) FIFOPath(dev, ino uint64) (string, bool) { return s.FIFOs.PathOf(dev, ino) }

// Inotify: sys_file_inotify.go's sockets.
func (s *procSys) Inotify(ino uint64) bool { return s.notify.has(ino) }

func (s *procSys) Fdinfo(tgid, fd int) (func() []byte, bool) {
	e := (*Engine)(s)
	p := e.procOf(tgid)
	if p == nil {
		return nil, false
	}
	ent, found := p.FDs.Get(fd)
	if !found {
		return nil, false
	}
	return func() []byte { return procfs.VirtualFdinfo(s.Config(), ent, getfl) }, true
}

// Shadow is the shadow whose content is host file (dev, ino), or nil.
func (s *procSys) Shadow(dev, ino uint64) *shadowfd.Node { return s.Shadows.Lookup(dev, ino) }

// Canonical is image path p with its links followed.
func (s *procSys) Canonical(p string) string { return (*Engine)(s).canonical(p) }

// Mounts: the host routes (but guestpath.CPURoute, a directory of the guest's
// /sys, not a mount of its own), then the binds.
func (s *procSys) Mounts() []procfs.KboxMount {
	var out []procfs.KboxMount
	for _, rt := range s.Opt.HostRoutes {
		if rt != guestpath.CPURoute {
			out = append(out, procfs.KboxMount{Point: rt, Root: -1})
		}
	}
	for _, b := range s.Opt.Binds {
		out = append(out, procfs.KboxMount{Point: b.Guest, Root: b.Root, ReadOnly: b.ReadOnly})
	}
	return out
}

func (s *procSys) IPCSysctl(name string) *procfs.Node { return (*Engine)(s).ipcSysctl(name) }

func (s *procSys) Sysvipc(abs, sub string) (*procfs.Node, unix.Errno) {
	return (*Engine)(s).procSysvipc(abs, sub)
}

// forkIdent is what a child takes of p's identity at fork: the OOM
// values (a new process is never an in-process tier's main thread).
func (p *Proc) forkIdent() procfs.Ident {
	p.mu.Lock()
	defer p.mu.Unlock()
	return procfs.Ident{OOMAdj: p.ident.OOMAdj, OOMMin: p.ident.OOMMin}
}

// SetMain says, for an in-process tier, that host thread tid stands for
// the process's main thread in its /proc (comm, the name in stat and
// status), and where its argument and environment strings lie in its
// memory: [argStart, argEnd, envStart, envEnd).
func (p *Proc) SetMain(tid int, args [4]uint64) {
	p.mu.Lock()
	p.ident.Leader, p.ident.Args = tid, args
	p.mu.Unlock()
}

// Ident returns what kbox keeps of p's identity (procfs.Process).
func (p *Proc) Ident() procfs.Ident {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ident
}

// UpdateIdent changes p's identity under its lock (procfs.Process).
func (p *Proc) UpdateIdent(f func(*procfs.Ident) unix.Errno) unix.Errno {
	p.mu.Lock()
	defer p.mu.Unlock()
	return f(&p.ident)
}

// IDs returns p's credentials as /proc's rules read them
// (procfs.Process).
func (p *Proc) IDs() procfs.Creds { return p.creds().ids() }

// ids is c as /proc's rules read it.
func (c *Cred) ids() procfs.Creds {
	return procfs.Creds{UID: c.UID, EUID: c.EUID, SUID: c.SUID, FSUID: c.FSUID,
		GID: c.GID, EGID: c.EGID, SGID: c.SGID, FSGID: c.FSGID, Eff: c.Eff,
		Perm: c.Perm, Inh: c.Inh, Bnd: c.Bnd, Amb: c.Amb, NoNewPrivs: c.NoNewPrivs}
}

// shownParent returns the parent guest process tgid shows (stat,
// status, getppid), and whether that hides its host parent: 0 for a
// parent that is not a guest process.
func (e *Engine) shownParent(tgid int) (int, bool) {
	if tgid == e.RootPid && tgid > 0 {
		return 0, true // the keeper's child, or kbox's own process
	}
	if p := e.procOf(tgid); p != nil {
		// The process that forked it, while it lives: a process is
		// reparented only when its parent exits.
		if pp := p.parent.Load(); pp != nil {
			if pp.Tgid == e.Keeper && e.Keeper > 0 {
				return 0, true // a session's spawner (BeginSession)
			}
			if pp.pidfd.Load() > 0 && pp.alive(pp.Tgid) { // released at its exit: no pidfd
				return pp.Tgid, false
			}
			p.parent.Store(nil)
		}
	}
	host, found := statusField(tgid, "PPid")
	if !found || host <= 0 {
		return 0, false
	}
	if e.parentIsGuest(host) {
		return host, false
	}
	return 0, true
}

// parentIsGuest reports whether host process pid, some guest process's
// parent, is a guest process.
func (e *Engine) parentIsGuest(pid int) bool {
	switch {
	case e.Keeper > 0 && pid == e.Keeper:
		return false
	case e.procOf(pid) != nil:
		// A process the engine knows is the guest's, and a live
		// process's parent cannot be a dead one's reused id (the
		// child would have been reparented): no walk up the tree.
		return true
	case e.Keeper <= 0 && e.RootPid <= 0:
		return false // no supervisor (tests): what the engine knows
	}
	return e.isGuest(pid)
}
