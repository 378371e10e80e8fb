package dispatch

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/policy"
	"github.com/kbox-project/kbox/procfs"
	"golang.org/x/sys/unix"
)

// Policy enforcement (--policy, package policy), at the engine's two
// single points: every guest path the engine resolves (classifyN, after
// the lexical cleaning, /proc and /dev/fd links and dirfds), and every
// syscall Dispatch serves (denials, quotas, the process count). A refusal
// is counted by its rule, named in the request (Request.Rule: the trace
// shows it) and reported to Engine.OnRefuse (the audit log).

// Policy is a policy compiled for this architecture's syscall table.
type Policy struct {
	P     *policy.Policy
	paths bool
	deny  [MaxNr]denial
	quota [MaxNr]int16 // 1 + index in quotas; 0: none
	// quotas are the quota rules, counted across the whole run.
	quotas     []*quotaRule
	quotaErrno unix.Errno
	maxProcs   int
	// seesForks: a rule counts or refuses processes (limits.processes,
	// or fork, vfork or clone denied or counted).
	seesForks bool
	// imageWrites is limits.image_writes (bytes); imageDev the image
	// filesystem's LKL device once ImageWriteQuota set it up.
	imageWrites int64
	imageDev    atomic.Uint64
	// hiddenInodes are the inodes of hidden files that have other names
	// (ScanHidden): a name outside the hidden patterns is hidden too.
	hiddenInodes map[devIno]string
	// NotEnforced names the syscalls of denied or limited families that
	// run natively in the seccomp tier: the engine never sees them.
	NotEnforced []string

	mu       sync.Mutex
	refusals map[string]*atomic.Uint64

	canon canonCache // canonPaths' results
}

type denial struct {
	en   unix.Errno
	rule string
}

type quotaRule struct {
	rule  string
	limit int64
	n     atomic.Int64
}

// CompilePolicy resolves p's syscall names against the syscall table:
// an unknown name or family, or a syscall the engine never sees (it runs
// natively), is an error.
func CompilePolicy(p *policy.Policy) (*Policy, error) {
	c := &Policy{P: p, paths: p.HasPaths(), quotaErrno: p.QuotaErrnoValue(), maxProcs: p.Limits.Processes,
		imageWrites: int64(p.Limits.ImageWrites), refusals: map[string]*atomic.Uint64{}}
	notEnforced := map[string]bool{}
	members := func(key string) ([]int, error) {
		var out []int
		if fam, isFam := strings.CutPrefix(key, "family:"); isFam {
			found := false
			for i, n := range familyNames {
				if n == fam {
					found = true
					Syscalls(func(nr int, s *Syscall) {
						if s.Fam != Family(i) {
							return
						}
						if s.How == Native {
							notEnforced[s.Name] = true
							return
						}
						out = append(out, nr)
					})
				}
			}
			if !found {
				return nil, fmt.Errorf("unknown family %q (families: %s)", fam, strings.Join(familyNames[:], ", "))
			}
			return out, nil
		}
		nr := -1
		Syscalls(func(n int, s *Syscall) {
			if s.Name == key {
				nr = n
				if s.How == Native {
					nr = -2
				}
			}
		})
		switch nr {
		case -1:
			return nil, fmt.Errorf("unknown syscall %q", key)
		case -2:
			return nil, fmt.Errorf("%s runs natively (on the host, without kbox): it cannot be denied or limited yet", key)
		}
		return []int{nr}, nil
	}
	for _, d := range p.Denials() {
		key := d.Name
		if d.Family {
			key = "family:" + key
		}
		nrs, err := members(key)
		if err != nil {
			return nil, fmt.Errorf("syscalls.deny: %w", err)
		}
		for _, nr := range nrs {
			c.deny[nr] = denial{en: d.Errno, rule: "deny:" + key}
		}
	}
	for _, key := range p.Quotas() {
		nrs, err := members(key)
		if err != nil {
			return nil, fmt.Errorf("syscalls.quota: %w", err)
		}
		q := &quotaRule{rule: "quota:" + key, limit: p.Syscalls.Quota[key]}
		c.quotas = append(c.quotas, q)
		for _, nr := range nrs {
			c.quota[nr] = int16(len(c.quotas))
		}
	}
	c.seesForks = c.maxProcs > 0
	Syscalls(func(nr int, s *Syscall) {
		if s.Facts&ForkLike != 0 && (c.deny[nr].rule != "" || c.quota[nr] != 0) {
			c.seesForks = true
		}
	})
	for n := range notEnforced {
		c.NotEnforced = append(c.NotEnforced, n)
	}
	sort.Strings(c.NotEnforced)
	return c, nil
}

