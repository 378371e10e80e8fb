package dispatch

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/elfload"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// set_tid_address is what every libc calls first in a new program, before
// main (static ones too, whose other early calls run natively): notified,
// it is where Dispatch checks what a continued execve runs (execImageOK)
// and restores a script's argument (fixArgs), before the program reads
// its arguments. It runs natively.
func sysSetTidAddress(e *Engine, r *Request) Result { return cont }

// MaxExecSize bounds an executable read from the image or a bind.
const MaxExecSize = 512 << 20

// A program is executed from memfds installed in the guest at fixed fds
// (ExecFD, InterpFD, LoaderFD), with PT_INTERP patched to /proc/self/fd/N.
// A seccomp notification cannot change the syscall's arguments, so the
// guest's own path string is overwritten with the program's base name, which
// resolves in the guest's host cwd (Opt.StageDir, a private directory) to a
// link to /proc/self/fd/ExecFD. The base name always fits, and when argv[0]
// shares the path's memory (as shells do) it still names the program. The
// host kernel then executes the prepared copy of the guest's program, read
// from the image or, for a path in a bind, through the bind's confined fd;
// no other host file is ever executed in its place.

type execKey struct {
	host           bool // a bind's file: host device and inode numbers
	dev, ino       uint64
	size           int64
	ctime, ctimeNs int64
	patch          string
}

var (
	execCacheMu sync.Mutex
	execCache   = map[execKey]int{}
)

const execCacheMax = 32

func machine() elf.Machine {
	return elf.EM_X86_64
}

// loadFile reads the file at guest path p for execution: from the bind
// holding p, confined in it, or else from the image. Nothing on a system
// host route (/proc, /sys, /dev) is executed.
func (e *Engine) loadFile(p string) ([]byte, execKey, unix.Errno) {
	if b := e.bindOf(p); b != nil {
		return loadBindFile(b, bindTarget(b, p).Rel)
	}
	if _, onRoute := e.route(p); onRoute {
		return nil, execKey{}, unix.EACCES
	}
	// The caller must be allowed to execute it, as the kernel checks:
	// search permission on the way, an execute bit for the caller (for
	// root, any execute bit), no noexec mount. Reading it is kbox's own
	// business (a program may be executable and not readable): as root.
	if _, le := lklPath(lkl.SysFaccessat2, 1, p, [6]uintptr{atFdcwd, 0, unix.X_OK, unix.AT_EACCESS}); le != 0 {
		return nil, execKey{}, le
	}
	var b []byte
	var k execKey
	var le unix.Errno
	asRoot(func() { b, k, le = e.loadImageFile(p) })
	return b, k, le
}

// loadImageFile reads an image file for execution, through LKL: a shadow
// of it is written back first.
func (e *Engine) loadImageFile(p string) ([]byte, execKey, unix.Errno) {
	var k execKey
	// Non-blocking: opening a FIFO must not wait for a writer (a FIFO
	// then fails the regular-file check below).
	fd, le := lklPath(lkl.SysOpenat, 1, p, [6]uintptr{atFdcwd, 0, uintptr(lkl.OpenFlagsToLKL(unix.O_RDONLY|unix.O_NONBLOCK)) | unix.O_CLOEXEC})
	if le != 0 {
		return nil, k, le
	}
	defer lkl.Close(int(fd))
	st, err := lkl.Fstat(int(fd))
	if err != nil {
		return nil, k, unix.EIO
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil, k, unix.EACCES
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, k, unix.EACCES
	}
	if err := e.Shadows.SyncInode(st.Dev, st.Ino); err != nil {
		return nil, k, errnoOf(err)
	}
	if st, err = lkl.Fstat(int(fd)); err != nil {
		return nil, k, unix.EIO
	}
	if st.Size > MaxExecSize {
		return nil, k, unix.E2BIG
	}
	k = execKey{dev: st.Dev, ino: st.Ino, size: st.Size, ctime: st.Ctime, ctimeNs: int64(st.CtimeNsec)}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, le := lkl.Syscall6(lkl.SysPread64, fd, uptr(b[off:]), uintptr(len(b)-off), uintptr(off), 0, 0)
		if le != 0 {
			return nil, k, le
		}
		if n == 0 {
			return nil, k, unix.EIO
		}
		off += int(n)
	}
	return b, k, 0
}

