package procfs

import (
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"golang.org/x/sys/unix"
)

// kbox answers every path under /proc itself. Classify maps a clean guest
// path under /proc, for the calling process, to one of:
//   - a path beneath the host's /proc (Found.Rel), opened confined like
//     any host route: the files of a guest process (guest processes are
//     host processes, so the host's files for them are right), and the
//     few system-wide files shown as the host has them (top);
//   - a Node kbox answers: a file or directory of LKL's own proc (LKL), a
//     file whose text kbox makes (Text, installed as a sealed memfd so
//     that reads are native), a directory whose entries kbox makes (Dir,
//     a virtual fd with an fdtable.Listing), a symbolic link (Link: self,
//     cwd, root, exe, fd/N, ...) or the object an fd link names, when that
//     link is followed (Obj: the engine makes those);
//   - a guest path to resolve again (Found.Redirect), where a path goes
//     on through cwd, root, exe or an fd link: links are resolved as
//     guest paths, never as host paths;
//   - an errno: ENOENT for a pid that is no guest process and for any
//     system-wide name not in top.

// MaxDepth bounds the links followed while resolving one path.
const MaxDepth = 8

// top lists the system-wide names of the guest's /proc, in listing order
// (sysvipc, there with an IPC namespace, comes after sys); every other
// name that is not a pid is ENOENT. Why each is served the way it is:
// docs/guest-view.md.
var top = []struct {
	name string
	kind Kind // 0: the host's file
	dt   uint8
}{
	{"cmdline", LKL, unix.DT_REG},
	{"config.gz", LKL, unix.DT_REG}, // LKL's, when it has one (configGz)
	{"cpuinfo", 0, unix.DT_REG},
	{"devices", LKL, unix.DT_REG},
	{"diskstats", LKL, unix.DT_REG},
	{"filesystems", LKL, unix.DT_REG},
	{"loadavg", Text, unix.DT_REG},
	{"meminfo", 0, unix.DT_REG},
	{"mounts", Link, unix.DT_LNK},
	{"net", Link, unix.DT_LNK},
	{"partitions", LKL, unix.DT_REG},
	{"self", Link, unix.DT_LNK},
	{"stat", Text, unix.DT_REG},
	{"sys", LKL, unix.DT_DIR},
	{"thread-self", Link, unix.DT_LNK},
	{"uptime", Text, unix.DT_REG},
	{"version", LKL, unix.DT_REG},
}

// sensitive are the entries of a process that Linux shows only to a
// caller that may ptrace it (PTRACE_MODE_READ_FSCREDS): kbox checks that
// with the guest's credentials (mayInspect).
var sensitive = map[string]bool{
	"environ": true, "auxv": true, "mem": true, "maps": true, "smaps": true, "smaps_rollup": true,
	"numa_maps": true, "pagemap": true, "stack": true, "syscall": true, "personality": true,
	"io": true, "fd": true, "fdinfo": true, "cwd": true, "root": true, "exe": true, "map_files": true,
}

// guestSysctls are the sysctls of LKL's /proc/sys that the guest may write
// (with CAP_SYS_ADMIN, as root writes them on Linux): each sets state of
// the sandbox's own kernel that serves the guest alone. The rest stay
// read-only, because LKL serves kbox too (its file table, its memory, its
// log on kbox's stderr) or because the guest's objects are not LKL's
// (pipes and System V IPC are the host's or kbox's, pid_max the host's).
// An entry ending in "/" is a directory: every sysctl below it.
var guestSysctls = []string{
	"/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname", // the UTS names, as sethostname
	"/proc/sys/fs/inotify/", // the guest's inotify limits (file watchers raise max_user_watches)
	"/proc/sys/net/",        // the guest's network stack is LKL's
}

// GuestSysctl reports whether abs (a clean path) is a sysctl the guest may
// write (guestSysctls).
func GuestSysctl(abs string) bool {
	for _, s := range guestSysctls {
		if abs == s || strings.HasSuffix(s, "/") && strings.HasPrefix(abs, s) {
			return true
		}
	}
	return false
}

