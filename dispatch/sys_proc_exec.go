// The proc family's exec (FamProc in table.go).

package dispatch

import (
	"debug/elf"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/elfload"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// sysSetTidAddress serves set_tid_address(2) natively, notified to mark a new program.
func sysSetTidAddress(e *Engine, r *Request) Result {
	// What every libc calls first in a new program, before main (static ones
	// too, whose other early calls run natively). It runs on the host; it is
	// notified so that a tier sees each new program's first syscall (the
	// seccomp tier checks a continued execve there:
	// seccomp/supervisor/exec.go).
	return cont
}

// MaxExecSize bounds an executable read from the image or a bind.
const MaxExecSize = 512 << 20

// execve is split between the engine and the tier. The engine resolves
// the path (the image, a bind, /proc links, fexecve's fd), checks what the
// kernel checks (execute permission, a regular file, a valid ELF of this
// machine or a #! script, an interpreter that loads) and reads the
// program: an Exec. The tier runs it (Tier.Exec): the seccomp tier has the
// host kernel execute sealed copies (seccomp/supervisor/exec.go), an
// in-process tier maps them itself. The engine then does what an execve
// does to the process: close-on-exec virtual fds, the new /proc/PID/exe,
// the credentials.

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
	// inspected keeps what loadImage found of image files it read (by
	// key, no patch): a file run again is not read again while its
	// sealed memfd is cached (seal). make's 50 compilations read cc1's
	// 33 MB through LKL once, not 50 times.
	inspected = map[execKey]*elfload.Info{}
)

const execCacheMax = 32

// machine is the ELF machine of the programs kbox runs: its own.
func machine() elf.Machine {
	if runtime.GOARCH == "arm64" {
		return elf.EM_AARCH64
	}
	return elf.EM_X86_64
}

// image is a file read for execution, and what it is. Its bytes are
// released with it (release) once the exec is over.
type image struct {
	path string
	c    content // not read when !c.read() (bytes)
	key  execKey
	info *elfload.Info
	e    *Engine
}

// inspectedInfo returns what loadImage found of the file with key k, or
// nil.
func inspectedInfo(k execKey) *elfload.Info {
	execCacheMu.Lock()
	defer execCacheMu.Unlock()
	return inspected[k]
}

// bytes returns the file's content, reading it again if loadImage did
// not (a file that changed meanwhile is ENOEXEC: its inspection was of
// other bytes).
func (im *image) bytes() ([]byte, unix.Errno) {
	if im.c.read() {
		return im.c.b, 0
	}
	c, k, en := im.e.loadFile(im.path, false)
	if en != 0 {
		return nil, en
	}
	if k != im.key {
		c.release()
		return nil, unix.ENOEXEC
	}
	im.c = c
	return c.b, 0
}

// release lets the image's bytes go: an exec is over. Safe on nil and
// twice.
func (im *image) release() {
	if im != nil {
		im.c.release()
	}
}

// loadImage reads the file at guest path p for execution and inspects
// it: ENOEXEC for anything but an ELF of this machine whose segments the
// loader accepts, or a #! script. The caller releases the image.
func (e *Engine) loadImage(p string) (*image, unix.Errno) {
	c, k, en := e.loadFile(p, true)
	if en != 0 {
		return nil, en
	}
	if !c.read() {
		return &image{path: p, c: c, key: k, info: inspectedInfo(k), e: e}, 0
	}
	b := c.b
	info, err := elfload.Inspect(b, machine())
	if err != nil {
		c.release()
		return nil, unix.ENOEXEC
	}
	if info.Kind != elfload.Script {
		// Segments the kernel would map over each other or fail to map
		// after the point of no return (the guest killed by SIGSEGV)
		// are ENOEXEC here, as in the in-process loader.
		if err := elfload.Check(p, b, machine()); err != nil {
			c.release()
			return nil, unix.ENOEXEC
		}
	}
	if !k.host && settled(k) {
		execCacheMu.Lock()
		if len(inspected) < execCacheMax {
			inspected[k] = info
		}
		execCacheMu.Unlock()
	}
	return &image{path: p, c: c, key: k, info: info, e: e}, 0
}

