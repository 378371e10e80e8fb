package dispatch

import "golang.org/x/sys/unix"

// The x86_64 syscalls that asm-generic architectures (arm64) replaced with
// their *at() forms. Their handlers live with their families.
func init() {
	register(unix.SYS_OPEN, sysOpen)            // open(2)
	register(unix.SYS_CREAT, sysCreat)          // creat(2)
	register(unix.SYS_DUP2, sysDup2)            // dup2(2)
	register(unix.SYS_GETDENTS, sysGetdentsOld) // getdents(2): old layout, ENOSYS
	register(unix.SYS_MKDIR, sysMkdir)          // mkdir(2)
	register(unix.SYS_RMDIR, sysRmdir)          // rmdir(2)
	register(unix.SYS_UNLINK, sysUnlink)        // unlink(2)
	register(unix.SYS_RENAME, sysRename)        // rename(2)
	register(unix.SYS_LINK, sysLink)            // link(2)
	register(unix.SYS_SYMLINK, sysSymlink)      // symlink(2)
	register(unix.SYS_CHMOD, sysChmod)          // chmod(2)
	register(unix.SYS_CHOWN, sysChown)          // chown(2)
	register(unix.SYS_LCHOWN, sysLchown)        // lchown(2)
	register(unix.SYS_MKNOD, sysMknod)          // mknod(2)
	register(unix.SYS_STAT, sysStat)            // stat(2)
	register(unix.SYS_LSTAT, sysLstat)          // lstat(2)
	register(unix.SYS_ACCESS, sysAccess)        // access(2)
	register(unix.SYS_READLINK, sysReadlink)    // readlink(2)
	register(unix.SYS_UTIME, sysUtime)          // utime(2)
	register(unix.SYS_UTIMES, sysUtimes)        // utimes(2)
	register(unix.SYS_FUTIMESAT, sysFutimesat)  // futimesat(2)
	register(unix.SYS_FORK, sysClone)           // fork(2)
	register(unix.SYS_VFORK, sysClone)          // vfork(2)
}

// legacyPureLookups are the legacy syscalls that only read LKL state
// (statcache.go).
var legacyPureLookups = []int{unix.SYS_STAT, unix.SYS_LSTAT, unix.SYS_ACCESS}

// legacyOpens are the legacy open syscalls (statcache.go).
var legacyOpens = []int{unix.SYS_OPEN}

// sysUtime is utime(path, struct utimbuf *): whole seconds, or now.
func sysUtime(e *Engine, r *Request) Result {
	if r.Args[1] == 0 {
		return e.utimens(r, unix.AT_FDCWD, r.Args[0], nil, 0)
	}
	var buf [2]int64 // actime, modtime
	if err := r.G.Read(r.Args[1], asBytes(&buf)); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	ts := [2]unix.Timespec{{Sec: buf[0]}, {Sec: buf[1]}}
	return e.utimens(r, unix.AT_FDCWD, r.Args[0], &ts, 0)
}

// sysUtimes is utimes(path, struct timeval[2]).
func sysUtimes(e *Engine, r *Request) Result {
	ts, en := timevals(r, r.Args[1])
	if en != 0 {
		return errno(en, LKL)
	}
	return e.utimens(r, unix.AT_FDCWD, r.Args[0], ts, 0)
}

// legacyAbsent are x86_64 syscall numbers kbox answers as absent
// (absent.go): most are unimplemented in Linux itself.
var legacyAbsent = []absent{
	{unix.SYS_INOTIFY_INIT, unix.ENOSYS, "as inotify_init1"},
	{unix.SYS_CREATE_MODULE, unix.ENOSYS, "removed from Linux (2.6): ENOSYS there too"},
	{unix.SYS_GET_KERNEL_SYMS, unix.ENOSYS, "removed from Linux (2.6): ENOSYS there too"},
	{unix.SYS_QUERY_MODULE, unix.ENOSYS, "removed from Linux (2.6): ENOSYS there too"},
	{unix.SYS_GETPMSG, unix.ENOSYS, "never implemented in Linux: ENOSYS there too"},
	{unix.SYS_PUTPMSG, unix.ENOSYS, "never implemented in Linux: ENOSYS there too"},
	{unix.SYS_AFS_SYSCALL, unix.ENOSYS, "never implemented in Linux: ENOSYS there too"},
	{unix.SYS_TUXCALL, unix.ENOSYS, "never implemented in Linux: ENOSYS there too"},
	{unix.SYS_SECURITY, unix.ENOSYS, "never implemented in Linux: ENOSYS there too"},
	{unix.SYS_VSERVER, unix.ENOSYS, "never implemented in Linux: ENOSYS there too"},
	{unix.SYS_EPOLL_CTL_OLD, unix.ENOSYS, "never implemented in Linux: ENOSYS there too"},
	{unix.SYS_EPOLL_WAIT_OLD, unix.ENOSYS, "never implemented in Linux: ENOSYS there too"},
}