// stNoexec is ST_NOEXEC of statfs's f_flags (MS_NOEXEC's value).
const stNoexec = 0x8

// loadBindFile reads a bind's host file for execution. It is opened with
// the bind's confined openat2 as an O_PATH fd (no open of a FIFO or device
// node), and must be a regular file that kbox's host uid may execute, on a
// filesystem not mounted noexec, as the host kernel would require of an
// execve. Its content is then read through kbox's own /proc/self/fd link
// of that fd, which reaches exactly that inode.
func loadBindFile(b *Bind, rel string) ([]byte, execKey, unix.Errno) {
	var k execKey
	pfd, err := b.openIn(rel, unix.O_PATH, 0)
	if err != nil {
		return nil, k, errnoOf(err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, k, errnoOf(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
		return nil, k, unix.EACCES // directories and special files too
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(pfd, &sfs); err != nil || sfs.Flags&stNoexec != 0 {
		return nil, k, unix.EACCES
	}
	if err := unix.Access(procFd(pfd), unix.X_OK); err != nil {
		return nil, k, errnoOf(err)
	}
	fd, err := unix.Open(procFd(pfd), unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, k, errnoOf(err)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, k, errnoOf(err)
	}
	if st.Size > MaxExecSize {
		return nil, k, unix.E2BIG
	}
	k = execKey{host: true, dev: st.Dev, ino: st.Ino, size: st.Size, ctime: st.Ctim.Sec, ctimeNs: st.Ctim.Nsec}
	buf := make([]byte, st.Size)
	for off := 0; off < len(buf); {
		n, err := unix.Pread(fd, buf[off:], int64(off))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, k, errnoOf(err)
		}
		if n == 0 {
			return nil, k, unix.EIO // shrunk while read
		}
		off += n
	}
	return buf, k, 0
}

// errnoOf is err's errno, EIO if it has none (0 for nil).
func errnoOf(err error) unix.Errno {
	if err == nil {
		return 0
	}
	if en, isErrno := err.(unix.Errno); isErrno {
		return en
	}
	return unix.EIO
}

// prepare returns a sealed memfd holding the program at guest path p, with
// PT_INTERP rewritten to /proc/self/fd/interpFD when it is dynamic (kept
// as it is for interpFD -1), and the interpreter path it needs ("" for
// static).
func (e *Engine) prepare(p string, interpFD int) (memfd int, interp string, info *elfload.Info, en unix.Errno) {
	b, k, en := e.loadFile(p)
	if en != 0 {
		return -1, "", nil, en
	}
	info, err := elfload.Inspect(b, machine())
	if err != nil {
		return -1, "", nil, unix.ENOEXEC
	}
	if info.Kind == elfload.Script {
		return -1, "", info, 0
	}
	patch := ""
	if info.Kind == elfload.Dynamic && interpFD >= 0 {
		patch = "/proc/self/fd/" + strconv.Itoa(interpFD)
	}
	k.patch = patch
	execCacheMu.Lock()
	cached, hit := execCache[k]
	execCacheMu.Unlock()
	if hit {
		fd, err := unix.Dup(cached)
		if err == nil {
			return fd, info.Interp, info, 0
		}
	}
	if patch != "" {
		if err := elfload.PatchInterp(b, info, patch); err != nil {
			return -1, "", nil, unix.ENOEXEC
		}
	}
	fd, err := unix.MemfdCreate("kbox-exec:"+p, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, "", nil, unix.ENOMEM
	}
	for off := 0; off < len(b); {
		n, err := unix.Write(fd, b[off:])
		if err != nil {
			unix.Close(fd)
			return -1, "", nil, unix.ENOMEM
		}
		off += n
	}
	unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	execCacheMu.Lock()
	if len(execCache) < execCacheMax {
		if keep, err := unix.Dup(fd); err == nil {
			execCache[k] = keep
		}
	}
	execCacheMu.Unlock()
	return fd, info.Interp, info, 0
}

// Program is a guest program read for execution by an in-process tier,
// which maps it itself: sealed memfds of the ELF and of its interpreter,
// both as they are in the image.
type Program struct {
	Path       string // the program's clean guest path
	Main       int    // sealed memfd of the program
	Interp     int    // sealed memfd of its interpreter, -1 for a static program
	InterpPath string
	Info       *elfload.Info
}

// ReadProgram reads the ELF program at guest path p (a bind's or the
// image's) and its interpreter, checked as execve checks them: ENOENT,
// EACCES, ENOEXEC (a script: Info says so, and no memfd is made), ELIBBAD
// for an interpreter that is not a static ELF. The caller closes it.
func (e *Engine) ReadProgram(p string) (*Program, unix.Errno) {
	p = Clean("/", p)
	memfd, interp, info, en := e.prepare(p, -1)
	if en != 0 {
		return nil, en
	}
	prog := &Program{Path: p, Main: memfd, Interp: -1, InterpPath: interp, Info: info}
	if memfd < 0 {
		return prog, unix.ENOEXEC
	}
	if interp == "" {
		return prog, 0
	}
	imem, iinterp, _, en := e.prepare(Clean("/", interp), -1)
	switch {
	case en != 0:
		prog.Close()
		return nil, en
	case imem < 0 || iinterp != "":
		if imem >= 0 {
			unix.Close(imem)
		}
		prog.Close()
		return nil, unix.ELIBBAD
	}
	prog.Interp = imem
	return prog, 0
}

// Close releases the program's memfds.
func (p *Program) Close() {
	for _, fd := range []*int{&p.Main, &p.Interp} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// install puts memfd into the guest at fd target (close-on-exec: the kernel
// opens it during execve, before close-on-exec fds go) and closes our copy.
func install(r *Request, memfd, target int) unix.Errno {
	defer unix.Close(memfd)
	if _, err := r.G.AddFD(memfd, target, true); err != nil {
		if en, isErrno := err.(unix.Errno); isErrno {
			return en
		}
		return unix.EMFILE
	}
	return 0
}

// prepareELF installs the ELF at guest path p at fd at, and its interpreter
// at fd at+1.
func (e *Engine) prepareELF(r *Request, p string, at int) unix.Errno {
	memfd, interp, _, en := e.prepare(p, at+1)
	if en != 0 {
		return en
	}
	if memfd < 0 {
		return unix.ENOEXEC // a script where an ELF is needed
	}
	if en := install(r, memfd, at); en != 0 {
		return en
	}
	if interp == "" {
		return 0
	}
	imem, iinterp, _, en := e.prepare(Clean("/", interp), at+2)
	if en != 0 {
		if en == unix.ENOENT {
			return unix.ENOENT // missing interpreter: execve reports ENOENT
		}
		return en
	}
	if imem < 0 || iinterp != "" {
		if imem >= 0 {
			unix.Close(imem)
		}
		return unix.ELIBBAD
	}
	return install(r, imem, at+1)
}

func (e *Engine) exec(r *Request, dirfd int32, addr uint64, flags int) Result {
	if flags&^(unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW) != 0 {
		return errno(unix.EINVAL, LKL)
	}
	given, en := readPath(r, addr)
	if en != 0 {
		return errno(en, LKL)
	}
	// fexecve: execveat(fd, "", AT_EMPTY_PATH) runs the file fd is.
	byFd := given == "" && flags&unix.AT_EMPTY_PATH != 0 && dirfd != unix.AT_FDCWD
	var t Target
	if byFd {
		t, en = e.fdTarget(r, dirfd)
	} else {
		t, en = e.resolveAt(r, dirfd, given)
		if en == 0 && flags&unix.AT_SYMLINK_NOFOLLOW == 0 {
			t, en = e.followDevFd(r, t) // /dev/fd/N: its file (devfd.go)
		}
	}
	if en != 0 {
		return errno(en, LKL)
	}
	if t.Proc != nil {
		// /proc/self/exe (a re-exec of itself), cwd, fd links: where
		// they lead in the image or a bind (procfs.go).
		if t, en = e.procExec(r, t); en != 0 {
			return errno(en, Denied)
		}
	}
	if t.Host && t.Bind == nil {
		return errno(unix.EACCES, Denied) // nothing is executed from the host outside binds
	}
	if flags&unix.AT_SYMLINK_NOFOLLOW != 0 && !byFd && !t.Host {
		var st lkl.Stat64
		if le := e.lklStat(r, t.LKLPath(), true, &st); le == 0 && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return errno(unix.ELOOP, LKL)
		}
	}
	for _, a := range [2]uint64{r.Args[argvArg(r.Nr)], r.Args[argvArg(r.Nr)+1]} {
		if en := checkStrings(r.G, a); en != 0 {
			return errno(en, LKL)
		}
	}
	disp := LKL
	if t.Bind != nil {
		disp = Host // a bind's file, read through its confined fd
	}
	memfd, _, info, en := e.prepare(t.LKLPath(), InterpFD)
	if en != 0 {
		return errno(en, disp)
	}
	script := info.Kind == elfload.Script
	if script {
		// The exec image is a one-line script naming the interpreter
		// installed at InterpFD; the interpreter then opens the name it
		// was given, which open() maps back to this script.
		ipath := Clean("/", info.ScriptInterp)
		if en := e.prepareELF(r, ipath, InterpFD); en != 0 {
			return errno(en, disp)
		}
		// The interpreter is named through a staging link with its own
		// base name, so that multi-call binaries (busybox) still see
		// which program they are.
		iname := stageName(ipath)
		if en := e.stageLinkIn("i", iname, InterpFD); en != 0 {
			return errno(en, disp)
		}
		line := "#!i/" + iname
		if info.ScriptArg != "" {
			line += " " + info.ScriptArg
		}
		line += "\n"
		sfd, err := unix.MemfdCreate("kbox-script:"+t.Path, unix.MFD_CLOEXEC)
		if err != nil {
			return errno(unix.ENOMEM, disp)
		}
		unix.Write(sfd, []byte(line))
		if en := install(r, sfd, ExecFD); en != 0 {
			return errno(en, disp)
		}
	} else {
		unix.Close(memfd)
		if en := e.prepareELF(r, t.LKLPath(), ExecFD); en != 0 {
			return errno(en, disp)
		}
	}
	// What the host kernel will resolve: the guest's own string, from its
	// host cwd (the staging directory) or from dirfd.
	var name string // the string written over the guest's, "" to keep it
	var fix *argFix
	switch {
	case byFd:
		// The file is fd itself: the prepared image goes in its place
		// (installAt), and the kernel names a script /dev/fd/N.
		if en := e.installAt(r, dirfd, ExecFD, script); en != 0 {
			return errno(en, disp)
		}
		r.P.pendingNames = [2]string{"/dev/fd/" + strconv.Itoa(int(dirfd)), ""}
	case script:
		// The interpreter gets the string as its $0: a staging path of
		// the same length stands for it, and fixArgs puts the guest's
		// string back in the interpreter's arguments.
		rel, okk := sameLengthStage(given)
		if !okk || e.stageLinkAt(rel) != 0 {
			rel = stageName(t.Path) // the base name, as a last resort
			if en := e.stageLinkIn("", rel, ExecFD); en != 0 {
				return errno(en, disp)
			}
		}
		name = rel
		prefix, asGiven := "", given
		if dirfd != unix.AT_FDCWD {
			// The kernel names it relative to the directory fd.
			prefix = "/dev/fd/" + strconv.Itoa(int(dirfd)) + "/"
			if !strings.HasPrefix(given, "/") {
				asGiven = prefix + given
			}
		}
		r.P.pendingNames = [2]string{prefix + rel, asGiven}
		if prefix+rel != asGiven && len(prefix+rel) == len(asGiven) {
			k := 1
			if info.ScriptArg != "" {
				k = 2
			}
			fix = &argFix{index: k, from: prefix + rel, to: asGiven}
		}
	default:
		name = stageName(t.Path)
		if en := e.stageLinkIn("", name, ExecFD); en != 0 {
			return errno(en, disp)
		}
	}
	if !byFd && dirfd != unix.AT_FDCWD {
		// With a directory fd the kernel resolves the (relative)
		// staging name from it: the staging directory goes in its
		// place.
		if en := e.installStageAt(r, dirfd); en != 0 {
			return errno(en, disp)
		}
	}
	if name != "" && name != given {
		if err := r.G.WriteForce(addr, cpath(name)); err != nil {
			// The path string lives in read-only memory: it cannot be
			// redirected to the prepared image.
			return errno(unix.EFAULT, disp)
		}
	}
	if r.G.Valid() != nil {
		return errno(unix.ENOENT, disp)
	}
	if script {
		r.P.pendingScript = t.Path
	}
	r.P.argFix = fix
	r.P.FDs.Exec()
	r.P.exe = e.canonical(t.Path)
	r.P.execPending = true
	// What execve does to the credentials (set-id bits never count).
	e.setCred(r.P, r.P.creds().Exec())
	return Result{Action: Continue, Disp: disp}
}

// fdTarget is the file a guest fd is, for fexecve: a virtual fd's image
// path, a shadow's image file (its node's path), or a host file
// of a bind or a host route. The file is looked up again by that path.
func (e *Engine) fdTarget(r *Request, fd int32) (Target, unix.Errno) {
	if r.P.FDs.IsVirtual(int(fd)) {
		ent, found := r.P.FDs.Get(int(fd))
		switch {
		case !found:
			return Target{}, unix.EBADF
		case ent.File.Host:
			// An O_PATH fd of a bind (hostPathFd), or a dup of a
			// guest host fd: a bind's file, or nothing to run.
			p, en := e.hostLinkPath(procFd(ent.File.HostFd))
			if en != 0 {
				return Target{}, en
			}
			return e.classify(r, p)
		}
		return e.classify(r, ent.File.Path) // an image file, or one of /proc
	}
	if fd < 0 {
		return Target{}, unix.EBADF
	}
	if n := e.Shadows.OfGuestFd(r.P.Tgid, int(fd)); n != nil {
		return Target{Path: n.Path()}, 0
	}
	p, en := e.hostFdPath(r, int(fd))
	if en != 0 {
		return Target{}, en
	}
	return e.classify(r, p)
}

// guestCloexec reports the close-on-exec flag of guest fd fd.
func guestCloexec(r *Request, fd int32) bool {
	if r.P.FDs.IsVirtual(int(fd)) {
		ent, found := r.P.FDs.Get(int(fd))
		return found && ent.Cloexec
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(r.P.Tgid) + "/fdinfo/" + strconv.Itoa(int(fd)))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, found := strings.Cut(l, ":"); found && k == "flags" {
			fl, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && fl&unix.O_CLOEXEC != 0
		}
	}
	return false
}

// installAt puts the guest's own fd src (the prepared program) at guest fd
// fd, which the continued execveat names. A script keeps fd's
// close-on-exec flag, so that the kernel refuses it as Linux does when the
// interpreter could not open /dev/fd/N; a program is always close-on-exec.
func (e *Engine) installAt(r *Request, fd int32, src int, script bool) unix.Errno {
	pidfd, err := unix.PidfdOpen(r.P.Tgid, 0)
	if err != nil {
		return errnoOf(err)
	}
	hfd, err := unix.PidfdGetfd(pidfd, src, 0)
	unix.Close(pidfd)
	if err != nil {
		return errnoOf(err)
	}
	defer unix.Close(hfd)
	return e.addFDAt(r, hfd, fd, !script || guestCloexec(r, fd))
}

// installStageAt puts the staging directory at guest fd fd, the directory
// fd of an execveat whose name was rewritten to a staging name. It keeps
// fd's close-on-exec flag: a script's interpreter opens /dev/fd/N/name.
func (e *Engine) installStageAt(r *Request, fd int32) unix.Errno {
	d, err := unix.Open(e.Opt.StageDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) // ADDFD takes no O_PATH file
	if err != nil {
		return errnoOf(err)
	}
	defer unix.Close(d)
	return e.addFDAt(r, d, fd, guestCloexec(r, fd))
}

// addFDAt installs kbox's hostfd in the guest at fd. A host fd number is
// replaced (so after an execveat that fails, the guest's fd is the
// prepared program or the staging directory: docs/tiers.md). A virtual fd
// number lies above the guest's RLIMIT_NOFILE (the virtual base), where
// the kernel installs nothing: kbox raises the guest's soft limit for the
// install and puts it back, and the host fd there is not in the guest's
// view (fds at that number are virtual ones, served by kbox).
func (e *Engine) addFDAt(r *Request, hostfd int, fd int32, cloexec bool) unix.Errno {
	if fd < 0 {
		return unix.EBADF
	}
	if r.P.FDs.IsVirtual(int(fd)) {
		var old unix.Rlimit
		if err := unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
			return errnoOf(err)
		}
		raised := unix.Rlimit{Cur: uint64(fd) + 1, Max: old.Max}
		if raised.Cur > raised.Max {
			return unix.EMFILE
		}
		if err := unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, &raised, nil); err != nil {
			return errnoOf(err)
		}
		defer unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, &old, nil)
	}
	if _, err := r.G.AddFD(hostfd, int(fd), cloexec); err != nil {
		return errnoOf(err)
	}
	return 0
}