// seal returns a sealed memfd of the image, its PT_INTERP rewritten to
// patch when patch is not "" and the image is a dynamic ELF. Memfds are
// cached by file and patch: a program run again costs a dup. The file's
// own memfd (content) is sealed and used, patched in place.
func (im *image) seal(patch string) (int, unix.Errno) {
	if im.info.Kind != elfload.Dynamic {
		patch = ""
	}
	k := im.key
	k.patch = patch
	execCacheMu.Lock()
	cached, hit := execCache[k]
	execCacheMu.Unlock()
	if hit {
		if fd, err := dupCloexec(cached); err == nil {
			return fd, 0
		}
	}
	b, en := im.bytes()
	if en != 0 {
		return -1, en
	}
	if patch == "" {
		fd, err := dupCloexec(im.c.fd)
		if err != nil {
			return -1, unix.EMFILE
		}
		return cacheSealed(im.path, k, fd)
	}
	// The patched interpreter slot alone, written over the file's.
	slot := make([]byte, im.info.InterpLen)
	if err := elfload.PatchInterp(slot, &elfload.Info{Kind: elfload.Dynamic, InterpLen: len(slot)}, patch); err != nil {
		return -1, unix.ENOEXEC
	}
	// The image's memfd is kbox's own copy of the file, read for this
	// exec (readMemfd) and given to nothing yet: the slot is written
	// into it and it is sealed and run, instead of a copy of the whole
	// program (6.8 MB for python3). The image keeps no bytes after it:
	// a later bytes() reads the file again. A memfd sealed already (run
	// unpatched before) refuses the write and is copied, the whole slot
	// written over the copy's.
	if n, err := unix.Pwrite(im.c.fd, slot, int64(im.info.InterpOff)); err == nil && n == len(slot) {
		fd := im.c.fd
		if len(im.c.b) > 0 {
			unix.Munmap(im.c.b)
		}
		im.c = content{fd: -1}
		return cacheSealed(im.path, k, fd)
	}
	fd, err := unix.MemfdCreate("kbox-exec:"+im.path, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, unix.ENOMEM
	}
	// Copied by the kernel; written where the kernel cannot.
	off := 0
	if copyMemfd(fd, im.c.fd, len(b)) {
		off = len(b)
	}
	for off < len(b) {
		n, err := unix.Pwrite(fd, b[off:], int64(off))
		if err != nil {
			unix.Close(fd)
			return -1, unix.ENOMEM
		}
		off += n
	}
	if _, err := unix.Pwrite(fd, slot, int64(im.info.InterpOff)); err != nil {
		unix.Close(fd)
		return -1, unix.ENOMEM
	}
	return cacheSealed(im.path, k, fd)
}

// copyMemfd copies the first n bytes of memfd src to dst with
// copy_file_range; false if the kernel would not.
func copyMemfd(dst, src, n int) bool {
	var roff, woff int64
	for roff < int64(n) {
		c, err := unix.CopyFileRange(src, &roff, dst, &woff, n-int(roff), 0)
		if err != nil || c == 0 {
			return false
		}
	}
	return true
}

// cacheSealed seals memfd fd (the program at p) against any change and
// keeps a copy of it in the exec cache under k, while the cache has room;
// it returns fd. A memfd the kernel will not seal because something
// still holds its pages (EBUSY) is copied and the copy sealed; one that
// cannot be sealed is closed and not run (EIO, said on kbox's stderr).
func cacheSealed(p string, k execKey, fd int) (int, unix.Errno) {
	const seals = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL
	_, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
	if err == unix.EBUSY {
		if cp, ok := copyWhole(p, fd); ok {
			unix.Close(fd)
			fd = cp
			_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
		}
	}
	if err != nil {
		unix.Close(fd)
		execFault(p, "sealing its copy", err)
		return -1, unix.EIO
	}
	if !settled(k) {
		return fd, 0
	}
	execCacheMu.Lock()
	if len(execCache) < execCacheMax {
		if keep, err := dupCloexec(fd); err == nil {
			execCache[k] = keep
		}
	}
	execCacheMu.Unlock()
	return fd, 0
}

// dupCloexec is dup(2) of fd, close-on-exec: none of kbox's memfds may
// reach a process kbox starts.
func dupCloexec(fd int) (int, error) {
	return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
}

