package dispatch

import (
	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// System V IPC and POSIX message queues.
//
// The guest has an IPC namespace of its own (made at start-up, see
// seccomp/supervisor/guestinit.c): these run natively, private to the kbox
// run, and never reach kbox. Without one (no namespace could be made)
// they are notified and refused with ENOSYS, what a kernel without
// CONFIG_SYSVIPC and CONFIG_POSIX_MQUEUE answers: the host's objects
// must stay out of the guest's reach.

func init() {
	register(unix.SYS_SHMGET, sysIPC)          // shmget(2): native in the guest's IPC namespace
	register(unix.SYS_SHMAT, sysIPC)           // shmat(2): native in the guest's IPC namespace
	register(unix.SYS_SHMDT, sysIPC)           // shmdt(2): native in the guest's IPC namespace
	register(unix.SYS_SHMCTL, sysIPC)          // shmctl(2): native in the guest's IPC namespace
	register(unix.SYS_SEMGET, sysIPC)          // semget(2): native in the guest's IPC namespace
	register(unix.SYS_SEMOP, sysIPC)           // semop(2): native in the guest's IPC namespace
	register(unix.SYS_SEMTIMEDOP, sysIPC)      // semtimedop(2): native in the guest's IPC namespace
	register(unix.SYS_SEMCTL, sysIPC)          // semctl(2): native in the guest's IPC namespace
	register(unix.SYS_MSGGET, sysIPC)          // msgget(2): native in the guest's IPC namespace
	register(unix.SYS_MSGSND, sysIPC)          // msgsnd(2): native in the guest's IPC namespace
	register(unix.SYS_MSGRCV, sysIPC)          // msgrcv(2): native in the guest's IPC namespace
	register(unix.SYS_MSGCTL, sysIPC)          // msgctl(2): native in the guest's IPC namespace
	register(unix.SYS_MQ_OPEN, sysIPC)         // mq_open(2): native in the guest's IPC namespace
	register(unix.SYS_MQ_UNLINK, sysIPC)       // mq_unlink(2): native in the guest's IPC namespace
	register(unix.SYS_MQ_TIMEDSEND, sysIPC)    // mq_timedsend(2): native in the guest's IPC namespace
	register(unix.SYS_MQ_TIMEDRECEIVE, sysIPC) // mq_timedreceive(2): native in the guest's IPC namespace
	register(unix.SYS_MQ_NOTIFY, sysIPC)       // mq_notify(2): native in the guest's IPC namespace
	register(unix.SYS_MQ_GETSETATTR, sysIPC)   // mq_getsetattr(2): native in the guest's IPC namespace
}

func sysIPC(e *Engine, r *Request) Result {
	if e.IPCNamespace {
		return cont // the filter lets them run natively; harmless
	}
	return errno(unix.ENOSYS, Denied)
}

// sysvipcFile reports a /proc/sysvipc file (shm, sem, msg) and its name.
func sysvipcFile(t Target) (string, bool) {
	if t.Route != "/proc" {
		return "", false
	}
	switch t.Rel {
	case "sysvipc/shm", "sysvipc/sem", "sysvipc/msg":
		return t.Rel[len("sysvipc/"):], true
	}
	return "", false
}

// openSysvipc serves an open of /proc/sysvipc/{shm,sem,msg}, which list
// the System V objects of the opener's IPC namespace: kbox's would be the
// host's. The socket binder, which shares the guest's namespace, opens
// them (unixsock.Binder.OpenIPC). Without a namespace of its own the
// guest has no System V IPC, and the files are absent, as on a kernel
// without it. done is false for any other path.
func (e *Engine) openSysvipc(r *Request, t Target, flags int) (Result, bool) {
	name, isIPC := sysvipcFile(t)
	if !isIPC {
		return Result{}, false
	}
	var b *unixsock.Binder
	if e.IPCNamespace {
		b = e.binder()
	}
	if b == nil {
		return errno(unix.ENOENT, Host), true
	}
	if flags&unix.O_ACCMODE != unix.O_RDONLY {
		return errno(unix.EACCES, Host), true
	}
	fd, err := b.OpenIPC(name)
	if err != nil {
		return fail(err, Host), true
	}
	defer unix.Close(fd)
	gfd, err := r.G.AddFDReply(fd, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, Host), true
	}
	return answered(int64(gfd), Host), true
}
