package dispatch

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A guest process's identity in its /proc where the host's files cannot
// show it (docs/guest-view.md, "The guest's /proc"):
//   - oom_score_adj and oom_adj: the value is kept here, per process, and
//     inherited at fork, with Linux's rules for writing it and the
//     guest's credentials (CAP_SYS_RESOURCE may lower it): the host would
//     judge kbox's host capabilities, and a host value below kbox's own
//     would shield the guest from the host's OOM killer;
//   - the parent (stat, status PPid:, getppid): a process whose host
//     parent is not a guest process (the first one, whose parent is
//     kbox's keeper, orphans the keeper adopted, an in-process tier's
//     guest, whose parent is kbox's caller) shows 0, as a pid namespace's
//     first process does;
//   - in an in-process tier, the guest is kbox's own process: its comm
//     (and stat's and status's name) are those of the guest's main thread
//     (the tier names it after the program, as execve does), its cmdline
//     and environ are read from the guest's argument and environment
//     strings, never kbox's.

// procIdent is what kbox keeps of a process's identity (Proc.ident,
// guarded by Proc.mu).
type procIdent struct {
	// oomAdj is oom_score_adj; oomMin the lowest value a writer without
	// CAP_SYS_RESOURCE may set (Linux's oom_score_adj_min: what a
	// privileged write set last).
	oomAdj, oomMin int16
	// leader, when not 0, is the host thread that stands for the
	// process's main thread (an in-process tier's first guest thread).
	leader int
	// args are [argStart, argEnd, envStart, envEnd) in the process's
	// memory, when an in-process tier set them.
	args [4]uint64
}

// Linux's bounds of oom_score_adj and of the legacy oom_adj.
const (
	oomScoreAdjMin = -1000
	oomScoreAdjMax = 1000
	oomDisable     = -17
	oomAdjustMin   = -16
	oomAdjustMax   = 15
	// procNumBuf is Linux's PROC_NUMBUF: a write takes at most
	// procNumBuf-1 bytes.
	procNumBuf = 13
	// capSysResource is CAP_SYS_RESOURCE.
	capSysResource = 24
)

// forkIdent is what a child takes of p's identity at fork: the OOM
// values (a new process is never an in-process tier's main thread).
func (p *Proc) forkIdent() procIdent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return procIdent{oomAdj: p.ident.oomAdj, oomMin: p.ident.oomMin}
}

// SetMain says, for an in-process tier, that host thread tid stands for
// the process's main thread in its /proc (comm, the name in stat and
// status), and where its argument and environment strings lie in its
// memory: [argStart, argEnd, envStart, envEnd).
func (p *Proc) SetMain(tid int, args [4]uint64) {
	p.mu.Lock()
	p.ident.leader, p.ident.args = tid, args
	p.mu.Unlock()
}

func (p *Proc) identity() procIdent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ident
}

// hostOOMScoreAdj reads a host process's oom_score_adj (0 if it cannot).
func hostOOMScoreAdj(pid int) int16 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < oomScoreAdjMin || n > oomScoreAdjMax {
		return 0
	}
	return int16(n)
}

// oomText is the text of oom_score_adj, or of oom_adj (legacy): the
// value scaled to -17..15 as Linux scales it.
func oomText(adj int16, legacy bool) []byte {
	v := int(adj)
	if legacy {
		if v == oomScoreAdjMax {
			v = oomAdjustMax
		} else {
			v = v * -oomDisable / oomScoreAdjMax
		}
	}
	return []byte(strconv.Itoa(v) + "\n")
}

// setOOM applies a written value v to id as Linux's oom_score_adj write
// (legacy: oom_adj's) does, for a writer with CAP_SYS_RESOURCE or not
// (privileged): EINVAL out of range; EACCES for a value below the floor
// (oom_adj: below the current value) without the capability. A
// privileged write of oom_score_adj sets the floor.
func (id *procIdent) setOOM(v int, legacy, privileged bool) unix.Errno {
	if legacy {
		if (v < oomAdjustMin || v > oomAdjustMax) && v != oomDisable {
			return unix.EINVAL
		}
		if v == oomAdjustMax {
			v = oomScoreAdjMax
		} else {
			v = v * oomScoreAdjMax / -oomDisable
		}
		if v < int(id.oomAdj) && !privileged {
			return unix.EACCES
		}
	} else {
		if v < oomScoreAdjMin || v > oomScoreAdjMax {
			return unix.EINVAL
		}
		if v < int(id.oomMin) && !privileged {
			return unix.EACCES
		}
	}
	id.oomAdj = int16(v)
	if !legacy && privileged {
		id.oomMin = int16(v)
	}
	return 0
}

// kisspace is the kernel's isspace (lib/ctype.c): 0xa0 is one too.
func kisspace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') || c == 0xa0 }

