package supervisor

import (
	"bytes"
	"encoding/binary"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// How the seccomp tier runs an execve the engine accepted (dispatch.Exec):
// the host kernel executes sealed copies of the program, installed in the
// guest at fixed fds (ExecFD, InterpFD, LoaderFD), with PT_INTERP patched
// to /proc/self/fd/N. A seccomp notification cannot change the syscall's
// arguments, so the guest's own path string is overwritten with the
// program's base name, which resolves in the guest's host cwd (the stage
// directory, private to the run) to a link to /proc/self/fd/ExecFD. The
// base name always fits, and when argv[0] shares the path's memory (as
// shells do) it still names the program. No other host file is ever
// executed in its place: the first notification after the exec checks
// that (execTier.checkExec).

// Fixed guest fd numbers used by execve: the prepared program, its
// interpreter, and the interpreter's own loader (for #! scripts). The
// engine keeps the guest's hard fd limit above them (dispatch.ExecFDs).
const (
	ExecFD   = dispatch.ExecFDs - 3
	InterpFD = dispatch.ExecFDs - 2
	LoaderFD = dispatch.ExecFDs - 1
)

// execTier is the seccomp tier as the engine sees it (dispatch.Tier).
type execTier struct {
	stage string // the guest's host cwd: staging links
	mu    sync.Mutex
	// putBacks are the path strings overwritten in memory that a parent
	// shares with its exec'ing child, not yet put back (putBack). Only
	// the serving thread touches it.
	putBacks []*putBack
	// firstExec, when set, is called once, after the first execve is
	// answered (Config.Phase).
	firstExec func()
}

// execCheck is what the first notification after a continued execve
// checks and restores (dispatch.Proc.TierData).
type execCheck struct {
	fix *argFix
	// put back is the guest's path string, overwritten for the exec, to
	// write back into the memory of process pid, which shared the
	// caller's memory (a vfork or CLONE_VM child: posix_spawn, system):
	// its own string would stay overwritten otherwise.
	putBack *putBack
}

type putBack struct {
	pid    int    // the process whose memory the exec'ing child shared
	child  int    // the exec'ing child
	addr   uint64 // where the path string is
	orig   []byte // the guest's string there
	staged []byte // what kbox wrote over it, as long as orig
}

// Exec serves an execve the engine accepted.
func (t *execTier) Exec(r *dispatch.Request, x *dispatch.Exec) dispatch.Result {
	disp := x.Disp
	fail := func(en unix.Errno) dispatch.Result { return dispatch.Result{Disp: disp, Errno: en} }
	if x.Script {
		// The exec image is a one-line script naming the interpreter
		// installed at InterpFD; the interpreter then opens the name it
		// was given, which the engine maps back to this script
		// (Proc.ExpectScript).
		if en := installELF(r, x, InterpFD); en != 0 {
			return fail(en)
		}
		// The interpreter is named through a staging link with its own
		// base name, so that multi-call binaries (busybox) still see
		// which program they are: in the stage's i/, beside the
		// programs' directory, so that no program's name meets it.
		iname := stageName(x.ScriptInterp)
		if en := t.stageLinkIn("../i", iname, InterpFD); en != 0 {
			return fail(en)
		}
		line := "#!../i/" + iname
		if x.ScriptArg != "" {
			line += " " + x.ScriptArg
		}
		line += "\n"
		sfd, err := unix.MemfdCreate("kbox-script:"+x.Path, unix.MFD_CLOEXEC)
		if err != nil {
			return fail(unix.ENOMEM)
		}
		unix.Write(sfd, []byte(line))
		if en := install(r, sfd, ExecFD); en != 0 {
			return fail(en)
		}
	} else if en := installELF(r, x, ExecFD); en != 0 {
		return fail(en)
	}
	// What the host kernel will resolve: the guest's own string, from its
	// host cwd (the staging directory) or from dirfd.
	var name string // the string written over the guest's, "" to keep it
	var fix *argFix
	var scriptNames [2]string // what the interpreter opens the script as
	dirfdIgnored := false     // an absolute path: the kernel ignores dirfd
	switch {
	case x.ByFd:
		// The file is fd itself: the prepared image goes in its place
		// (installAt), and the kernel names a script /dev/fd/N.
		if en := installAt(r, x.Dirfd, ExecFD, x.Script); en != 0 {
			return fail(en)
		}
		scriptNames = [2]string{"/dev/fd/" + strconv.Itoa(int(x.Dirfd)), ""}
	case x.Script:
		// The interpreter gets the string as its $0: a staging path of
		// the same length stands for it, and fixArgs puts the guest's
		// string back in the interpreter's arguments.
		rel, ok := sameLengthStage(x.Given)
		if !ok || t.stageLinkAt(rel) != 0 {
			rel = stageName(x.Path) // the base name, as a last resort
			if en := t.stageLinkIn("", rel, ExecFD); en != 0 {
				return fail(en)
			}
		}
		name = rel
		prefix, asGiven := "", x.Given
		if x.Dirfd != unix.AT_FDCWD {
			// The kernel names it relative to the directory fd.
			prefix = "/dev/fd/" + strconv.Itoa(int(x.Dirfd)) + "/"
			if !strings.HasPrefix(x.Given, "/") {
				asGiven = prefix + x.Given
			}
		}
		scriptNames = [2]string{prefix + rel, asGiven}
		if prefix+rel != asGiven && len(prefix+rel) == len(asGiven) {
			k := 1
			if x.ScriptArg != "" {
				k = 2
			}
			fix = &argFix{index: k, from: prefix + rel, to: asGiven}
		}
	case x.Dirfd == unix.AT_FDCWD && sameLengthStageOK(t, x.Given, &name):
		// A staging path as long as the path given: a shell passes one
		// string as the path and argv[0], so argv[0] was the staging
		// name, and a program that finds itself by argv[0] (a Python
		// venv's python, /tmp/v/bin/python3, looks for pyvenv.cfg
		// beside it) went astray. fixArgs gives argv[0] and AT_EXECFN
		// back as the guest wrote them.
		if name != x.Given {
			fix = &argFix{index: 0, from: name, to: x.Given}
		}
	default:
		name = stageName(x.Path)
		if en := t.stageLinkIn("", name, ExecFD); en != 0 {
			return fail(en)
		}
		if x.Dirfd != unix.AT_FDCWD && strings.HasPrefix(x.Given, "/") {
			// An absolute path ignores the directory fd, which may be
			// anything (-1): the staging link is named absolutely,
			// through the guest's host cwd, when that fits.
			// Every staging link leads to the caller's own ExecFD, so
			// a one-letter one serves any program.
			if abs := "/proc/self/cwd/" + name; len(abs) <= len(x.Given) {
				name, dirfdIgnored = abs, true
			} else if len("/proc/self/cwd/e") <= len(x.Given) && t.stageLinkIn("", "e", ExecFD) == 0 {
				name, dirfdIgnored = "/proc/self/cwd/e", true
			}
		}
	}
	if !x.ByFd && x.Dirfd != unix.AT_FDCWD && !dirfdIgnored {
		// With a directory fd the kernel resolves the (relative)
		// staging name from it: the staging directory goes in its
		// place.
		if en := t.installStageAt(r, x.Dirfd); en != 0 {
			return fail(en)
		}
	}
	var pb *putBack
	if name != "" && name != x.Given {
		if pb = sharesMemory(r, x.PathAddr, name); pb != nil {
			t.putBacks = append(t.putBacks, pb)
		}
		if err := r.G.WriteForce(x.PathAddr, append([]byte(name), 0)); err != nil {
			// The path string lives in read-only memory: it cannot be
			// redirected to the prepared image.
			return fail(unix.EFAULT)
		}
	}
	if r.G.Valid() != nil {
		return fail(unix.ENOENT)
	}
	if x.Script {
		r.P.ExpectScript(scriptNames, x.Path)
	}
	r.P.TierData = &execCheck{fix: fix, putBack: pb}
	if f := t.firstExec; f != nil {
		t.firstExec = nil
		f()
	}
	return dispatch.Result{Action: dispatch.Continue, Disp: disp}
}

// kcmpVM is kcmp(2)'s KCMP_VM: do two processes share their memory?
const kcmpVM = 1

// sharesMemory returns what to put back after the exec when the caller
// shares its memory with its parent (a CLONE_VM child that has not exec'd
// yet, while the parent waits for it: posix_spawn, vfork, system): the
// bytes at addr which the exec's path rewrite overwrites with name and
// its NUL, and the parent's pid. Nil when nothing shares the caller's
// memory.
func sharesMemory(r *dispatch.Request, addr uint64, name string) *putBack {
	n := len(name) + 1
	pid := r.G.Pid()
	ppid := parentPid(pid)
	if ppid <= 1 {
		return nil
	}
	if v, _, e := unix.Syscall6(unix.SYS_KCMP, uintptr(pid), uintptr(ppid), kcmpVM, 0, 0, 0); e != 0 || v != 0 {
		return nil
	}
	orig := make([]byte, n)
	k, _ := r.G.ReadSome(addr, orig)
	if k <= 0 {
		return nil
	}
	staged := append([]byte(name), 0)
	return &putBack{pid: ppid, child: pid, addr: addr, orig: orig[:k], staged: staged[:k]}
}

// parentPid reads the parent's pid of process pid from /proc (0 if gone).
func parentPid(pid int) int {
	b, err := hostproc.Read("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// putBackFor puts back now the strings of the memory pid uses (its own
// or its parent's) before pid execs: the parent resumed when its child's
// exec replaced the child's memory, after the kernel read the path, and
// may spawn again, from the same string, before that child's first
// syscall or its own next one.
func (t *execTier) putBackFor(pid int) {
	ppid := parentPid(pid)
	for _, pb := range t.putBacks {
		if pb.pid == pid || pb.pid == ppid {
			t.putBackDone(pb)
			t.putBackFor(pid) // the list changed
			return
		}
	}
}

// putBackWhileStopped puts back the strings of process tgid's memory whose
// child has exec'd (it no longer shares that memory, or is gone), as
// tgid's notification arrives: one of its threads waits in kbox. Python's
// subprocess, Go's os/exec and musl's posix_spawn close the exec's error
// pipe (a notified call) before the spawning thread goes on to free the
// string; glibc's posix_spawn has no pipe, and its string goes back at
// the child's first syscall.
func (t *execTier) putBackWhileStopped(tgid int) {
	for i := 0; i < len(t.putBacks); i++ {
		pb := t.putBacks[i]
		if pb.pid != tgid {
			continue
		}
		if v, _, e := unix.Syscall6(unix.SYS_KCMP, uintptr(pb.child), uintptr(pb.pid), kcmpVM, 0, 0, 0); e == 0 && v == 0 {
			continue // the child's exec has not replaced its memory yet
		}
		t.putBackDone(pb)
		i--
	}
}

// putBackDone puts pb back, once, and forgets it.
func (t *execTier) putBackDone(pb *putBack) {
	for i, p := range t.putBacks {
		if p == pb {
			t.putBacks = append(t.putBacks[:i], t.putBacks[i+1:]...)
			pb.put()
			return
		}
	}
}

// put writes the guest's string back into the parent's memory if that
// memory still holds what kbox wrote (read-only pages too, as a debugger
// writes): the parent resumed when the child's exec was done and may
// have freed the string and used the memory for something else since
// (Python's subprocess frees the path's bytes at once); writing the old
// string there corrupted the parent's heap (a Python that spawned with
// subprocess crashed in one run in two).
func (pb *putBack) put() {
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pb.pid)+"/mem", os.O_RDWR, 0)
	if err != nil {
		return // the parent is gone: nothing uses the memory
	}
	defer f.Close()
	cur := make([]byte, len(pb.staged))
	if n, _ := f.ReadAt(cur, int64(pb.addr)); n != len(cur) || !bytes.Equal(cur, pb.staged) {
		return // no longer the string kbox wrote: the memory is in other use
	}
	f.WriteAt(pb.orig, int64(pb.addr))
}

// asleep reports whether every thread of process pid sleeps in the
// kernel (none runs or may run at once in user space).
func asleep(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false
		}
		if st := b[i+2]; st != 'S' && st != 'D' && st != 'T' && st != 't' {
			return false
		}
	}
	return true
}

