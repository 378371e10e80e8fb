package dispatch

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/gdbmirror"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"golang.org/x/sys/unix"
)

// Proc is the per-process state the engine keeps explicitly: cwd, umask,
// the virtual fd table and the credentials. Threads of one process share
// it (credentials too: libc makes every thread call set*id alike).
type Proc struct {
	Tgid int
	FDs  *fdtable.Table
	cred atomic.Pointer[procCred]

	// mu guards exe, the pending script and the identity below, and
	// serialises changes of cwd: an in-process tier serves the threads of
	// one process at the same time. cwd is read without it (every
	// relative path).
	mu  sync.Mutex
	cwd atomic.Pointer[string]
	// cwdGone says the directory cwd names was removed while it was the
	// working directory (removedDir).
	cwdGone atomic.Bool
	// root is the image path of the process's root (sys_file_chroot.go), nil
	// for the image's root.
	root atomic.Pointer[string]
	// exe is the image path of the program the process runs.
	exe string
	// ident is what the guest's /proc shows of the process that the
	// host's files cannot (procfs.Ident, procserve.go).
	ident procfs.Ident
	// parent is the process that forked it, while that one lives
	// (procserve.go's shownParent: no /proc read while it does).
	parent atomic.Pointer[Proc]
	// pendingScript is the guest path of a #! script being exec'd: its
	// interpreter opens one of pendingNames (names the tier gave it,
	// ExpectScript), which means this file. scriptPending says one is
	// set, so that opens check without the lock.
	pendingScript string
	pendingNames  [2]string
	scriptPending atomic.Bool

	// TierData is the tier's own state for the process (the seccomp
	// tier's check after a continued execve); the engine never touches
	// it, the tier synchronises its own use.
	TierData any
	// umask is the process's umask (proc.go): read from /proc when kbox
	// first sees the process, then kept by its umask(2) calls.
	umask atomic.Uint32
	// pidfd is a pidfd of the process plus one (0: none yet), kept for
	// pidfd_getfd of its fds (sys_net_socket.go).
	pidfd atomic.Int32
}

// getfd takes a copy of the process's fd with pidfd_getfd (the same open
// file description), through a pidfd kept for the process.
func (p *Proc) getfd(fd int) (int, error) {
	pfd := int(p.pidfd.Load()) - 1
	if pfd < 0 {
		n, err := unix.PidfdOpen(p.Tgid, 0)
		if err != nil {
			return -1, err
		}
		if !p.pidfd.CompareAndSwap(0, int32(n+1)) {
			unix.Close(n)
		}
		pfd = int(p.pidfd.Load()) - 1
	}
	return unix.PidfdGetfd(pfd, fd, 0)
}

// release drops what kbox holds for a process that is gone: its virtual
// fds and its pidfd.
func (p *Proc) release() {
	p.FDs.CloseAll()
	if pfd := p.pidfd.Swap(0); pfd > 0 {
		unix.Close(int(pfd) - 1)
	}
}

// ExpectScript says that the interpreter of the #! script at guest path
// script, being exec'd, will open it under one of names (a tier that runs
// it under another name than the guest gave: seccomp/supervisor/exec.go):
// the next open of one of them opens the script.
func (p *Proc) ExpectScript(names [2]string, script string) {
	p.mu.Lock()
	p.pendingNames, p.pendingScript = names, script
	p.scriptPending.Store(script != "")
	p.mu.Unlock()
}

// takeScript returns the script being exec'd when name is one under which
// its interpreter opens it, and forgets it; otherwise name.
func (p *Proc) takeScript(name string) string {
	if !p.scriptPending.Load() || name == "" {
		return name
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pendingScript != "" && (name == p.pendingNames[0] || name == p.pendingNames[1]) {
		name, p.pendingScript = p.pendingScript, ""
		p.scriptPending.Store(false)
	}
	return name
}

// Exe returns the image path of the program p runs ("" before kbox saw
// it exec one).
func (p *Proc) Exe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exe
}

// SetExe records the guest path of the program p now runs
// (/proc/PID/exe), as an exec served by the engine does: for a tier that
// starts a program itself (the first one of an in-process tier).
func (e *Engine) SetExe(p *Proc, path string) {
	exe := e.canonical(guestpath.Clean("/", path))
	p.mu.Lock()
	p.exe = exe
	p.mu.Unlock()
}

// Cred returns the process's credentials: the ids an in-process tier
// puts in a program's auxiliary vector.
func (p *Proc) Cred() Cred { return p.cred.Load().Cred }

