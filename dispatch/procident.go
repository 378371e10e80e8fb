package dispatch

import (
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/procfs"
	"golang.org/x/sys/unix"
)

// A guest process's identity as its /proc shows it: the values kbox
// keeps (procfs.Ident: oom_score_adj, the in-process tier's main thread
// and strings) live in each Proc; the parent a process shows (stat,
// status, getppid) is the engine's to know. The rules and texts are
// package procfs's (docs/guest-view.md, "The guest's /proc").

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

// procWriteCheck is the permission check of an open for writing of a
// host file of a guest process (rel beneath the host's /proc, "PID/..."):
// the file is the target process's (its effective ids) with the host
// file's mode, as Linux makes a /proc/PID file, checked with the caller's
// credentials (the host would check kbox's).
func (e *Engine) procWriteCheck(r *Request, rel string) unix.Errno {
	pidName, _, _ := strings.Cut(rel, "/")
	pid, err := strconv.Atoi(pidName)
	if err != nil || !procfs.IsPidName(pidName) {
		return 0
	}
	var st unix.Stat_t
	if hostProcStat(rel, false, &st) != nil {
		return 0 // the open reports it
	}
	t := e.initCred
	if p := e.procOf(e.tgidOf(r.P.Tgid, pid)); p != nil {
		t = p.creds()
	}
	c := r.P.creds()
	if !c.mayWrite(t.EUID, t.EGID, st.Mode&0o777) {
		return unix.EACCES
	}
	return 0
}