// SeesForks says that the policy counts or refuses processes, so the
// seccomp tier must notify every fork, vfork and clone (ForkLike), at the
// price of their EINTR when a signal comes before kbox received one.
func (c *Policy) SeesForks() bool { return c != nil && c.seesForks }

// Refusals returns how many calls each rule refused.
func (c *Policy) Refusals() map[string]uint64 {
	out := map[string]uint64{}
	if c == nil {
		return out
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.refusals {
		out[k] = v.Load()
	}
	return out
}

// Refusal is one call a policy rule refused, as Engine.OnRefuse sees it.
type Refusal struct {
	Pid     int
	Syscall string
	Path    string // the guest path checked, "" for a syscall rule
	Rule    string
	Errno   unix.Errno
}

// refuse counts a refusal by rule, names the rule in r and reports it.
func (e *Engine) refuse(r *Request, rule, p string, en unix.Errno) unix.Errno {
	c := e.Opt.Policy
	c.mu.Lock()
	n := c.refusals[rule]
	if n == nil {
		n = new(atomic.Uint64)
		c.refusals[rule] = n
	}
	c.mu.Unlock()
	n.Add(1)
	if r != nil {
		r.Rule = rule
	}
	if e.OnRefuse != nil {
		ref := &Refusal{Path: p, Rule: rule, Errno: en}
		if r != nil {
			ref.Syscall = nrNames[r.Nr]
			if r.G != nil {
				ref.Pid = r.G.Pid()
			}
		}
		e.OnRefuse(ref)
	}
	return en
}

// policyCall applies the syscall rules to r before it is served.
func (e *Engine) policyCall(r *Request) (Result, bool) {
	c := e.Opt.Policy
	if d := c.deny[r.Nr]; d.en != 0 {
		return errno(e.refuse(r, d.rule, "", d.en), Denied), true
	}
	if qi := c.quota[r.Nr]; qi != 0 {
		q := c.quotas[qi-1]
		if q.n.Add(1) > q.limit {
			return errno(e.refuse(r, q.rule, "", c.quotaErrno), Denied), true
		}
	}
	if c.maxProcs > 0 && e.forks(r) && e.guestProcesses() >= c.maxProcs {
		return errno(e.refuse(r, "limits.processes", "", unix.EAGAIN), Denied), true
	}
	if c.paths && mountOps[r.Nr] {
		// A mount (a bind mount of a hidden directory elsewhere) would
		// give a protected file a path no pattern names: LKL's own
		// resolution then reports the new path.
		return errno(e.refuse(r, "paths:mount", "", unix.EPERM), Denied), true
	}
	if fdOps[r.Nr] && r.P != nil {
		if en := e.policyFd(r); en != 0 {
			return errno(en, Denied), true
		}
	}
	if c.imageWrites > 0 && imageWriteOps[r.Nr] && r.P != nil {
		if en := e.policyImageWrite(r); en != 0 {
			return errno(en, Denied), true
		}
	}
	return Result{}, false
}

// imageWriteOps are the calls through which kbox itself writes an image
// file for a guest (a virtual fd: a file above the shadow size).
var imageWriteOps = func() (m [MaxNr]bool) {
	for _, n := range []string{"write", "pwrite64", "writev", "pwritev", "pwritev2", "fallocate"} {
		Syscalls(func(nr int, s *Syscall) {
			if s.Name == n {
				m[nr] = true
			}
		})
	}
	return
}()

// ImageWriteQuota sets up limits.image_writes on the image mounted at the
// guest's root: from now on its used space may grow by that many bytes.
// Guests' writes to shadows fail natively with ENOSPC beyond it (the
// shadows' space bound, shadowfd/space.go); kbox's own writes through
// virtual fds are checked in policyImageWrite.
func (e *Engine) ImageWriteQuota() error {
	c := e.Opt.Policy
	if c == nil || c.imageWrites <= 0 {
		return nil
	}
	fd, err := lkl.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer lkl.Close(fd)
	st, err := lkl.Fstat(fd)
	if err != nil {
		return err
	}
	if err := e.Shadows.Quota(st.Dev, fd, c.imageWrites); err != nil {
		return err
	}
	c.imageDev.Store(st.Dev + 1) // +1: 0 means not set up
	return nil
}

// policyImageWrite applies limits.image_writes to a write kbox makes
// through a virtual fd of an image file: ENOSPC once the image has grown
// by the limit; a write or pwrite64 is cut to what is left (a short
// write, as on a nearly full disk). A vectored write or a fallocate is
// refused only once nothing is left: it may overshoot by its own size.
func (e *Engine) policyImageWrite(r *Request) unix.Errno {
	c := e.Opt.Policy
	dev1 := c.imageDev.Load()
	if dev1 == 0 {
		return 0
	}
	lfd, en := vfd(r, r.Args[0])
	if en != 0 {
		return 0 // not a virtual fd: a shadow (bounded natively) or a host file
	}
	st, err := lkl.Fstat(lfd)
	if err != nil || st.Dev != dev1-1 {
		return 0
	}
	rem, ok := e.Shadows.Remaining(st.Dev, lfd)
	if !ok {
		return 0
	}
	if rem <= 0 {
		return e.refuse(r, "limits.image_writes", "", unix.ENOSPC)
	}
	switch nrNames[r.Nr] {
	case "write", "pwrite64":
		if int64(r.Args[2]) > rem {
			r.Args[2] = uint64(rem)
		}
	}
	return 0
}

// guestProcesses counts the guest's processes: the first guest process
// and its descendants as the host sees them (a child that has not made a
// notified syscall yet is not known to the engine), with the orphans the
// keeper adopted that the engine knows and their descendants; without a
// keeper, the processes the engine knows.
func (e *Engine) guestProcesses() int {
	if e.Keeper <= 0 {
		return len(e.Tgids(nil))
	}
	seen := map[int]bool{}
	var queue []int
	if e.RootPid > 0 {
		queue = append(queue, e.RootPid)
	}
	for _, c := range procfs.ChildrenOf(e.Keeper) {
		if e.RootPid <= 0 || e.procOf(c) != nil {
			// An orphan of the guest's, or a session's process (the
			// spawner, BeginSession, has no other children).
			queue = append(queue, c)
		}
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		queue = append(queue, procfs.ChildrenOf(pid)...)
	}
	return len(seen)
}

// forks says that r makes a new process (not a thread).
func (e *Engine) forks(r *Request) bool {
	switch nrNames[r.Nr] {
	case "fork", "vfork":
		return true
	case "clone":
		return r.Args[0]&unix.CLONE_THREAD == 0
	case "clone3":
		var b [8]byte
		if r.G == nil || r.G.Read(r.Args[0], b[:]) != nil {
			return true
		}
		return binary.NativeEndian.Uint64(b[:])&unix.CLONE_THREAD == 0
	}
	return false
}

// policyFd applies the path rules to the fd calls that change a file an
// fd opened for reading may name (fchmod, fchown, fsetxattr,
// fremovexattr, futimens): the fd's file, by its current path.
func (e *Engine) policyFd(r *Request) unix.Errno {
	c := e.Opt.Policy
	if !c.paths {
		return 0
	}
	if nrNames[r.Nr] == "utimensat" && r.Args[1] != 0 {
		return 0 // a path: checked where it is resolved
	}
	ref, en := e.fdRefOf(r.P.Tgid, int(int32(r.Args[0])))
	if en != 0 {
		return 0 // the call itself fails
	}
	return e.policyFdFile(r, ref)
}

// policyFdFile applies the path rules to the file behind ref, by its
// current path (none for a file with no image path): hidden ENOENT,
// read-only EROFS.
func (e *Engine) policyFdFile(r *Request, ref *procfs.FdRef) unix.Errno {
	c := e.Opt.Policy
	if c == nil || !c.paths || ref.Path == "" {
		return 0
	}
	class, rule := c.P.Classify(ref.Path)
	switch {
	case class == policy.Hidden:
		return e.refuse(r, rule, ref.Path, unix.ENOENT)
	case class == policy.ReadOnly:
		return e.refuse(r, rule, ref.Path, unix.EROFS)
	}
	return 0
}

// policyPath applies the path rules to t, a resolved target of r: the
// guest path as resolved lexically and, for an image path, as LKL
// resolves it (its directories' symlinks followed, and its own when it is
// one), the most restrictive of them. A hidden path is ENOENT; a
// read-only one EROFS for a call that changes it; moving or removing a
// directory beneath which a protected pattern may match is EPERM.
func (e *Engine) policyPath(r *Request, t *guestpath.Target) unix.Errno {
	c := e.Opt.Policy
	class, rule := c.P.Classify(t.Path)
	var canon [2]string
	if class != policy.Hidden && !t.Host && t.Proc == nil {
		canon = e.canonPaths(t.Path)
		for _, p := range canon {
			if p == "" || p == t.Path {
				continue
			}
			if k, kr := c.P.Classify(p); k > class {
				class, rule = k, kr
			}
		}
	}
	if brokenHidden && class == policy.Hidden {
		class = policy.ReadWrite // a kbox_broken_policy build only
	}
	op := opNone
	if r != nil && r.Nr >= 0 && r.Nr < MaxNr {
		op = pathOps[r.Nr]
		if op == opOpen {
			op = openOp(r)
		}
	}
	if class != policy.Hidden && len(c.hiddenInodes) > 0 && !t.Host && t.Proc == nil {
		// A pre-existing hard link to a hidden file: its inode decides.
		var st lkl.Stat64
		var err error
		lkl.AsRoot(func() { st, err = lkl.Stat(t.Path, false) })
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			if h, ok := c.hiddenInodes[devIno{st.Dev, st.Ino}]; ok {
				class, rule = policy.Hidden, "hidden-inode:"+h
			}
		}
	}
	switch {
	case class == policy.Hidden:
		return e.refuse(r, rule, t.Path, unix.ENOENT)
	case class == policy.ReadOnly && op >= opWrite:
		return e.refuse(r, rule, t.Path, unix.EROFS)
	case op == opMove:
		for _, p := range []string{t.Path, canon[0]} {
			if p == "" {
				continue
			}
			if g := c.P.Guards(p); g != "" {
				return e.refuse(r, g, p, unix.EPERM)
			}
		}
	}
	return 0
}