// parseKInt parses a number as the kernel's kstrtoint(strstrip(buf), 0)
// does: the text up to the first NUL, without leading and trailing white
// space, an optional sign ('+' only without '-'), then hex after "0x",
// octal after "0", else decimal, and nothing after it. EINVAL for
// anything else, ERANGE beyond an int.
func parseKInt(b []byte) (int, unix.Errno) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	for len(b) > 0 && kisspace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && kisspace(b[0]) {
		b = b[1:]
	}
	neg := false
	switch {
	case len(b) > 0 && b[0] == '-':
		neg, b = true, b[1:]
	case len(b) > 0 && b[0] == '+':
		b = b[1:]
	}
	base := uint64(10)
	if len(b) > 0 && b[0] == '0' {
		base = 8
		if len(b) > 2 && b[1]|0x20 == 'x' && hexDigit(b[2]) < 16 {
			base, b = 16, b[2:]
		}
	}
	var v uint64
	n, over := 0, false
	for ; n < len(b); n++ {
		d := hexDigit(b[n])
		if d >= base {
			break
		}
		if v > (^uint64(0)-d)/base {
			over = true
		}
		v = v*base + d
	}
	switch {
	case n == 0:
		return 0, unix.EINVAL
	case over:
		return 0, unix.ERANGE
	}
	rest := b[n:]
	if len(rest) > 0 && rest[0] == '\n' {
		rest = rest[1:]
	}
	if len(rest) > 0 {
		return 0, unix.EINVAL
	}
	if neg {
		if v > 1<<31 {
			return 0, unix.ERANGE
		}
		return -int(v), 0
	}
	if v > 1<<31-1 {
		return 0, unix.ERANGE
	}
	return int(v), 0
}

// hexDigit is c's value as a hex digit, 16 for anything else.
func hexDigit(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c|0x20 >= 'a' && c|0x20 <= 'f':
		return uint64(c|0x20-'a') + 10
	}
	return 16
}

// oomWrite serves a write of b to process p's oom_score_adj (legacy:
// oom_adj) by the caller: the bytes taken (at most procNumBuf-1), or the
// errno of Linux's rules with the caller's credentials.
func (e *Engine) oomWrite(r *Request, p *Proc, b []byte, legacy bool) (int, unix.Errno) {
	b = b[:min(len(b), procNumBuf-1)]
	v, en := parseKInt(b)
	if en != 0 {
		return 0, en
	}
	c := r.P.creds()
	p.mu.Lock()
	en = p.ident.setOOM(v, legacy, c.Has(capSysResource))
	p.mu.Unlock()
	if en != 0 {
		return 0, en
	}
	return len(b), 0
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

// sysGetppid serves getppid(2): the parent /proc shows (shownParent).
func sysGetppid(e *Engine, r *Request) Result {
	ppid, _ := e.shownParent(r.P.Tgid)
	return ok(int64(ppid), Emulated)
}

// procIdentEntry resolves entry (one of identEntries) beneath base, the
// directory of guest task pid, when kbox answers it: done is false when
// the host's file is right.
func (e *Engine) procIdentEntry(r *Request, pid int, base, entry, rest string) (t Target, en unix.Errno, done bool) {
	if rest != "" {
		return Target{}, unix.ENOTDIR, true
	}
	abs := base + "/" + entry
	hrel := abs[len("/proc/"):]
	tgid := e.tgidOf(r, pid)
	p := e.procOf(tgid)
	if p == nil && (entry == "oom_score_adj" || entry == "oom_adj") {
		p = e.Lookup(tgid) // a process that has made no notified syscall yet
	}
	var id procIdent
	if p != nil {
		id = p.identity()
	}
	isProc := !strings.Contains(base, "/task/")
	switch entry {
	case "oom_score_adj", "oom_adj":
		legacy := entry == "oom_adj"
		return procTarget(abs, &procNode{kind: procText, like: hrel, owner: p,
			text:  func() []byte { return oomText(p.identity().oomAdj, legacy) },
			store: func(r *Request, b []byte) (int, unix.Errno) { return e.oomWrite(r, p, b, legacy) },
		}), 0, true
	case "comm":
		if isProc && id.leader > 0 && id.leader != tgid {
			rel := strconv.Itoa(tgid) + "/task/" + strconv.Itoa(id.leader) + "/comm"
			return procHost(abs, rel), 0, true
		}
	case "stat", "status":
		ppid, hidden := e.shownParent(tgid)
		leader := 0
		if isProc && id.leader > 0 && id.leader != tgid {
			leader = id.leader
		}
		if !hidden && leader == 0 {
			return Target{}, 0, false
		}
		return procTarget(abs, &procNode{kind: procText, like: hrel, text: func() []byte {
			return identText(tgid, hrel, entry, leader, ppid)
		}}), 0, true
	case "cmdline", "environ":
		if p == nil || p.Tgid != r.P.Tgid || id.args[0] == 0 {
			return Target{}, 0, false
		}
		return procTarget(abs, &procNode{kind: procText, like: hrel, text: func() []byte {
			if entry == "environ" {
				return readArea(r, id.args[2], id.args[3], false)
			}
			return readArea(r, id.args[0], id.args[1], true)
		}}), 0, true
	}
	return Target{}, 0, false
}

// identText is the host's stat or status text of rel (of process tgid)
// with the parent ppid and, when leader is not 0, the name of that
// thread.
func identText(tgid int, rel, entry string, leader, ppid int) []byte {
	b, err := os.ReadFile("/proc/" + rel)
	if err != nil {
		return nil
	}
	name := ""
	if leader > 0 {
		lb, err := os.ReadFile("/proc/" + strconv.Itoa(tgid) + "/task/" + strconv.Itoa(leader) + "/" + entry)
		if err == nil {
			if entry == "stat" {
				name, _ = statComm(string(lb))
			} else {
				name, _ = statusLine(string(lb), "Name")
			}
		}
	}
	if entry == "stat" {
		return []byte(rewriteStat(string(b), name, ppid))
	}
	return []byte(rewriteStatus(string(b), name, ppid))
}

// statComm returns the command of a stat text ("pid (comm) ..."): what
// lies between the first '(' and the last ')'.
func statComm(s string) (string, bool) {
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return "", false
	}
	return s[i+1 : j], true
}