// checkExec runs before each notification (serve): it puts back the path
// strings of a spawning parent that waits in kbox now (putBackWhileStopped)
// or execs; and at the first notification of a process after a continued
// execve, it kills a process that runs anything but the program kbox
// prepared (execImageOK) and puts back a script's argument (fixArgs). It
// reports whether the notification may be served.
func (t *execTier) checkExec(req *dispatch.Request) bool {
	if len(t.putBacks) > 0 {
		if req.Nr == unix.SYS_EXECVE || req.Nr == unix.SYS_EXECVEAT {
			t.putBackFor(req.G.Pid())
		}
		t.putBackWhileStopped(req.P.Tgid)
	}
	c, pending := req.P.TierData.(*execCheck)
	if !pending {
		return true
	}
	req.P.TierData = nil
	if c.putBack != nil && asleep(c.putBack.pid) {
		// The exec is done (this is the new program), so the kernel has
		// read the path: the parent's string goes back as it was, now
		// if none of the parent's threads runs (it waits for this child,
		// which waits in kbox), else when it next waits in kbox
		// (putBackWhileStopped): a write while it runs could land after
		// it reused the memory (the check in put and the write are two
		// steps).
		t.putBackDone(c.putBack)
	}
	if !execImageOK(req.G.Pid()) {
		unix.Kill(req.P.Tgid, unix.SIGKILL)
		return false
	}
	if c.fix != nil {
		fixArgs(req, c.fix) // a script's $0 as given
	}
	return true
}

