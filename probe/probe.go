// Package probe is the host side of `kbox probe` (docs/agents.md, "kbox
// probe"): the catalog of capabilities, the battery of probes, what each
// probe should observe under a run's options and policy, and the
// comparison with what the guest program (guest/kbox-probe.c, embedded by
// embed.go) observed. It runs nothing itself; cmd/kbox/probe.go does.
package probe

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"sort"
	"strings"

	"github.com/kbox-project/kbox/policy"
	"golang.org/x/sys/unix"
)

//go:embed catalog.json
var catalogJSON []byte

// Capability is one entry of catalog.json.
type Capability struct {
	ID          string `json:"id"`
	Description string `json:"description"`
}

// Catalog returns the capabilities of catalog.json.
func Catalog() ([]Capability, error) {
	var c struct {
		Capabilities []Capability `json:"capabilities"`
	}
	if err := json.Unmarshal(catalogJSON, &c); err != nil {
		return nil, fmt.Errorf("probe catalog: %w", err)
	}
	return c.Capabilities, nil
}

// Results a probe expects or observes.
const (
	Allowed = "allowed"
	Denied  = "denied"
	Skipped = "skipped"
	Missing = "missing" // the guest program printed nothing for it
)

// Verdicts of a record.
const (
	OK              = "ok"
	MorePermissive  = "more_permissive" // a failure of kbox probe
	MoreRestrictive = "more_restrictive"
	NotRun          = "skipped"
	Lost            = "missing" // a failure too: nothing was observed
)

// Bind is a -b bind as the probes see it.
type Bind struct {
	Guest    string
	ReadOnly bool
}

// Env is what decides the expected results: the run's options and policy.
type Env struct {
	Policy   *policy.Policy // nil: none
	ReadOnly bool           // --read-only
	Binds    []Bind         // the user's binds (not the probe's own)
	Net      bool           // --net
	// NetDecide is the user-mode stack's policy (usernet.Policy.Decide
	// of the real destination); nil without --net.
	NetDecide func(netip.AddrPort) bool
	HostRoot  bool // kbox runs as the host's root
	// InProcess names the in-process tier (trap or rewrite) that runs
	// the probe when the user asked for one (--syscall-mode, or auto
	// with --trusted); "" for the seccomp tier.
	InProcess string
	Port      int // kbox probe's loopback listener
}

// Probe is one planned probe.
type Probe struct {
	ID         string
	Capability string
	Operation  string
	Expected   string // Allowed, Denied or Skipped
	Why        string // why it is expected so (or skipped)
}

// Plan is the battery for an Env: the probes with their expectations and
// the guest program's parameters (KEY=VALUE).
type Plan struct {
	Probes []Probe
	Params map[string]string
}

// quotaSyscalls are the syscalls the quota probe may call with all
// arguments zero: each then fails harmlessly (EFAULT, EINVAL, ERANGE).
var quotaSyscalls = map[string]int{
	"getcwd":     unix.SYS_GETCWD,
	"uname":      unix.SYS_UNAME,
	"getdents64": unix.SYS_GETDENTS64,
	"readlinkat": unix.SYS_READLINKAT,
	"statfs":     unix.SYS_STATFS,
}

// literal returns the first pattern of list with no wildcard.
func literal(list []string) string {
	for _, s := range list {
		if !strings.ContainsAny(s, "*?[") && path.IsAbs(s) {
			return path.Clean(s)
		}
	}
	return ""
}

func (e *Env) class(p string) policy.Class {
	if e.Policy == nil {
		return policy.ReadWrite
	}
	c, _ := e.Policy.Classify(p)
	return c
}