// canonPaths returns the image path p as LKL resolves it: without
// following a last symlink, and following it when p is one ("" when it
// is not); for a path that does not exist, its directory's resolved path
// with its last name. Nothing is returned when LKL's own proc is not
// mounted (HasKernelProc), or the path cannot be resolved (the call then
// fails anyway).
func (e *Engine) canonPaths(p string) (out [2]string) {
	if !e.Opt.HasKernelProc {
		return
	}
	c := e.Opt.Policy
	gen := e.stats.Gen() + 1 // +1: slot generation 0 means empty
	if out, ok := c.canon.get(p, gen); ok {
		return out
	}
	out = resolveImagePath(e.Opt.KernelProc, p)
	if out[0] != "" {
		// Only what resolved is kept: a failure may be the caller's
		// (search permission), and another caller may get further.
		c.canon.put(p, gen, out)
	}
	return out
}

// canonCache keeps canonPaths' results while nothing changed the image:
// its entries are of the stat cache's generation (cache.go), which
// every syscall that is not a pure lookup moves on. A resolved path does
// not depend on the caller's credentials.
type canonCache struct {
	mu    sync.Mutex
	slots [256]canonSlot
}

type canonSlot struct {
	gen  uint64
	path string
	out  [2]string
}

func canonHash(p string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(p); i++ {
		h = (h ^ uint32(p[i])) * 16777619
	}
	return h % 256
}