// install puts memfd into the guest at fd target (close-on-exec: the kernel
// opens it during execve, before close-on-exec fds go) and closes our copy.
func install(r *dispatch.Request, memfd, target int) unix.Errno {
	defer unix.Close(memfd)
	// The kernel installs nothing at or above the guest's soft
	// RLIMIT_NOFILE: a guest that lowered it (ulimit -n 256, Python's
	// setrlimit) could exec nothing (EBADF). kbox raises it for the
	// install and puts it back; the hard limit stays at least ExecFD's
	// and InterpFD's (dispatch's nofileSet).
	var old unix.Rlimit
	if unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, nil, &old) == nil && old.Cur <= uint64(target) && old.Max > uint64(target) {
		raised := unix.Rlimit{Cur: uint64(target) + 1, Max: old.Max}
		if unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, &raised, nil) == nil {
			defer unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, &old, nil)
		}
	}
	if _, err := r.G.AddFD(memfd, target, true); err != nil {
		return sysabi.ErrnoOr(err, unix.EMFILE)
	}
	return 0
}

// installELF installs the ELF that runs at fd at, with PT_INTERP naming
// fd at+1, and its loader at fd at+1.
func installELF(r *dispatch.Request, x *dispatch.Exec, at int) unix.Errno {
	memfd, en := x.ProgramMemfd("/proc/self/fd/" + strconv.Itoa(at+1))
	if en != 0 {
		return en
	}
	if en := install(r, memfd, at); en != 0 {
		return en
	}
	lfd, en := x.LoaderMemfd()
	if en != 0 || lfd < 0 {
		return en
	}
	return install(r, lfd, at+1)
}