// Classify resolves abs, a clean guest path at or below /proc, for caller
// c; depth counts the links followed so far.
func Classify(s System, c *Caller, abs string, depth int) (Found, unix.Errno) {
	if depth > MaxDepth {
		return Found{}, unix.ELOOP
	}
	rest := strings.TrimPrefix(abs, "/proc")
	if rest == "" {
		return node(abs, &Node{Kind: Dir, Like: ".", List: func() []fdtable.Dirent { return rootList(s) }})
	}
	name, sub, _ := strings.Cut(rest[1:], "/")
	tgid := strconv.Itoa(c.Tgid)
	switch name {
	case "self":
		if sub == "" {
			return node(abs, &Node{Kind: Link, Like: "self", Link: tgid, To: "/proc/" + tgid})
		}
		return pidPath(s, c, c.Tgid, sub, depth)
	case "thread-self":
		l := tgid + "/task/" + strconv.Itoa(c.Tid)
		if sub == "" {
			return node(abs, &Node{Kind: Link, Like: "thread-self", Link: l, To: "/proc/" + l})
		}
		return Classify(s, c, "/proc/"+l+"/"+sub, depth)
	}
	if IsPidName(name) {
		pid, err := strconv.Atoi(name)
		if err != nil {
			return Found{}, unix.ENOENT
		}
		return pidPath(s, c, pid, sub, depth)
	}
	return topPath(s, c, name, sub, depth)
}

// topPath resolves a system-wide name of /proc (top).
func topPath(s System, c *Caller, name, sub string, depth int) (Found, unix.Errno) {
	abs := "/proc/" + name
	if sub != "" {
		abs += "/" + sub
	}
	if name == "sysvipc" {
		n, en := s.Sysvipc(abs, sub)
		if en != 0 {
			return Found{}, en
		}
		return node(abs, n)
	}
	cfg := s.Config()
	for _, t := range top {
		if t.name != name {
			continue
		}
		switch t.kind {
		case 0:
			if sub != "" {
				return Found{}, unix.ENOTDIR
			}
			return host(abs, name)
		case LKL:
			if !cfg.HasKernelProc {
				return Found{}, unix.ENOENT
			}
			if t.dt != unix.DT_DIR && sub != "" {
				return Found{}, unix.ENOTDIR
			}
			rel := abs[len("/proc/"):]
			if rel == "config.gz" {
				return configGz(cfg, abs)
			}
			if hostSysctls[rel] {
				return node(abs, &Node{Kind: Text, Like: rel, Text: func() []byte { return hostSysctl(rel) }})
			}
			if name, ok := strings.CutPrefix(rel, "sys/"); ok {
				// LKL has no System V IPC or message queues: the
				// guest's namespace's limits.
				if n := s.IPCSysctl(name); n != nil {
					return node(abs, n)
				}
			}
			return node(abs, &Node{Kind: LKL, LKL: rel, Write: GuestSysctl(abs)})
		case Text:
			if sub != "" {
				return Found{}, unix.ENOTDIR
			}
			return node(abs, &Node{Kind: Text, Like: name, Text: systemText(s, name)})
		case Link:
			to := "self/" + name // mounts, net
			if sub != "" {
				return Classify(s, c, "/proc/"+to+"/"+sub, depth+1)
			}
			return node(abs, &Node{Kind: Link, Like: name, Link: to, To: "/proc/" + to})
		}
	}
	return Found{}, unix.ENOENT
}

// pidPath resolves sub beneath /proc/PID.
func pidPath(s System, c *Caller, pid int, sub string, depth int) (Found, unix.Errno) {
	if !s.GuestTask(c, pid) {
		return Found{}, unix.ENOENT
	}
	base := "/proc/" + strconv.Itoa(pid)
	if sub == "" {
		return host(base, base[len("/proc/"):])
	}
	entry, rest, _ := strings.Cut(sub, "/")
	if entry != "task" || rest == "" {
		return taskPath(s, c, pid, base, sub, depth)
	}
	tid, rest2, _ := strings.Cut(rest, "/")
	tbase := base + "/task/" + tid
	if rest2 == "" || !IsPidName(tid) {
		abs := base + "/" + sub
		return host(abs, abs[len("/proc/"):])
	}
	var st unix.Stat_t
	if unix.Stat(tbase, &st) != nil { // a thread of that process?
		return Found{}, unix.ENOENT
	}
	return taskPath(s, c, pid, tbase, rest2, depth)
}

