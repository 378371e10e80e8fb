//go:build linux && amd64 && cgo

package trap

import (
	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// execTier is the trap tier's dispatch.Tier. An execve inside the guest
// would load the new program into this process and restart the calling
// thread there; that is not built yet: the guest's execve fails with
// ENOSYS and a message (once), and the old program goes on.
type execTier struct{}

func (execTier) Exec(r *dispatch.Request, x *dispatch.Exec) dispatch.Result {
	tr.note("exec", "trap tier: execve inside the guest is not supported yet ("+x.Path+"): use --syscall-mode=seccomp")
	return dispatch.Result{Action: dispatch.Return, Disp: dispatch.Denied, Errno: unix.ENOSYS}
}