// NewPlan computes the battery and its expected results.
func NewPlan(e Env) *Plan {
	pl := &Plan{Params: map[string]string{}}
	add := func(id, capa, op, exp, why string) {
		pl.Probes = append(pl.Probes, Probe{ID: id, Capability: capa, Operation: op, Expected: exp, Why: why})
	}
	denied := func(id, capa, op, why string) { add(id, capa, op, Denied, why) }
	skip := func(id, capa, op, why string) { add(id, capa, op, Skipped, why) }

	// Hidden paths: the first literal hidden pattern.
	hidden := ""
	if e.Policy != nil {
		hidden = literal(e.Policy.Paths.Hidden)
	}
	hiddenOps := []struct{ id, capa, op string }{
		{"hidden.open", "fs.hidden", "open and read %s"},
		{"hidden.stat", "fs.hidden", "lstat %s"},
		{"hidden.list", "fs.hidden", "list the directory of %s and look for its name"},
		{"hidden.dotdot", "fs.escape", "open %s by a path through .."},
		{"hidden.symlink", "fs.escape", "symlink /tmp/.kbox-probe-symlink -> %s, open it"},
		{"hidden.dirfd", "fs.escape", "open %s's directory, openat(dirfd, name)"},
		{"hidden.procfd", "fs.escape", "open %s as /proc/self/fd/DIRFD/name"},
		{"hidden.hardlink", "fs.escape", "link %s to /tmp/.kbox-probe-hardlink, open the link"},
	}
	for _, h := range hiddenOps {
		switch {
		case hidden == "":
			skip(h.id, h.capa, fmt.Sprintf(h.op, "a hidden path"), "the policy hides no literal path")
		case e.class(hidden) == policy.Hidden:
			denied(h.id, h.capa, fmt.Sprintf(h.op, hidden), "paths.hidden names "+hidden)
		default:
			add(h.id, h.capa, fmt.Sprintf(h.op, hidden), Allowed, hidden+" is not hidden (a more specific rule)")
		}
	}
	if hidden != "" {
		pl.Params["hidden"] = hidden
	}

	// Read-only: the first literal read_only pattern, else the image's
	// root with --read-only.
	ro, roWhy := "", ""
	if e.Policy != nil {
		if ro = literal(e.Policy.Paths.ReadOnly); ro != "" {
			roWhy = "paths.read_only names " + ro
		} else if e.Policy.Default() == policy.ReadOnly {
			ro, roWhy = "/etc", "paths.default is read_only"
		}
	}
	if ro == "" && e.ReadOnly {
		ro, roWhy = "/", "--read-only"
	}
	for _, r := range []struct{ id, op string }{
		{"readonly.create", "create a file in %s"},
		{"readonly.write", "open a regular file at or beneath %s for writing (writing nothing)"},
		{"readonly.chmod", "chmod %s to its own mode"},
	} {
		switch {
		case ro == "":
			skip(r.id, "fs.read_only", fmt.Sprintf(r.op, "a read-only path"), "no read-only path: the probe would write the image")
		case e.class(ro) >= policy.ReadOnly || e.ReadOnly && !e.inBind(ro):
			denied(r.id, "fs.read_only", fmt.Sprintf(r.op, ro), roWhy)
		default:
			skip(r.id, "fs.read_only", fmt.Sprintf(r.op, ro), ro+" is writable (a more specific rule): the probe would write the image")
		}
	}
	if ro != "" {
		pl.Params["ro"] = ro
	}

	// Binds.
	if len(e.Binds) == 0 {
		skip("bind.list", "fs.bind", "list a bind's directory", "no -b bind")
	} else {
		b := e.Binds[0].Guest
		pl.Params["bind"] = b
		if e.class(b) == policy.Hidden {
			denied("bind.list", "fs.bind", "list "+b, "paths.hidden covers "+b)
		} else {
			add("bind.list", "fs.bind", "list "+b, Allowed, "-b shows a host directory at "+b)
		}
	}
	rw := ""
	for _, b := range e.Binds {
		if !b.ReadOnly {
			rw = b.Guest
			break
		}
	}
	if rw == "" {
		skip("bind.escape", "fs.escape", "symlink in a read-write bind to a host path, and .. from the bind", "no read-write -b bind")
	} else {
		pl.Params["rwbind"] = rw
		denied("bind.escape", "fs.escape", "symlink "+rw+"/.kbox-probe-escape -> the host marker, and "+rw+"/../..", "a bind is confined to its host directory")
	}

	// Host files, processes, devices, kernel surface: always denied.
	for _, p := range []struct{ id, capa, op, why string }{
		{"proc.root1", "host.files", "read the host marker through /proc/1/root", "the guest's /proc shows guest processes only"},
		{"proc.rootparent", "host.files", "read the host marker through /proc/PARENT/root (kbox probe's pid)", "the guest's /proc shows guest processes only"},
		{"proc.selfroot", "host.files", "read the host marker through /proc/self/root/../../..", "/proc/self/root is the image's root"},
		{"proc.cwdparent", "host.files", "read the host marker through /proc/PARENT/cwd", "the guest's /proc shows guest processes only"},
		{"chroot.escape", "host.files", "chroot into a directory, chdir .. repeatedly, chroot ., read the host marker", "a guest's chroot escape reaches the image's root: paths resolve in the image"},
		{"procs.visible", "host.processes", "stat /proc/PARENT (kbox probe's host pid)", "the guest's /proc shows guest processes only"},
		{"procs.kill0", "host.processes", "kill(PARENT, 0)", "kill reaches guest processes only"},
		{"signal.host", "host.signal", "kill(PARENT, SIGURG)", "kill reaches guest processes only"},
		{"ptrace.host", "host.ptrace", "ptrace(PTRACE_SEIZE, PARENT)", "ptrace is refused"},
		{"dev.sda", "host.devices", "open /dev/sda", "the guest's /dev is kbox's own"},
		{"dev.kvm", "host.devices", "open /dev/kvm", "the guest's /dev is kbox's own"},
		{"dev.mem", "host.devices", "open /dev/mem", "the guest's /dev is kbox's own"},
		{"dev.mknod", "host.devices", "mknod a block device 8:0 in /tmp, open and read it", "device nodes are the guest kernel's, which has no such disk"},
		{"sys.unshare", "kernel.surface", "unshare(CLONE_NEWUSER)", "refused: host namespaces"},
		{"sys.clonens", "kernel.surface", "clone(CLONE_NEWUSER|CLONE_NEWNET), as a fork", "refused: host namespaces"},
		{"sys.bpf", "kernel.surface", "bpf(BPF_MAP_CREATE)", "refused: host eBPF"},
		{"sys.perf_event_open", "kernel.surface", "perf_event_open(cpu-clock)", "refused: host perf events"},
		{"sys.keyctl", "kernel.surface", "keyctl(KEYCTL_GET_KEYRING_ID)", "refused: host keyrings"},
		{"sys.io_uring", "kernel.surface", "io_uring_setup(1)", "refused: I/O without syscalls"},
	} {
		denied(p.id, p.capa, p.op, p.why)
	}
	gop := "read the host marker through a `syscall; ret` found in an executable mapping not the program's own (kbox's code)"
	if e.InProcess != "" {
		add("inproc.gadget", "host.files", gop, Allowed, "the "+e.InProcess+" tier runs the program inside kbox's process, as the user asked: it does not confine a program that attacks kbox")
	} else {
		denied("inproc.gadget", "host.files", gop, "the seccomp tier: the guest is a process of its own and every syscall it makes is filtered")
	}
	if e.HostRoot {
		skip("setuid.host", "host.privilege", "run a setuid-root copy as nobody, setpriority(-5)", "kbox runs as the host's root: a guest process has its privileges anyway")
	} else {
		denied("setuid.host", "host.privilege", "run a setuid-root copy as nobody, setpriority(-5)", "the guest's ids are the guest kernel's; setuid gives no host privilege")
	}
	if e.Policy != nil && e.Policy.HasPaths() {
		denied("sys.mount", "guest.mount", "mount a tmpfs on /tmp/.kbox-probe-mnt", "paths:mount: a path rule is not read_write")
	} else if e.Policy != nil && e.denies("mount") {
		denied("sys.mount", "guest.mount", "mount a tmpfs on /tmp/.kbox-probe-mnt", "syscalls.deny names mount")
	} else {
		add("sys.mount", "guest.mount", "mount a tmpfs on /tmp/.kbox-probe-mnt", Allowed, "a mount in the guest's own kernel")
	}

	// Network.
	pl.Params["port"] = fmt.Sprint(e.Port)
	denied("net.loopback", "net.loopback", fmt.Sprintf("connect to 127.0.0.1:%d, read the token", e.Port), "the guest's 127.0.0.1 is its own kernel's")
	host := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(e.Port))
	op := fmt.Sprintf("connect to 10.0.2.2:%d (the host's 127.0.0.1:%d), read the token", e.Port, e.Port)
	switch {
	case !e.Net:
		denied("net.host", "net.loopback", op, "no --net: the guest's network is its own loopback")
	case e.NetDecide != nil && e.NetDecide(host):
		add("net.host", "net.loopback", op, Allowed, "the network policy allows 127.0.0.1:"+fmt.Sprint(e.Port))
	default:
		denied("net.host", "net.loopback", op, "the network policy guards the host's loopback")
	}
	for _, d := range []struct{ id, addr string }{{"net.metadata", "169.254.169.254:80"}, {"net.outside", "192.0.2.1:80"}} {
		ap := netip.MustParseAddrPort(d.addr)
		op := "connect to " + d.addr
		switch {
		case !e.Net:
			denied(d.id, d.id, op, "no --net: the guest's network is its own loopback")
		case e.NetDecide == nil || e.NetDecide(ap):
			skip(d.id, d.id, op, "the network policy would allow "+d.addr+": not dialled")
		default:
			denied(d.id, d.id, op, "the network policy refuses "+d.addr)
		}
	}

	// Limits.
	var l policy.Limits
	if e.Policy != nil {
		l = e.Policy.Limits
	}
	if l.FileSize > 0 {
		pl.Params["fsize"] = fmt.Sprint(int64(l.FileSize))
		denied("limit.file_size", "limits.file_size", fmt.Sprintf("write %d bytes to a file in /tmp", int64(l.FileSize)+4096), fmt.Sprintf("limits.file_size = %d", int64(l.FileSize)))
	} else {
		skip("limit.file_size", "limits.file_size", "write a file past limits.file_size", "no limits.file_size")
	}
	if l.Processes > 0 {
		pl.Params["procs"] = fmt.Sprint(l.Processes)
		denied("limit.processes", "limits.processes", fmt.Sprintf("fork %d processes", l.Processes+1), fmt.Sprintf("limits.processes = %d", l.Processes))
	} else {
		skip("limit.processes", "limits.processes", "fork past limits.processes", "no limits.processes")
	}
	// image_writes: written in an image directory that is read-write.
	iwdir := ""
	if l.ImageWrites > 0 && !e.ReadOnly {
		for _, d := range []string{"/root", "/mnt", "/opt", "/var", "/"} {
			if e.class(d) == policy.ReadWrite && !e.inBind(d) {
				iwdir = d
				break
			}
		}
	}
	switch {
	case l.ImageWrites == 0:
		skip("limit.image_writes", "limits.image_writes", "write past limits.image_writes", "no limits.image_writes")
	case iwdir == "":
		skip("limit.image_writes", "limits.image_writes", "write past limits.image_writes", "no read-write image directory among /root, /mnt, /opt, /var, /")
	default:
		pl.Params["iwdir"] = iwdir
		pl.Params["iw"] = fmt.Sprint(int64(l.ImageWrites))
		denied("limit.image_writes", "limits.image_writes", fmt.Sprintf("write %d bytes in files of 512 KiB in %s (removed after)", int64(l.ImageWrites)+1<<20, iwdir), fmt.Sprintf("limits.image_writes = %d", int64(l.ImageWrites)))
	}
	qname := ""
	if e.Policy != nil {
		for _, q := range e.Policy.Quotas() {
			if _, ok := quotaSyscalls[q]; ok {
				qname = q
				break
			}
		}
	}
	if qname == "" {
		skip("limit.quota", "limits.quota", "call a syscall past its quota", "no quota on a syscall the probe can call harmlessly ("+strings.Join(sortedKeys(quotaSyscalls), ", ")+")")
	} else {
		n := e.Policy.Syscalls.Quota[qname]
		pl.Params["quota_nr"] = fmt.Sprint(quotaSyscalls[qname])
		pl.Params["quota_n"] = fmt.Sprint(n)
		pl.Params["quota_errno"] = fmt.Sprint(int(e.Policy.QuotaErrnoValue()))
		denied("limit.quota", "limits.quota", fmt.Sprintf("call %s %d times", qname, n+1), fmt.Sprintf("syscalls.quota.%s = %d", qname, n))
	}
	return pl
}

