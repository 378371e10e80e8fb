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
	register(unix.SYS_FORK, sysClone)           // fork(2)
	register(unix.SYS_VFORK, sysClone)          // vfork(2)
}

// legacyPureLookups are the legacy syscalls that only read LKL state
// (statcache.go).
var legacyPureLookups = []int{unix.SYS_STAT, unix.SYS_LSTAT, unix.SYS_ACCESS}

// legacyOpens are the legacy open syscalls (statcache.go).
var legacyOpens = []int{unix.SYS_OPEN}