// sameLengthStage returns a staging path for a script's path as given, of
// the same length, relative (resolved in the staging directory) and with
// the same base name (the task's comm): "/opt/x/s.sh" -> "opt//x/s.sh",
// "../x/s.sh" -> "__/x/s.sh". The interpreter gets it as its argument, and
// fixArgs writes the given path back over it. It fails for a single
// absolute component ("/s.sh" has no slash to double) and for paths that
// would land among the interpreters' staging links (i/).
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
	if c := path.Clean(rel); c == "i" || strings.HasPrefix(c, "i/") || c == "." {
		return "", false
	}
	return rel, true
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
func fixArgs(r *Request, f *argFix) {
	pid := strconv.Itoa(r.G.Pid())
	b, err := os.ReadFile("/proc/" + pid + "/stat")
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
		j := bytesIndexZero(buf[off:])
		if j < 0 {
			return
		}
		if k == f.index && string(buf[off:off+j]) == f.from {
			r.G.Write(start+uint64(off), []byte(f.to))
		}
		off += j + 1
	}
	// AT_EXECFN points at the file name the kernel was given.
	aux, err := os.ReadFile("/proc/" + pid + "/auxv")
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

func bytesIndexZero(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// execMemfdPrefix is how /proc/PID/exe reads for a program prepared by
// prepare (the memfd's name, as the kernel shows it).
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

// sysExecve serves execve(2).
func sysExecve(e *Engine, r *Request) Result { return e.exec(r, unix.AT_FDCWD, r.Args[0], 0) }

// sysExecveat serves execveat(2).
func sysExecveat(e *Engine, r *Request) Result {
	return e.exec(r, int32(r.Args[0]), r.Args[1], int(int32(r.Args[4])))
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

var stageMu sync.Mutex

// stageLinkAt makes StageDir/rel -> /proc/self/fd/ExecFD, with its
// directories; an entry already there must be such a link.
func (e *Engine) stageLinkAt(rel string) unix.Errno {
	rel = path.Clean(rel)
	if en := e.stageLinkIn(path.Dir(rel), path.Base(rel), ExecFD); en != 0 {
		return en
	}
	l, err := os.Readlink(filepath.Join(e.Opt.StageDir, rel))
	if err != nil || l != "/proc/self/fd/"+strconv.Itoa(ExecFD) {
		return unix.ENOENT
	}
	return 0
}

// stageLinkIn makes StageDir/dir/name -> /proc/self/fd/fd if missing.
func (e *Engine) stageLinkIn(dir, name string, fd int) unix.Errno {
	stageMu.Lock()
	defer stageMu.Unlock()
	d := filepath.Join(e.Opt.StageDir, dir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return unix.ENOMEM
	}
	err := os.Symlink("/proc/self/fd/"+strconv.Itoa(fd), filepath.Join(d, name))
	if err != nil && !os.IsExist(err) {
		return unix.ENOMEM
	}
	return 0
}

// canonical resolves p's symlinks, as the kernel reports /proc/PID/exe: in
// a bind through the bind's confined fd, in the image through LKL's own
// proc (mounted outside the guest's root); without one it returns p.
func (e *Engine) canonical(p string) string {
	if b := e.bindOf(p); b != nil {
		fd, err := b.openIn(bindTarget(b, p).Rel, unix.O_PATH, 0)
		if err != nil {
			return p
		}
		defer unix.Close(fd)
		l, err := os.Readlink(procFd(fd))
		if err != nil {
			return p
		}
		if g, inBind := e.bindGuestPath(l); inBind {
			return g
		}
		return p
	}
	fd, le := lklPath(lkl.SysOpenat, 1, p, [6]uintptr{atFdcwd, 0, unix.O_PATH | unix.O_CLOEXEC})
	if le != 0 {
		return p
	}
	defer lkl.Close(int(fd))
	buf := make([]byte, PathMax)
	n, le := e.kprocPath(lkl.SysReadlinkat, 1, "self/fd/"+strconv.Itoa(int(fd)), [6]uintptr{0, 0, uptr(buf), uintptr(len(buf))})
	if le != 0 || n == 0 || buf[0] != '/' {
		return p
	}
	return string(buf[:n])
}

// argvArg is the index of argv among the arguments (envp follows it).
func argvArg(nr int) int {
	if nr == unix.SYS_EXECVEAT {
		return 2
	}
	return 1
}