// copyWhole copies memfd fd into a new memfd, by read and write.
func copyWhole(p string, fd int) (int, bool) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return -1, false
	}
	c, en := readMemfd("kbox-exec:"+p, int(st.Size), func(int) bool { return false }, func(b []byte, off int) (int, unix.Errno) {
		n, err := unix.Pread(fd, b, int64(off))
		return n, sysabi.Errno(err)
	})
	if en != 0 {
		return -1, false
	}
	if len(c.b) > 0 {
		unix.Munmap(c.b)
	}
	return c.fd, true
}

// settled reports whether the file of key k may be known again by its key:
// its change time is before the clock its times come from reads now (LKL's
// coarse clock for an image file, the host's for a bind's). That clock
// moves in ticks (LKL's not at all while it idles), so a change in the
// tick of the file's last one gives the same change time again, and,
// with the same size, the same key: the cache would run the old program.
// Such a file is read at each exec until its time is past.
func settled(k execKey) bool {
	var now unix.Timespec
	var err error
	if k.host {
		err = unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now)
	} else {
		now, err = lkl.CoarseNow()
	}
	return err == nil && (k.ctime < now.Sec || k.ctime == now.Sec && k.ctimeNs < now.Nsec)
}

// programOf loads the ELF at guest path p (unless have is it, loaded
// already) and its PT_INTERP loader, checked as execve checks them: a
// script where an ELF is needed is ENOEXEC, a missing loader ENOENT, a
// loader that is not a static ELF ELIBBAD.
func (e *Engine) programOf(r *Request, p string, have *image) (prog, loader *image, en unix.Errno) {
	if prog = have; have == nil || have.path != p {
		if prog, en = e.loadImage(p); en != 0 {
			return nil, nil, en
		}
	}
	fail := func(en unix.Errno) (*image, *image, unix.Errno) {
		if prog != have {
			prog.release()
		}
		loader.release()
		return nil, nil, en
	}
	switch prog.info.Kind {
	case elfload.Script:
		return fail(unix.ENOEXEC)
	case elfload.Static:
		return prog, nil, 0
	}
	loader, en = e.loadImage(e.interpIn(r, prog.info.Interp))
	switch {
	case en == unix.ENOEXEC:
		return fail(unix.ELIBBAD)
	case en != 0:
		return fail(en)
	case loader.info.Kind != elfload.Static:
		return fail(unix.ELIBBAD)
	}
	return prog, loader, 0
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
// image's) and its interpreter, checked as execve checks them (ENOENT,
// EACCES, ENOEXEC for a script, ELIBBAD). The caller closes it.
func (e *Engine) ReadProgram(p string) (*Program, unix.Errno) {
	p = guestpath.Clean("/", p)
	prog, loader, en := e.programOf(nil, p, nil) // the first program: the image's root
	e.dropPrewarmed()
	if en != 0 {
		return nil, en
	}
	defer func() { prog.release(); loader.release() }()
	e.warmLibraries(nil, prog) // warm.go
	x := &Exec{Path: p, prog: prog, loader: loader}
	return x.program()
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

// Exec is an execve the engine accepted, for the tier to carry out: the
// file resolved and checked, and the ELF that runs read (the program, or
// a #! script's interpreter), with its PT_INTERP loader.
type Exec struct {
	Path     string      // the file executed, a clean guest path
	Given    string      // the path as the guest gave it ("" for fexecve)
	PathAddr uint64      // where Given lies in the guest's memory
	Dirfd    int32       // execveat's directory fd, or AT_FDCWD
	ByFd     bool        // fexecve: the file is the guest's fd Dirfd
	Disp     Disposition // LKL for an image file, Host for a bind's
	// Script says Path is a #! script: ScriptInterp (a clean guest path)
	// and ScriptArg are its interpreter line, and the ELF that runs is
	// that interpreter.
	Script                  bool
	ScriptInterp, ScriptArg string

	prog, loader *image
}

// Info describes the ELF that runs.
func (x *Exec) Info() *elfload.Info { return x.prog.info }

// ProgramMemfd returns a sealed memfd of the ELF that runs, its PT_INTERP
// rewritten to interp when that is not "" and the ELF is dynamic. The
// caller closes it.
func (x *Exec) ProgramMemfd(interp string) (int, unix.Errno) { return x.prog.seal(interp) }

// LoaderMemfd returns a sealed memfd of the ELF's PT_INTERP loader, -1
// for a static ELF. The caller closes it.
func (x *Exec) LoaderMemfd() (int, unix.Errno) {
	if x.loader == nil {
		return -1, 0
	}
	return x.loader.seal("")
}

// program returns the ELF that runs and its loader as a Program.
func (x *Exec) program() (*Program, unix.Errno) {
	main, en := x.ProgramMemfd("")
	if en != 0 {
		return nil, en
	}
	p := &Program{Path: x.prog.path, Main: main, Interp: -1, Info: x.prog.info}
	if x.loader != nil {
		p.InterpPath = x.loader.path
		if p.Interp, en = x.LoaderMemfd(); en != 0 {
			p.Close()
			return nil, en
		}
	}
	return p, 0
}

// Tier is what the engine needs of the tier that delivers a guest's
// syscalls, beyond one request's Guest: tiers supply transport only, and
// how a program is started is transport.
type Tier interface {
	// Exec runs x in the calling guest process in place of its
	// program. A result without an errno means the exec went ahead
	// (the seccomp tier continues the syscall: the host kernel runs
	// the program); the engine then does what an execve does to the
	// process.
	Exec(r *Request, x *Exec) Result
}

func (e *Engine) exec(r *Request, dirfd int32, addr uint64, flags int) Result {
	defer e.dropPrewarmed() // the first exec has taken what it needs (warm.go)
	if flags&^(unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW) != 0 {
		return errno(unix.EINVAL, LKL)
	}
	r.hint = hintState{} // a new program shows its own pattern (hint.go)
	given, en := readPath(r, addr)
	if en != 0 {
		return errno(en, LKL)
	}
	// fexecve: execveat(fd, "", AT_EMPTY_PATH) runs the file fd is.
	byFd := given == "" && flags&unix.AT_EMPTY_PATH != 0 && dirfd != unix.AT_FDCWD
	var t guestpath.Target
	if byFd {
		t, en = e.fdTarget(r, dirfd)
	} else {
		t, en = e.resolveAt(r, dirfd, given)
		if en == 0 && flags&unix.AT_SYMLINK_NOFOLLOW == 0 {
			t, en = e.followDevFd(r, t) // /dev/fd/N: its file (sys_file_dev.go)
		}
		if en == 0 && flags&unix.AT_SYMLINK_NOFOLLOW == 0 {
			t, en = e.followRooted(r, t) // a chrooted caller's link (sys_file_chroot.go)
		}
	}
	if en != 0 {
		return errno(en, LKL)
	}
	if t.Proc != nil {
		// /proc/self/exe (a re-exec of itself), cwd, fd links: where
		// they lead in the image or a bind (procserve.go).
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
	x := &Exec{Path: t.Path, Given: given, PathAddr: addr, Dirfd: dirfd, ByFd: byFd, Disp: LKL}
	if t.Bind != nil {
		x.Disp = Host // a bind's file, read through its confined fd
	}
	file, en := e.loadImage(t.LKLPath())
	if en != 0 {
		return errno(en, x.Disp)
	}
	defer func() { file.release(); x.prog.release(); x.loader.release() }()
	run := t.LKLPath()
	if file.info.Kind == elfload.Script {
		x.Script, x.ScriptInterp, x.ScriptArg = true, guestpath.Clean("/", file.info.ScriptInterp), file.info.ScriptArg
		run = e.interpIn(r, x.ScriptInterp)
	}
	if x.prog, x.loader, en = e.programOf(r, run, file); en != 0 {
		if en == unix.ENOEXEC && x.Script {
			en = e.nestedScript(run)
		}
		return errno(en, x.Disp)
	}
	e.warmLibraries(r, x.prog) // warm.go
	if e.Tier == nil {
		return errno(unix.ENOSYS, ENOSYS) // an engine without a tier runs nothing
	}
	var rec *ExecRecord
	if e.OnExec != nil {
		rec = execRecordOf(r, x, file) // before the tier rewrites guest strings
	}
	res := e.Tier.Exec(r, x)
	if res.Errno != 0 {
		return res
	}
	if rec != nil {
		e.OnExec(rec)
	}
	// An exec changes nothing a stat sees (OwnChange) unless it closes
	// virtual fds open for writing (an LKL file's last close may: close),
	// or gives the caller other credentials; the access time its reads
	// of the program may move goes to the shadows' log (loadImageFile).
	closes := r.P.FDs.Closes(true, readOnlyFile)
	r.P.FDs.Exec()
	// /proc/PID/exe is the ELF that runs: a script's interpreter, as on
	// Linux (busybox re-executes /proc/self/exe for its applets; the
	// script there would run itself again).
	if x.Script {
		e.SetExe(r.P, run)
	} else {
		e.SetExe(r.P, t.Path)
	}
	// What execve does to the credentials (set-id bits never count).
	was := r.P.creds()
	e.setCred(r.P, was.Exec())
	if now := r.P.creds(); closes || now.fs != was.fs || now.access != was.access {
		e.changeDone()
	}
	return res
}

// maxScriptNesting is Linux's limit of interpreters that are themselves
// scripts (BINPRM_MAX_RECURSION): a deeper chain, or a loop, is ELOOP.
const maxScriptNesting = 4

// nestedScript is the errno of a script whose interpreter interp is not
// an ELF. Linux runs an interpreter that is itself a script, up to
// maxScriptNesting deep; kbox runs one level. A chain Linux would refuse
// (a script naming itself, two naming each other) is ELOOP as on Linux; a
// shorter one, which Linux would run, is ENOEXEC (docs/tiers.md, Exec).
func (e *Engine) nestedScript(interp string) unix.Errno {
	p := interp
	for depth := 0; depth < maxScriptNesting; depth++ {
		im, en := e.loadImage(p)
		if en != 0 {
			return en
		}
		im.release()
		if im.info.Kind != elfload.Script {
			return unix.ENOEXEC
		}
		p = guestpath.Clean("/", im.info.ScriptInterp)
	}
	return unix.ELOOP
}

// fdTarget is the file a guest fd is, for fexecve: a virtual fd's image
// path, a shadow's image file (its node's path), or a host file
// of a bind or a host route. The file is looked up again by that path.
func (e *Engine) fdTarget(r *Request, fd int32) (guestpath.Target, unix.Errno) {
	if r.P.FDs.IsVirtual(int(fd)) {
		ent, found := r.P.FDs.Get(int(fd))
		switch {
		case !found:
			return guestpath.Target{}, unix.EBADF
		case ent.File.Node == procfs.LinkFile{}:
			return guestpath.Target{}, unix.ELOOP // a /proc link itself (procserve.go), as a symlink
		case ent.File.Host:
			// An O_PATH fd of a bind (hostPathFd), or a dup of a
			// guest host fd: a bind's file, or nothing to run.
			p, en := e.hostLinkPath(guestpath.ProcFd(ent.File.HostFd))
			if en != 0 {
				return guestpath.Target{}, en
			}
			return e.classify(r, p)
		}
		return e.classify(r, ent.File.Path) // an image file, or one of /proc
	}
	if fd < 0 {
		return guestpath.Target{}, unix.EBADF
	}
	if n := e.Shadows.OfGuestFd(r.P.Tgid, int(fd)); n != nil {
		return guestpath.Target{Path: n.Path()}, 0
	}
	p, en := e.hostFdPath(r, int(fd))
	if en != 0 {
		return guestpath.Target{}, en
	}
	return e.classify(r, p)
}

// GuestCloexec reports the close-on-exec flag of guest fd fd.
func GuestCloexec(r *Request, fd int32) bool {
	if r.P.FDs.IsVirtual(int(fd)) {
		ent, found := r.P.FDs.Get(int(fd))
		return found && ent.Cloexec
	}
	b, err := hostproc.Read("/proc/" + strconv.Itoa(r.P.Tgid) + "/fdinfo/" + strconv.Itoa(int(fd)))
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

// sysExecve serves execve(2).
func sysExecve(e *Engine, r *Request) Result { return e.exec(r, unix.AT_FDCWD, r.Args[0], 0) }

// sysExecveat serves execveat(2).
func sysExecveat(e *Engine, r *Request) Result {
	return e.exec(r, int32(r.Args[0]), r.Args[1], int(int32(r.Args[4])))
}

// canonical resolves p's symlinks, as the kernel reports /proc/PID/exe: in
// a bind through the bind's confined fd, in the image through LKL's own
// proc (mounted outside the guest's root); without one it returns p.
func (e *Engine) canonical(p string) string {
	if b := e.bindOf(p); b != nil {
		fd, err := b.OpenIn(b.Target(p).Rel, unix.O_PATH, 0)
		if err != nil {
			return p
		}
		defer unix.Close(fd)
		l, err := os.Readlink(guestpath.ProcFd(fd))
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