func (c *canonCache) get(p string, gen uint64) ([2]string, bool) {
	s := &c.slots[canonHash(p)]
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.gen != gen || s.path != p {
		return [2]string{}, false
	}
	return s.out, true
}

func (c *canonCache) put(p string, gen uint64, out [2]string) {
	s := &c.slots[canonHash(p)]
	c.mu.Lock()
	s.gen, s.path, s.out = gen, p, out
	c.mu.Unlock()
}

// lklFlags converts host open flags to LKL's, close-on-exec.
func lklFlags(flags int) int { return int(lkl.OpenFlagsToLKL(uint32(flags))) | unix.O_CLOEXEC }

// What a path call does to the paths it names.
type pathOp uint8

const (
	opNone  pathOp = iota // reads: only hidden paths are refused
	opOpen                // an open: its flags say
	opWrite               // changes the file or creates or removes a name
	opMove                // removes or renames a name, maybe a directory's
)

var (
	pathOps [MaxNr]pathOp
	fdOps   [MaxNr]bool
	// mountOps are refused under path rules.
	mountOps [MaxNr]bool
	// nrNames is the table's names, for the policy's checks (read
	// through the table itself they would make an initialization cycle).
	nrNames [MaxNr]string
)

func init() {
	ops := map[string]pathOp{
		"open": opOpen, "openat": opOpen, "openat2": opOpen, "creat": opWrite,
		"mkdir": opWrite, "mkdirat": opWrite, "mknod": opWrite, "mknodat": opWrite,
		"link": opWrite, "linkat": opWrite, "symlink": opWrite, "symlinkat": opWrite,
		"chmod": opWrite, "fchmodat": opWrite, "fchmodat2": opWrite,
		"chown": opWrite, "lchown": opWrite, "fchownat": opWrite,
		"truncate": opWrite, "utime": opWrite, "utimes": opWrite, "futimesat": opWrite, "utimensat": opWrite,
		"setxattr": opWrite, "lsetxattr": opWrite, "removexattr": opWrite, "lremovexattr": opWrite,
		"setxattrat": opWrite, "removexattrat": opWrite, "bind": opWrite, "mount": opWrite, "umount2": opWrite,
		"unlink": opMove, "unlinkat": opMove, "rmdir": opMove, "rename": opMove, "renameat": opMove, "renameat2": opMove,
	}
	fds := map[string]bool{"fchmod": true, "fchown": true, "fsetxattr": true, "fremovexattr": true, "utimensat": true}
	mounts := map[string]bool{"mount": true, "move_mount": true, "open_tree": true, "fsmount": true, "fsopen": true,
		"fsconfig": true, "mount_setattr": true, "open_tree_attr": true}
	Syscalls(func(nr int, s *Syscall) {
		mountOps[nr] = mounts[s.Name]
		nrNames[nr] = s.Name
		pathOps[nr] = ops[s.Name]
		fdOps[nr] = fds[s.Name]
	})
}