// Cwd returns the process's guest working directory.
func (p *Proc) Cwd() string {
	if c := p.cwd.Load(); c != nil {
		return *c
	}
	return "/"
}

// SetCwd sets the guest working directory.
func (p *Proc) SetCwd(c string) {
	p.mu.Lock()
	p.cwd.Store(&c)
	p.cwdGone.Store(false)
	p.mu.Unlock()
}

// CwdGone reports whether the process's working directory was removed
// (rmdir, or a rename over it) while it was there. Linux keeps the
// process in the dead directory: getcwd is ENOENT, /proc/PID/cwd reads
// "PATH (deleted)", and no name is found in it, even when a new
// directory takes its path; ".." still leads to the parent.
func (p *Proc) CwdGone() bool { return p.cwdGone.Load() }

// procStatus reads /proc/PID/status of the host; nil if it cannot.
func procStatus(pid int) []byte {
	b, _ := hostproc.Read("/proc/" + strconv.Itoa(pid) + "/status")
	return b
}

// statusInt reads the decimal "key:\tvalue" field of status (procStatus).
func statusInt(status []byte, key string) (int, bool) {
	v, ok := hostproc.Field(status, key)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// statusField reads one decimal "Key:\tvalue" field of /proc/PID/status.
func statusField(pid int, key string) (int, bool) { return statusInt(procStatus(pid), key) }

// statusUmask reads the "Umask:" field (octal) of status (procStatus);
// 022 if it cannot.
func statusUmask(status []byte) uint32 {
	if v, ok := hostproc.Field(status, "Umask"); ok {
		if n, err := strconv.ParseUint(v, 8, 32); err == nil {
			return uint32(n) & 0o777
		}
	}
	return 0o022
}

// Start registers the first guest process.
func (e *Engine) Start(pid int, cwd string) *Proc {
	p := &Proc{Tgid: pid, FDs: e.newTable()}
	p.cwd.Store(&cwd)
	p.openPidfd()
	p.cred.Store(e.initCred)
	e.initOOM = procfs.HostOOMScoreAdj(pid)
	p.ident = procfs.Ident{OOMAdj: e.initOOM, OOMMin: e.initOOM}
	p.umask.Store(statusUmask(procStatus(pid)))
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
// after a fork (a new process inherits cwd, a copy of the fd table and the
// credentials). A known thread is found without a lock or an allocation.
//
// A child that has not made a notified syscall yet when its parent changes
// credentials or exits was registered then (registerChildren), with what
// it had from its parent. A process whose parent kbox does not know (its
// parent died of a signal before the child's first notification: it was
// reparented) gets the first process's credentials while no process has
// changed its own; once one has, it could be anybody's, and it is killed.
//
// Once credentials differ between processes, a known id is checked first
// (alive): fork and clone are not notified, so a task that died unseen (a
// thread's exit, a fatal signal) can have its id taken by a new task, once
// the kernel's ids wrap (pid_max), and must not pass for it.
//
// A new task is also shown to the tier's pins (Inherited) before it is
// served: it may have been made by a pinned task. A parent kbox has not
// seen either, but whose ancestor it knows, is registered first.
func (e *Engine) Lookup(tid int) *Proc {
	if p := (*e.procs.Load())[tid]; p != nil {
		if !e.credsChanged.Load() || p.alive(tid) {
			return p
		}
		e.forgetDead(tid, p)
	}
	if e.credsChanged.Load() || int64(len(*e.procs.Load())) >= e.sweepAt.Load() {
		// No entry of a task gone by now is left to be found. While
		// credentials are all alike, only now and then: the entries (and
		// pidfds) of tasks that died unseen must not pile up.
		e.sweepDead()
		e.sweepAt.Store(2*int64(len(*e.procs.Load())) + 64)
	}
	// One read of the task's status gives a new process's Tgid, PPid and
	// umask; a new thread's process is read apart.
	status := procStatus(tid)
	tgid, ok := statusInt(status, "Tgid")
	if !ok {
		tgid = tid
	}
	if tgid != tid {
		status = nil // the process's, read when needed
	}
	ppid := 0 // a new process's parent (a new thread's maker is its process)
	if tid == tgid || (*e.procs.Load())[tgid] == nil {
		if status == nil {
			status = procStatus(tgid)
		}
		ppid, _ = statusInt(status, "PPid")
	}
	if e.Pins != nil {
		e.Pins.Inherited(tid, tgid, ppid)
	}
	if known := *e.procs.Load(); ppid > 0 && known[tgid] == nil && known[ppid] == nil && e.unseenGuest(ppid) {
		// A parent that made no notified call since its own fork
		// (`(cmd &)`: the subshell forks cmd and exits) is registered
		// first, from its ancestor, as its first call would have.
		e.Lookup(ppid)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	procs := *e.procs.Load()
	if p := procs[tgid]; p != nil {
		e.setProcs(func(m map[int]*Proc) { m[tid] = p }) // a thread of a known process
		return p
	}
	if ppid == 0 {
		ppid, _ = statusField(tgid, "PPid") // its process went meanwhile
	}
	np := &Proc{Tgid: tgid, ident: procfs.Ident{OOMAdj: e.initOOM, OOMMin: e.initOOM}}
	np.openPidfd()
	if status == nil {
		status = procStatus(tgid)
	}
	np.umask.Store(statusUmask(status)) // as inherited at fork, or set since
	if parent := procs[ppid]; parent != nil && ppid != 0 {
		np.inherit(parent)
	}
	if np.FDs == nil {
		np.FDs = e.newTable()
		if e.credsChanged.Load() {
			np.cred.Store(e.unknownCred)
			fmt.Fprintf(os.Stderr, "kbox: process %d lost its parent before its first system call: its credentials are unknown, killed\n", tgid)
			unix.Kill(tgid, unix.SIGKILL)
		} else {
			np.cred.Store(e.initCred)
		}
	}
	e.setProcs(func(m map[int]*Proc) {
		m[tgid] = np
		m[tid] = np
	})
	return np
}

// maxUnseen bounds the chain of unseen parents Lookup registers.
const maxUnseen = 16

// unseenGuest reports whether process pid, which kbox does not know, is a
// guest's all the same: a known process is among its nearest ancestors.
// kbox itself and the host's init (the reapers of orphans) are not.
func (e *Engine) unseenGuest(pid int) bool {
	procs := *e.procs.Load()
	for range maxUnseen {
		pp, ok := statusField(pid, "PPid")
		switch {
		case !ok || pp <= 1 || pp == kboxPid:
			return false
		case procs[pp] != nil:
			return true
		}
		pid = pp
	}
	return false
}

// inherit gives a new process what it takes from its parent at fork.
func (np *Proc) inherit(parent *Proc) {
	np.cwd.Store(parent.cwd.Load())
	np.cwdGone.Store(parent.cwdGone.Load())
	np.exe = parent.Exe()
	np.root.Store(parent.root.Load())
	np.ident = parent.forkIdent()
	np.parent.Store(parent)
	np.FDs = parent.FDs.Fork()
	np.cred.Store(parent.cred.Load())
}

// adoptChildren registers the child processes p leaves that kbox has not
// seen yet, as their first notification would, before p exits: they are
// reparented then, and their parent could no longer be found. A daemon
// forks and its parent exits at once (busybox httpd): without this, the
// child's first call would find no parent, and it would lose its working
// directory and virtual fds.
func (e *Engine) adoptChildren(p *Proc) { e.registerChildren(p) }

// registerChildren registers the child processes of p that kbox has not
// seen yet (they have made no notified syscall), with what they take from
// p now: before p exits, and before p's credentials change (a child forked
// before a setuid keeps the ids it was forked with).
func (e *Engine) registerChildren(p *Proc) {
	dir := "/proc/" + strconv.Itoa(p.Tgid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if e.Pins != nil && (*e.procs.Load())[pid] == nil {
				e.Pins.Inherited(pid, pid, p.Tgid) // as Lookup would
			}
			e.mu.Lock()
			if (*e.procs.Load())[pid] == nil {
				np := &Proc{Tgid: pid}
				np.openPidfd()
				np.inherit(p)
				e.setProcs(func(m map[int]*Proc) { m[pid] = np })
			}
			e.mu.Unlock()
		}
	}
}

// sweepDead forgets the threads and processes that are gone without an
// exit_group (a thread's own exit, a fatal signal). Their entries would
// otherwise outlive them (their virtual fds and pidfds too). Lookup calls
// it for every new task once credentials differ between processes, and
// before that whenever the entries doubled; the check of a known id
// (alive) is what keeps a new task from passing for a dead one.
func (e *Engine) sweepDead() {
	var gone []int
	for id, p := range *e.procs.Load() {
		if !p.alive(id) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return
	}
	var dead []*Proc
	e.mu.Lock()
	e.setProcs(func(m map[int]*Proc) {
		left := map[*Proc]bool{}
		for _, id := range gone {
			left[m[id]] = false
			delete(m, id)
		}
		for _, p := range m {
			if _, seen := left[p]; seen {
				left[p] = true
			}
		}
		for p, alive := range left {
			if !alive {
				dead = append(dead, p)
			}
		}
	})
	e.mu.Unlock()
	for _, p := range dead {
		p.release()
	}
}

// alive says whether task tid is still the task kbox registered under
// this entry: the process's pidfd (opened when kbox first saw it) is not
// readable, so the process has not exited, and tid is the process itself
// or one of its threads (tgkill(tgid, tid, 0) fails for a task that is
// gone, and for an id now used in another thread group). Two syscalls, no
// allocation.
func (p *Proc) alive(tid int) bool {
	if pfd := p.pidfd.Load() - 1; pfd >= 0 {
		var fds [1]unix.PollFd
		fds[0] = unix.PollFd{Fd: pfd, Events: unix.POLLIN}
		if n, err := unix.Poll(fds[:], 0); err == nil && n > 0 {
			return false
		}
	}
	return tid == p.Tgid || unix.Tgkill(p.Tgid, tid, 0) != unix.ESRCH
}

// openPidfd opens the pidfd of a process kbox is registering (it is alive:
// it is notifying, or a listed child), which alive polls.
func (p *Proc) openPidfd() {
	if fd, err := unix.PidfdOpen(p.Tgid, 0); err == nil {
		p.pidfd.Store(int32(fd + 1))
	}
}

// forgetDead drops entry tid of process p, found dead by alive; when tid
// was the process itself, every entry of p, and p's fds once none is left.
func (e *Engine) forgetDead(tid int, p *Proc) {
	last := true
	e.mu.Lock()
	e.setProcs(func(m map[int]*Proc) {
		if m[tid] == p {
			delete(m, tid)
		}
		for k, v := range m {
			if v == p {
				if tid == p.Tgid {
					delete(m, k)
				} else {
					last = false
				}
			}
		}
	})
	e.mu.Unlock()
	if last {
		p.release()
	}
}

// Knows says whether the engine knows task tid (it has made a
// notification, or was registered by its parent).
func (e *Engine) Knows(tid int) bool { return (*e.procs.Load())[tid] != nil }

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
	// Closing its virtual fds open for writing may change LKL (an LKL
	// file's last close: sysClose): exit_group is OwnChange, and a process
	// killed by a signal ends here too.
	closes := p.FDs.Closes(false, readOnlyFile)
	p.release()
	if closes {
		e.stats.Changed()
	}
	if gdbmirror.On() {
		e.gdbPublish() // the debug mirror (gdb.go)
	}
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
		p.release()
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

// renamedDir follows a rename (exchange: RENAME_EXCHANGE) in the working
// directories of the guest's processes: Linux's cwd is the directory
// itself and moves with it, while kbox keeps its path (getcwd, relative
// paths). A cwd is canonical (chdir resolves it), so only a directory on
// it can match; most renames are of names no cwd holds, and cost nothing
// more than a look at each process's cwd.
func (e *Engine) renamedDir(from, to string, exchange bool) {
	procs := *e.procs.Load()
	holds := func(name string) bool {
		for _, p := range procs {
			if strings.Contains(p.Cwd()+"/", "/"+name+"/") {
				return true
			}
		}
		return false
	}
	if !holds(path.Base(from)) && !holds(path.Base(to)) {
		return
	}
	// The parents are where they were: the names are resolved now.
	from = path.Join(e.canonical(path.Dir(from)), path.Base(from))
	to = path.Join(e.canonical(path.Dir(to)), path.Base(to))
	seen := map[*Proc]bool{}
	for _, p := range procs {
		if seen[p] {
			continue
		}
		seen[p] = true
		p.mu.Lock()
		cwd := p.Cwd()
		if rest, ok := beneath(cwd, from); ok {
			cwd = to + rest
			p.cwd.Store(&cwd)
		} else if rest, ok := beneath(cwd, to); ok && exchange {
			cwd = from + rest
			p.cwd.Store(&cwd)
		} else if cwd == to {
			p.cwdGone.Store(true) // the empty directory the rename replaced
		}
		p.mu.Unlock()
	}
}

// removedDir follows the removal of directory p (rmdir, a guest path) in
// the working directories of the guest's processes: one that was p is
// gone (Proc.CwdGone). A name no cwd ends with costs one look at each
// process's cwd.
func (e *Engine) removedDir(p string) {
	base := path.Base(p)
	var abs string
	marked := false
	for _, pr := range *e.procs.Load() {
		if path.Base(pr.Cwd()) != base {
			continue
		}
		if abs == "" {
			abs = path.Join(e.canonical(path.Dir(p)), base)
		}
		pr.mu.Lock()
		if pr.Cwd() == abs && !pr.cwdGone.Load() {
			pr.cwdGone.Store(true)
			marked = true
		}
		pr.mu.Unlock()
	}
	if marked {
		e.changeDone() // answers prepared for relative paths
	}
}

// beneath reports whether p is dir or a path under it, with the rest.
func beneath(p, dir string) (string, bool) {
	if p == dir {
		return "", true
	}
	if len(p) > len(dir) && strings.HasPrefix(p, dir) && p[len(dir)] == '/' {
		return p[len(dir):], true
	}
	return "", false
}

// The guest's umask is a host process attribute: fork copies it, exec
// keeps it, and the host kernel answers umask(2). But the files it governs
// are created in LKL, whose own task has a umask of its own (022). So kbox
// keeps each guest process's umask (Proc.umask: read from /proc/PID/status
// "Umask:" when kbox first sees the process, then kept by its umask(2)
// calls, which are notified and continued), sets LKL's umask to 0 once,
// and takes the guest's umask out of the mode of every create it serves
// in LKL: open/openat/openat2/creat with O_CREAT or O_TMPFILE, mkdir(at),
// mknod(at), and the node of a bound socket, unless the directory it is
// made in has a default ACL, which then gives the new file its
// permissions in place of the umask, as on Linux (LKL applies it). Creates
// in a bind run on the host under the guest's umask (withUmask).

// lklUmaskZero makes LKL's umask 0: the guest's is applied by kbox. LKL's
// host threads share one fs_struct, so one call holds for all of them.
func lklUmaskZero() { lkl.Syscall6(lkl.SysUmask, 0, 0, 0, 0, 0, 0) }

// createMode is mode as an open with flags of LKL path p creates it: the
// guest's umask taken out when the open may create.
func createMode(r *Request, p string, flags int, mode uint32) uint32 {
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 || r.P == nil {
		return mode
	}
	dir := parentDir(p)
	if flags&unix.O_TMPFILE == unix.O_TMPFILE {
		dir = p // an unnamed file in directory p
	}
	return uint32(umaskIn(r, dir, uint64(mode)))
}

// umasked is the mode of a mkdir or mknod of LKL path p with the guest's
// umask taken out (the file type bits of mknod are not permission bits
// and stay).
func umasked(r *Request, p string, mode uint64) uintptr {
	return uintptr(umaskIn(r, parentDir(p), mode))
}

// umaskIn takes the guest's umask out of the mode of a file made in LKL
// directory dir, unless dir has a default ACL (then the ACL decides).
func umaskIn(r *Request, dir string, mode uint64) uint64 {
	mask := uint64(r.P.umask.Load())
	if mode&mask == 0 || lklDefaultACL(dir) {
		return mode
	}
	return mode &^ mask
}

// parentDir is the directory holding LKL path p's last component.
func parentDir(p string) string {
	if t := strings.TrimRight(p, "/"); t != "" {
		p = t
	}
	return path.Dir(p)
}

// aclDefault is the name of a directory's default ACL, NUL-terminated for
// LKL.
var aclDefault = []byte("system.posix_acl_default\x00")

// lklDefaultACL reports whether LKL directory dir has a default ACL (with
// the caller's credentials: reading it needs search permission only).
func lklDefaultACL(dir string) bool {
	n, le := lklPath(lkl.SysGetxattr, 0, dir, [6]uintptr{0, uptr(aclDefault), 0, 0})
	return le == 0 && n > 0
}

// hostUmaskMu serializes withUmask: the umask is one per kbox process.
var hostUmaskMu = make(chan struct{}, 1)

// withUmask runs a create on the host (in a bind) under umask mask, as
// the guest's own create would (a host directory's default ACL then
// applies as on Linux), and puts kbox's umask back.
func withUmask(mask uint32, fn func()) {
	hostUmaskMu <- struct{}{}
	old := unix.Umask(int(mask))
	defer func() {
		unix.Umask(old)
		<-hostUmaskMu
	}()
	fn()
}
