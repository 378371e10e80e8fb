package dispatch

import "golang.org/x/sys/unix"

// sysXattr answers the xattr family: the default LKL has no xattr support,
// so every attribute operation is unsupported, as on a filesystem without
// xattrs.
func sysXattr(e *Engine, r *Request) Result { return errno(unix.EOPNOTSUPP, Emulated) }