// openOp is what an open asks for: a write when it may create, truncate
// or write.
func openOp(r *Request) pathOp {
	var flags uint64
	switch nrNames[r.Nr] {
	case "open":
		flags = r.Args[1]
	case "openat":
		flags = r.Args[2]
	case "openat2":
		var b [8]byte
		if r.G == nil || r.G.Read(r.Args[2], b[:]) != nil {
			return opWrite // unreadable: the call fails anyway
		}
		flags = binary.NativeEndian.Uint64(b[:])
	}
	if flags&unix.O_PATH != 0 {
		return opNone
	}
	if flags&(unix.O_WRONLY|unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC) != 0 || flags&unix.O_TMPFILE == unix.O_TMPFILE {
		return opWrite
	}
	return opNone
}

// applyLimits sets the policy's rlimits on the first guest process before
// it runs (Begin): its children inherit them. RLIMIT_CPU is the CPU time
// of each process (SIGXCPU at the soft limit, SIGKILL a second later),
// RLIMIT_AS each process's address space, RLIMIT_FSIZE the size a
// process may write a file to natively (a shadow, a host file). Writes the
// engine makes for the guest through LKL (virtual fds: files above the
// shadow size) are not bounded by it.
func (e *Engine) applyLimits(pid int) error {
	c := e.Opt.Policy
	if c == nil || pid <= 0 {
		return nil
	}
	l := c.P.Limits
	set := func(res int, v uint64, hard uint64) error {
		lim := unix.Rlimit{Cur: v, Max: hard}
		if err := unix.Prlimit(pid, res, &lim, nil); err != nil {
			return err
		}
		return nil
	}
	if l.CPUTime > 0 {
		s := uint64((time.Duration(l.CPUTime) + time.Second - 1) / time.Second)
		if err := set(unix.RLIMIT_CPU, s, s+1); err != nil {
			return fmt.Errorf("limits.cpu_time: %w", err)
		}
	}
	if l.AddressSpace > 0 {
		if err := set(unix.RLIMIT_AS, uint64(l.AddressSpace), uint64(l.AddressSpace)); err != nil {
			return fmt.Errorf("limits.address_space: %w", err)
		}
	}
	if l.FileSize > 0 {
		if err := set(unix.RLIMIT_FSIZE, uint64(l.FileSize), uint64(l.FileSize)); err != nil {
			return fmt.Errorf("limits.file_size: %w", err)
		}
	}
	return nil
}

// hideDirents removes from the getdents64 records in b the entries of
// directory dir that the policy hides, and returns the length left.
func (e *Engine) hideDirents(dir string, b []byte) int {
	c := e.Opt.Policy
	out := 0
	for in := 0; ; {
		name, reclen, ok := direntAt(b, in)
		if !ok {
			break // not a record: leave the rest as it is
		}
		n := string(name)
		hide := false
		if n != "." && n != ".." {
			class, _ := c.P.Classify(guestpath.Clean(dir, n))
			hide = class == policy.Hidden
		}
		if !hide {
			copy(b[out:], b[in:in+reclen])
			out += reclen
		}
		in += reclen
	}
	return out
}
