package procfs

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/hostproc"
	"golang.org/x/sys/unix"
)

// A guest process's identity in its /proc where the host's files cannot
// show it (docs/guest-view.md, "The guest's /proc"):
//   - oom_score_adj and oom_adj: the value is kept per process (Ident,
//     which the engine keeps in each process and copies at fork), with Linux's rules for writing it and the
//     guest's credentials (CAP_SYS_RESOURCE may lower it): the host would
//     judge kbox's host capabilities, and a host value below kbox's own
//     would shield the guest from the host's OOM killer;
//   - status's ids (Uid:, Gid:, Groups:), capability sets (CapInh: to
//     CapAmb:) and NoNewPrivs: are the guest's credentials (the host's
//     would be kbox's, and kbox's host process always has no_new_privs),
//     and so is the owner of every /proc/PID entry (StatNode);
//   - the parent (stat, status PPid:, getppid): a process whose host
//     parent is not a guest process (the first one, whose parent is
//     kbox's keeper, orphans the keeper adopted, an in-process tier's
//     guest, whose parent is kbox's caller) shows 0, as a pid namespace's
//     first process does (System.ShownParent says which);
//   - in an in-process tier, the guest is kbox's own process: its comm
//     (and stat's and status's name) are those of the guest's main thread
//     (the tier names it after the program, as execve does), its cmdline
//     and environ are read from the guest's argument and environment
//     strings, never kbox's.

// Ident is what kbox keeps of a process's identity (the engine keeps one
// per process, under the process's lock).
type Ident struct {
	// OOMAdj is oom_score_adj; OOMMin the lowest value a writer without
	// CAP_SYS_RESOURCE may set (Linux's oom_score_adj_min: what a
	// privileged write set last).
	OOMAdj, OOMMin int16
	// Leader, when not 0, is the host thread that stands for the
	// process's main thread (an in-process tier's first guest thread).
	Leader int
	// Args are [argStart, argEnd, envStart, envEnd) in the process's
	// memory, when an in-process tier set them.
	Args [4]uint64
}

// Linux's bounds of oom_score_adj and of the legacy oom_adj.
const (
	oomScoreAdjMin = -1000
	oomScoreAdjMax = 1000
	oomDisable     = -17
	oomAdjustMin   = -16
	oomAdjustMax   = 15
	// NumBuf is Linux's PROC_NUMBUF: a write takes at most NumBuf-1
	// bytes.
	NumBuf = 13
	// capSysResource is CAP_SYS_RESOURCE.
	capSysResource = 24
)