// installAt puts the guest's own fd src (the prepared program) at guest fd
// fd, which the continued execveat names. A script keeps fd's
// close-on-exec flag, so that the kernel refuses it as Linux does when the
// interpreter could not open /dev/fd/N; a program is always close-on-exec.
func installAt(r *dispatch.Request, fd int32, src int, script bool) unix.Errno {
	pidfd, err := unix.PidfdOpen(r.P.Tgid, 0)
	if err != nil {
		return sysabi.ErrnoOr(err, unix.EIO)
	}
	hfd, err := unix.PidfdGetfd(pidfd, src, 0)
	unix.Close(pidfd)
	if err != nil {
		return sysabi.ErrnoOr(err, unix.EIO)
	}
	defer unix.Close(hfd)
	return addFDAt(r, hfd, fd, !script || dispatch.GuestCloexec(r, fd))
}

// installStageAt puts the staging directory at guest fd fd, the directory
// fd of an execveat whose name was rewritten to a staging name. It keeps
// fd's close-on-exec flag: a script's interpreter opens /dev/fd/N/name.
func (t *execTier) installStageAt(r *dispatch.Request, fd int32) unix.Errno {
	d, err := unix.Open(t.stage, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) // ADDFD takes no O_PATH file
	if err != nil {
		return sysabi.ErrnoOr(err, unix.EIO)
	}
	defer unix.Close(d)
	return addFDAt(r, d, fd, dispatch.GuestCloexec(r, fd))
}