// statusLine returns the value of a "Key:\tvalue" line of a status text.
func statusLine(s, key string) (string, bool) {
	for _, l := range strings.SplitAfter(s, "\n") {
		if v, found := strings.CutPrefix(l, key+":\t"); found {
			return strings.TrimSuffix(v, "\n"), true
		}
	}
	return "", false
}

// rewriteStat sets the parent (the field after the state) of a stat
// text, and its command when comm is not "".
func rewriteStat(s, comm string, ppid int) string {
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return s
	}
	head, tail := s[:i+1], s[j:]
	if comm == "" {
		comm = s[i+1 : j]
	}
	f := strings.SplitN(tail, " ", 4) // ")", state, ppid, rest
	if len(f) == 4 {
		f[2] = strconv.Itoa(ppid)
		tail = strings.Join(f, " ")
	}
	return head + comm + tail
}

// rewriteStatus sets the PPid: line of a status text, and its Name: line
// when name is not "".
func rewriteStatus(s, name string, ppid int) string {
	lines := strings.SplitAfter(s, "\n")
	for k, l := range lines {
		switch {
		case strings.HasPrefix(l, "PPid:\t"):
			lines[k] = "PPid:\t" + strconv.Itoa(ppid) + "\n"
		case name != "" && strings.HasPrefix(l, "Name:\t"):
			lines[k] = "Name:\t" + name + "\n"
		}
	}
	return strings.Join(lines, "")
}

// maxArea bounds what /proc/PID/cmdline and environ read of the guest's
// strings (Linux reads them all; they fit in 6 MiB of stack).
const maxArea = 8 << 20

// readArea reads the guest's strings in [lo, hi) for cmdline (title) or
// environ. As Linux, a cmdline whose last byte is no longer NUL (the
// program wrote over it, setproctitle) ends at the first NUL from lo,
// within a page.
func readArea(r *Request, lo, hi uint64, title bool) []byte {
	if lo >= hi || hi-lo > maxArea {
		return nil
	}
	if title {
		var last [1]byte
		if r.G.Read(hi-1, last[:]) == nil && last[0] != 0 {
			b := make([]byte, 4096)
			n, _ := r.G.ReadSome(lo, b)
			b = b[:max(n, 0)]
			if i := bytes.IndexByte(b, 0); i >= 0 {
				b = b[:i+1]
			}
			return b
		}
	}
	b := make([]byte, hi-lo)
	n, _ := r.G.ReadSome(lo, b)
	return b[:max(n, 0)]
}

// procWriteCheck is the permission check of an open for writing of a
// host file of a guest process (rel beneath the host's /proc, "PID/..."):
// the file is the target process's (its effective ids) with the host
// file's mode, as Linux makes a /proc/PID file, checked with the caller's
// credentials (the host would check kbox's).
func (e *Engine) procWriteCheck(r *Request, rel string) unix.Errno {
	pidName, _, _ := strings.Cut(rel, "/")
	pid, err := strconv.Atoi(pidName)
	if err != nil || !isPidName(pidName) {
		return 0
	}
	var st unix.Stat_t
	if hostProcStat(rel, false, &st) != nil {
		return 0 // the open reports it
	}
	t := e.initCred
	if p := e.procOf(e.tgidOf(r, pid)); p != nil {
		t = p.creds()
	}
	c := r.P.creds()
	if !c.mayWrite(t.EUID, t.EGID, st.Mode&0o777) {
		return unix.EACCES
	}
	return 0
}
