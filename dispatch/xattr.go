package dispatch

import "golang.org/x/sys/unix"

func init() {
	for _, nr := range []int{
		unix.SYS_GETXATTR, unix.SYS_LGETXATTR, unix.SYS_FGETXATTR, // *getxattr(2)
		unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, // *setxattr(2)
		unix.SYS_LISTXATTR, unix.SYS_LLISTXATTR, unix.SYS_FLISTXATTR, // *listxattr(2)
		unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR, // *removexattr(2)
	} {
		register(nr, sysXattr)
	}
}

// sysXattr answers the xattr family: the default LKL has no xattr support,
// so every attribute operation is unsupported, as on a filesystem without
// xattrs.
func sysXattr(e *Engine, r *Request) Result { return errno(unix.EOPNOTSUPP, Emulated) }