// addFDAt installs kbox's hostfd in the guest at fd (dispatch.AddFDAt). A
// host fd number is replaced (so after an execveat that fails, the guest's
// fd is the prepared program or the staging directory: docs/tiers.md).
func addFDAt(r *dispatch.Request, hostfd int, fd int32, cloexec bool) unix.Errno {
	return dispatch.AddFDAt(r, hostfd, fd, cloexec)
}

// stageName is the name written over an execve path: the base name, or "x"
// for names that cannot be a file name.
func stageName(p string) string {
	b := path.Base(p)
	if b == "/" || b == "." || b == ".." || b == "" {
		return "x"
	}
	return b
}

// stageLinkAt makes stage/rel -> /proc/self/fd/ExecFD, with its
// directories; an entry already there must be such a link.
func (t *execTier) stageLinkAt(rel string) unix.Errno {
	rel = path.Clean(rel)
	if en := t.stageLinkIn(path.Dir(rel), path.Base(rel), ExecFD); en != 0 {
		return en
	}
	l, err := os.Readlink(filepath.Join(t.stage, rel))
	if err != nil || l != "/proc/self/fd/"+strconv.Itoa(ExecFD) {
		return unix.ENOENT
	}
	return 0
}

// stageLinkIn makes stage/dir/name -> /proc/self/fd/fd if missing.
func (t *execTier) stageLinkIn(dir, name string, fd int) unix.Errno {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := filepath.Join(t.stage, dir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return unix.ENOMEM
	}
	err := os.Symlink("/proc/self/fd/"+strconv.Itoa(fd), filepath.Join(d, name))
	if err != nil && !os.IsExist(err) {
		return unix.ENOMEM
	}
	return 0
}

// sameLengthStage returns a staging path for a script's path as given, of
// the same length, relative (resolved in the staging directory) and with
// the same base name (the task's comm): "/opt/x/s.sh" -> "opt//x/s.sh",
// "../x/s.sh" -> "__/x/s.sh". The interpreter gets it as its argument, and
// fixArgs writes the given path back over it. It fails for a single
// absolute component ("/s.sh" has no slash to double) and for paths that
// would leave the staging directory (../i holds the interpreters' links).
func sameLengthStage(given string) (string, bool) {
	rel := strings.TrimLeft(given, "/")
	lead := len(given) - len(rel)
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		if c == ".." {
			parts[i] = "__"
		}
	}
	if len(parts) == 0 || parts[len(parts)-1] == "" || parts[len(parts)-1] == "." || parts[len(parts)-1] == "__" {
		return "", false
	}
	rel = strings.Join(parts, "/")
	if lead > 0 {
		i := strings.IndexByte(rel, '/')
		if i < 0 {
			return "", false
		}
		rel = rel[:i] + strings.Repeat("/", lead) + rel[i:]
	}
	if c := path.Clean(rel); c == ".." || strings.HasPrefix(c, "../") || c == "." {
		return "", false
	}
	return rel, true
}