// taskPath resolves sub beneath base, a guest process's or thread's
// directory (/proc/PID or /proc/PID/task/TID) of process or thread pid.
func taskPath(s System, c *Caller, pid int, base, sub string, depth int) (Found, unix.Errno) {
	entry, rest, _ := strings.Cut(sub, "/")
	abs := base + "/" + sub
	hbase := base[len("/proc/"):]
	if sensitive[entry] && !mayInspect(s, c, pid) {
		return Found{}, unix.EACCES
	}
	switch entry {
	case "fd":
		return fdPath(s, s.TgidOf(c, pid), base, rest, depth)
	case "fdinfo":
		return fdinfoPath(s, s.TgidOf(c, pid), base, rest)
	case "ns":
		if rest != "" {
			return nsPath(s, c, pid, abs, rest)
		}
	case "cwd", "root", "exe":
		var to string
		p := s.Process(s.TgidOf(c, pid), false)
		switch {
		case entry == "root" && p == nil:
			to = "/"
		case entry == "root":
			to = p.Root() // its chroot(2)
		case p == nil:
			return Found{}, unix.ENOENT
		case entry == "cwd" && p.CwdGone():
			// Linux's link to a removed directory: its text, and
			// nothing to follow (kbox keeps no dead directory).
			if rest != "" {
				return Found{}, unix.ENOENT
			}
			return node(abs, &Node{Kind: Link, Like: hbase + "/" + entry, Link: p.Cwd() + " (deleted)"})
		case entry == "cwd":
			to = p.Cwd()
		default:
			if to = p.Exe(); to == "" {
				return Found{}, unix.ENOENT
			}
		}
		if rest != "" {
			if entry == "exe" {
				return Found{}, unix.ENOTDIR
			}
			return redirect(to, rest, depth+1)
		}
		return node(abs, &Node{Kind: Link, Like: hbase + "/" + entry, Link: to, To: to})
	case "mounts", "mountinfo", "mountstats":
		if rest != "" {
			return Found{}, unix.ENOTDIR
		}
		return node(abs, &Node{Kind: Text, Like: hbase + "/" + entry, Text: mountText(s, entry)})
	case "cgroup", "cpuset":
		// The host's cgroup paths name the host's slices and units: the
		// guest is at the root of its own hierarchy, as in a cgroup
		// namespace.
		if rest != "" {
			return Found{}, unix.ENOTDIR
		}
		text := "0::/\n"
		if entry == "cpuset" {
			text = "/\n"
		}
		return node(abs, &Node{Kind: Text, Like: hbase + "/" + entry, Text: func() []byte { return []byte(text) }})
	case "net":
		// The host's network is not the guest's: LKL's, as /proc/net.
		if !s.Config().HasKernelProc {
			return Found{}, unix.ENOENT
		}
		rel := "self/net"
		if rest != "" {
			rel += "/" + rest
		}
		return node(abs, &Node{Kind: LKL, LKL: rel})
	case "maps", "smaps":
		if rest != "" {
			return Found{}, unix.ENOTDIR
		}
		return node(abs, &Node{Kind: Text, Like: hbase + "/" + entry, Text: mapsText(s, hbase+"/"+entry)})
	case "numa_maps":
		if rest != "" {
			return Found{}, unix.ENOTDIR
		}
		return node(abs, &Node{Kind: Text, Like: hbase + "/" + entry, Text: numaMapsText(s, hbase)})
	case "map_files":
		// Its links name the host files behind the mappings (the
		// prepared programs' memfds, shadows' content): an empty
		// directory, as Linux shows it to a caller without
		// CAP_SYS_ADMIN.
		if rest != "" {
			return Found{}, unix.EACCES
		}
		return node(abs, &Node{Kind: Dir, Like: hbase + "/map_files", List: dots})
	case "oom_score_adj", "oom_adj", "comm", "stat", "status", "cmdline", "environ":
		if f, en, done := identPath(s, c, pid, base, entry, rest); done { // ident.go
			return f, en
		}
	}
	return host(abs, abs[len("/proc/"):])
}

// nsPath resolves name beneath /proc/PID/ns (abs): a link to one of the
// process's namespaces, which reads as the host's link does ("net:[N]")
// and, followed, opens the host's namespace file (an nsfs file) as the
// host's link of a guest fd is opened. The guest's network and IPC
// namespaces are its own; the others are the host's, which setns(2), the
// one call that could enter one, refuses. Linux lets only a caller that
// may inspect the process follow or read these links.
func nsPath(s System, c *Caller, pid int, abs, name string) (Found, unix.Errno) {
	if strings.Contains(name, "/") {
		return Found{}, unix.ENOTDIR
	}
	if !mayInspect(s, c, pid) {
		return Found{}, unix.EACCES
	}
	rel := abs[len("/proc/"):]
	buf := make([]byte, 64)
	n, err := unix.Readlink("/proc/"+rel, buf)
	if err != nil || n <= 0 || n == len(buf) {
		return Found{}, unix.ENOENT
	}
	text := string(buf[:n])
	ref := &FdRef{Text: text, LKLFd: -1, Host: "/proc/" + rel, Acc: unix.O_RDONLY}
	return node(abs, &Node{Kind: Link, Like: rel, Link: text, Fd: ref})
}