// HostOOMScoreAdj reads a host process's oom_score_adj (0 if it cannot).
func HostOOMScoreAdj(pid int) int16 {
	b, err := hostproc.Read("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
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
func (id *Ident) setOOM(v int, legacy, privileged bool) unix.Errno {
	if legacy {
		if (v < oomAdjustMin || v > oomAdjustMax) && v != oomDisable {
			return unix.EINVAL
		}
		if v == oomAdjustMax {
			v = oomScoreAdjMax
		} else {
			v = v * oomScoreAdjMax / -oomDisable
		}
		if v < int(id.OOMAdj) && !privileged {
			return unix.EACCES
		}
	} else {
		if v < oomScoreAdjMin || v > oomScoreAdjMax {
			return unix.EINVAL
		}
		if v < int(id.OOMMin) && !privileged {
			return unix.EACCES
		}
	}
	id.OOMAdj = int16(v)
	if !legacy && privileged {
		id.OOMMin = int16(v)
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
// oom_adj) by a writer with credentials w: the bytes taken (at most
// NumBuf-1), or the errno of Linux's rules.
func oomWrite(p Process, w Creds, b []byte, legacy bool) (int, unix.Errno) {
	b = b[:min(len(b), NumBuf-1)]
	v, en := parseKInt(b)
	if en != 0 {
		return 0, en
	}
	en = p.UpdateIdent(func(id *Ident) unix.Errno { return id.setOOM(v, legacy, w.Has(capSysResource)) })
	if en != 0 {
		return 0, en
	}
	return len(b), 0
}

// identPath resolves entry (oom_score_adj, oom_adj, comm, stat, status,
// cmdline or environ) beneath base, the
// directory of guest task pid, when kbox answers it: done is false when
// the host's file is right.
func identPath(s System, c *Caller, pid int, base, entry, rest string) (f Found, en unix.Errno, done bool) {
	if rest != "" {
		return Found{}, unix.ENOTDIR, true
	}
	abs := base + "/" + entry
	hrel := abs[len("/proc/"):]
	tgid := s.TgidOf(c, pid)
	p := s.Process(tgid, false)
	if p == nil && (entry == "oom_score_adj" || entry == "oom_adj") {
		p = s.Process(tgid, true) // a process that has made no notified syscall yet
	}
	var id Ident
	if p != nil {
		id = p.Ident()
	}
	isProc := !strings.Contains(base, "/task/")
	switch entry {
	case "oom_score_adj", "oom_adj":
		legacy := entry == "oom_adj"
		f, en = node(abs, &Node{Kind: Text, Like: hrel, Owner: p,
			Text:  func() []byte { return oomText(p.Ident().OOMAdj, legacy) },
			Store: func(w Creds, b []byte) (int, unix.Errno) { return oomWrite(p, w, b, legacy) },
		})
		return f, en, true
	case "comm":
		if isProc && id.Leader > 0 && id.Leader != tgid {
			rel := strconv.Itoa(tgid) + "/task/" + strconv.Itoa(id.Leader) + "/comm"
			f, en = host(abs, rel)
			return f, en, true
		}
	case "stat", "status":
		ppid, hidden := s.ShownParent(tgid)
		leader := 0
		if isProc && id.Leader > 0 && id.Leader != tgid {
			leader = id.Leader
		}
		if entry == "status" && p == nil {
			p = s.Process(tgid, true)
		}
		withCreds := entry == "status" && p != nil
		if !hidden && leader == 0 && !withCreds {
			return Found{}, 0, false
		}
		f, en = node(abs, &Node{Kind: Text, Like: hrel, Text: func() []byte {
			var creds *Creds
			if withCreds {
				ids := p.IDs() // when read, as Linux's
				creds = &ids
			}
			return identText(tgid, hrel, entry, leader, ppid, creds)
		}})
		return f, en, true
	case "cmdline", "environ":
		if p == nil || tgid != c.Tgid || id.Args[0] == 0 {
			return Found{}, 0, false
		}
		mem := c.Mem
		f, en = node(abs, &Node{Kind: Text, Like: hrel, Text: func() []byte {
			if entry == "environ" {
				return readArea(mem, id.Args[2], id.Args[3], false)
			}
			return readArea(mem, id.Args[0], id.Args[1], true)
		}})
		return f, en, true
	}
	return Found{}, 0, false
}

// identText is the host's stat or status text of rel (of process tgid)
// with the parent ppid, the status's capabilities of creds (when not nil)
// and, when leader is not 0, the name of that thread.
func identText(tgid int, rel, entry string, leader, ppid int, creds *Creds) []byte {
	b, err := hostproc.Read("/proc/" + rel)
	if err != nil {
		return nil
	}
	name := ""
	if leader > 0 {
		lb, err := hostproc.Read("/proc/" + strconv.Itoa(tgid) + "/task/" + strconv.Itoa(leader) + "/" + entry)
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
	return []byte(rewriteStatus(string(b), name, ppid, creds))
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

// rewriteStatus sets the PPid: line of a status text, its Name: line
// when name is not "", and its identity (Uid:, Gid:, Groups:),
// capability and NoNewPrivs: lines when c is not nil.
func rewriteStatus(s, name string, ppid int, c *Creds) string {
	lines := strings.SplitAfter(s, "\n")
	for k, l := range lines {
		key, _, _ := strings.Cut(l, ":\t")
		switch {
		case key == "PPid":
			lines[k] = "PPid:\t" + strconv.Itoa(ppid) + "\n"
		case key == "Name" && name != "":
			lines[k] = "Name:\t" + name + "\n"
		case c == nil:
		case key == "Uid":
			lines[k] = fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d\n", c.UID, c.EUID, c.SUID, c.FSUID)
		case key == "Gid":
			lines[k] = fmt.Sprintf("Gid:\t%d\t%d\t%d\t%d\n", c.GID, c.EGID, c.SGID, c.FSGID)
		case key == "Groups":
			lines[k] = groupsLine(c.Groups)
		case key == "NoNewPrivs":
			lines[k] = "NoNewPrivs:\t0\n"
			if c.NoNewPrivs {
				lines[k] = "NoNewPrivs:\t1\n"
			}
		case key == "CapInh":
			lines[k] = fmt.Sprintf("CapInh:\t%016x\n", c.Inh)
		case key == "CapPrm":
			lines[k] = fmt.Sprintf("CapPrm:\t%016x\n", c.Perm)
		case key == "CapEff":
			lines[k] = fmt.Sprintf("CapEff:\t%016x\n", c.Eff)
		case key == "CapBnd":
			lines[k] = fmt.Sprintf("CapBnd:\t%016x\n", c.Bnd)
		case key == "CapAmb":
			lines[k] = fmt.Sprintf("CapAmb:\t%016x\n", c.Amb)
		}
	}
	return strings.Join(lines, "")
}

// groupsLine is status's Groups: line as Linux prints it: the groups
// between spaces, and a space after them (alone when there are none).
func groupsLine(groups []uint32) string {
	var b strings.Builder
	b.WriteString("Groups:\t")
	for i, g := range groups {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatUint(uint64(g), 10))
	}
	b.WriteString(" \n")
	return b.String()
}

// maxArea bounds what /proc/PID/cmdline and environ read of the guest's
// strings (Linux reads them all; they fit in 6 MiB of stack).
const maxArea = 8 << 20

// readArea reads the guest's strings in [lo, hi) for cmdline (title) or
// environ. As Linux, a cmdline whose last byte is no longer NUL (the
// program wrote over it, setproctitle) ends at the first NUL from lo,
// within a page.
func readArea(mem Memory, lo, hi uint64, title bool) []byte {
	if lo >= hi || hi-lo > maxArea {
		return nil
	}
	if title {
		var last [1]byte
		if mem.Read(hi-1, last[:]) == nil && last[0] != 0 {
			b := make([]byte, 4096)
			n, _ := mem.ReadSome(lo, b)
			b = b[:max(n, 0)]
			if i := bytes.IndexByte(b, 0); i >= 0 {
				b = b[:i+1]
			}
			return b
		}
	}
	b := make([]byte, hi-lo)
	n, _ := mem.ReadSome(lo, b)
	return b[:max(n, 0)]
}