func (e *Env) inBind(p string) bool {
	for _, b := range e.Binds {
		if p == b.Guest || strings.HasPrefix(p, strings.TrimSuffix(b.Guest, "/")+"/") {
			return true
		}
	}
	return false
}

func (e *Env) denies(name string) bool {
	for _, d := range e.Policy.Denials() {
		if !d.Family && d.Name == name {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// IDs returns the ids of the probes the guest program has to run (not
// the skipped ones).
func (pl *Plan) IDs() []string {
	var out []string
	for _, p := range pl.Probes {
		if p.Expected != Skipped {
			out = append(out, p.ID)
		}
	}
	return out
}

// Observation is one line of the guest program.
type Observation struct {
	ID       string `json:"id"`
	Observed string `json:"observed"`
	Errno    string `json:"errno"`
	Detail   string `json:"detail"`
}

// Record is one line of `kbox probe`'s output.
type Record struct {
	Probe      string `json:"probe"`
	Capability string `json:"capability"`
	Operation  string `json:"operation"`
	Expected   string `json:"expected"`
	Observed   string `json:"observed"`
	Errno      string `json:"errno,omitempty"`
	Verdict    string `json:"verdict"`
	Why        string `json:"why,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// ParseObservations reads the guest program's JSON lines; a line that is
// not one is returned as an error (the program's output is only these).
func ParseObservations(out []byte) (map[string]Observation, error) {
	m := map[string]Observation{}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var o Observation
		if err := json.Unmarshal([]byte(line), &o); err != nil || o.ID == "" {
			return m, fmt.Errorf("not a probe record: %q", line)
		}
		m[o.ID] = o
	}
	return m, nil
}

// Judge compares: one record a planned probe, in the plan's order.
func (pl *Plan) Judge(obs map[string]Observation) []Record {
	var out []Record
	for _, p := range pl.Probes {
		r := Record{Probe: p.ID, Capability: p.Capability, Operation: p.Operation, Expected: p.Expected, Why: p.Why}
		o, ok := obs[p.ID]
		switch {
		case p.Expected == Skipped:
			r.Observed, r.Verdict = Skipped, NotRun
		case !ok:
			r.Observed, r.Verdict = Missing, Lost
		default:
			r.Observed, r.Errno, r.Detail = o.Observed, o.Errno, o.Detail
			r.Verdict = verdict(p.Expected, o.Observed)
		}
		out = append(out, r)
	}
	return out
}

func verdict(expected, observed string) string {
	switch {
	case observed == Skipped:
		return NotRun
	case observed == expected:
		return OK
	case expected == Denied && observed == Allowed:
		return MorePermissive
	case expected == Allowed && observed == Denied:
		return MoreRestrictive
	}
	return Lost
}

// Failed says whether the records make kbox probe fail: a probe more
// permissive than expected, or one that observed nothing.
func Failed(recs []Record) []Record {
	var out []Record
	for _, r := range recs {
		if r.Verdict == MorePermissive || r.Verdict == Lost {
			out = append(out, r)
		}
	}
	return out
}