// sameLengthStageOK sets *name to a staging path of given's length
// (sameLengthStage) whose link to the prepared program is in place, and
// reports whether there is one.
func sameLengthStageOK(t *execTier, given string, name *string) bool {
	rel, ok := sameLengthStage(given)
	if !ok || t.stageLinkAt(rel) != 0 {
		return false
	}
	*name = rel
	return true
}

// argFix is a script interpreter's argument to restore: the index-th
// argument and the string at AT_EXECFN read from, and become to (both of
// one length).
type argFix struct {
	index    int
	from, to string
}

// fixArgs runs at the first notification after a script's exec (the
// interpreter's set_tid_address, before its main): it writes the
// path the guest gave over the staging path of the same length in the
// interpreter's arguments, so that $0 is the path as given, and at
// AT_EXECFN. Nothing is written unless the staging path is found there.
func fixArgs(r *dispatch.Request, f *argFix) {
	pid := strconv.Itoa(r.G.Pid())
	b, err := hostproc.Read("/proc/" + pid + "/stat")
	if err != nil {
		return
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return
	}
	fl := strings.Fields(s[i+1:])
	if len(fl) < 47 {
		return
	}
	start, err1 := strconv.ParseUint(fl[45], 10, 64) // arg_start, field 48
	end, err2 := strconv.ParseUint(fl[46], 10, 64)   // arg_end, field 49
	if err1 != nil || err2 != nil || end <= start {
		return
	}
	buf := make([]byte, min(end-start, 16<<10))
	n, _ := r.G.ReadSome(start, buf)
	buf = buf[:n]
	off := 0
	for k := 0; k <= f.index && off < len(buf); k++ {
		j := strings.IndexByte(string(buf[off:]), 0)
		if j < 0 {
			return
		}
		if k == f.index && string(buf[off:off+j]) == f.from {
			r.G.Write(start+uint64(off), []byte(f.to))
		}
		off += j + 1
	}
	// AT_EXECFN points at the file name the kernel was given.
	aux, err := hostproc.Read("/proc/" + pid + "/auxv")
	if err != nil {
		return
	}
	for o := 0; o+16 <= len(aux); o += 16 {
		if binary.LittleEndian.Uint64(aux[o:]) != atExecfn {
			continue
		}
		at := binary.LittleEndian.Uint64(aux[o+8:])
		cur := make([]byte, len(f.from)+1)
		if r.G.Read(at, cur) == nil && string(cur) == f.from+"\x00" {
			r.G.Write(at, []byte(f.to))
		}
	}
}

// atExecfn is AT_EXECFN.
const atExecfn = 31

// execMemfdPrefix is how /proc/PID/exe reads for a program kbox prepared
// (the memfd's name, as the kernel shows it).
const execMemfdPrefix = "/memfd:kbox-exec:"

// execImageOK reports whether task tid runs a program kbox prepared.
//
// A continued execve makes the host kernel read the path string again from
// guest memory, after kbox rewrote it to the staging name. Another thread
// sharing that memory could swap the string in between (the TOCTOU of any
// continued path syscall) and have a host program executed. The first
// notification after each continued execve therefore checks the process's
// executable, and kbox kills a process that runs anything else: it never
// gets a file, a path or an identity served. docs/security.md says what
// remains (native-only syscalls before that first notification).
func execImageOK(tid int) bool {
	var buf [256]byte
	n, err := unix.Readlink("/proc/"+strconv.Itoa(tid)+"/exe", buf[:])
	if err != nil {
		return false
	}
	return strings.HasPrefix(string(buf[:n]), execMemfdPrefix)
}
