package dispatch

import "golang.org/x/sys/unix"

// Syscalls kbox answers as a kernel without them. Every syscall number
// has a disposition: run natively (the tier's allow lists), refused in the
// filter (the deny list, with reasons), served by a handler, or listed
// here with the answer and why. An unknown number is never an omission:
// the coverage test (seccomp/supervisor) fails for a number with none.

// absent is one syscall kbox does not provide.
type absent struct {
	nr     int
	errno  unix.Errno
	reason string
}

var absentCalls = []absent{
	{unix.SYS_INOTIFY_INIT1, unix.ENOSYS, "this LKL has no inotify, and watching host paths would be the host's files; ENOSYS is what a kernel without CONFIG_INOTIFY_USER answers (programs fall back to polling)"},
	{unix.SYS_INOTIFY_ADD_WATCH, unix.ENOSYS, "as inotify_init1"},
	{unix.SYS_INOTIFY_RM_WATCH, unix.ENOSYS, "as inotify_init1"},
	{unix.SYS_LANDLOCK_CREATE_RULESET, unix.ENOSYS, "kbox resolves guest paths itself: a Landlock ruleset on host fds would not restrict what the guest expects; ENOSYS is a kernel without Landlock"},
	{unix.SYS_LANDLOCK_ADD_RULE, unix.ENOSYS, "as landlock_create_ruleset"},
	{unix.SYS_LANDLOCK_RESTRICT_SELF, unix.ENOSYS, "as landlock_create_ruleset"},
	{unix.SYS_CHROOT, unix.EPERM, "not supported yet: kbox resolves paths from the image's root for every process (a per-process root is not modelled)"},
	// Until sockets and IPC private to the kbox run exist: the host's
	// IPC and abstract socket namespaces are shared, and a socket name
	// is a host path.
	{unix.SYS_BIND, unix.EOPNOTSUPP, "socket names would be host paths: not supported yet"},
	{unix.SYS_CONNECT, unix.EOPNOTSUPP, "as bind"},
	{unix.SYS_LISTEN, unix.EOPNOTSUPP, "as bind"},
	{unix.SYS_ACCEPT, unix.EOPNOTSUPP, "as bind"},
	{unix.SYS_ACCEPT4, unix.EOPNOTSUPP, "as bind"},
	{unix.SYS_SHMGET, unix.ENOSYS, "System V IPC lives in the host's IPC namespace, shared with every host process: a kernel without CONFIG_SYSVIPC answers ENOSYS"},
	{unix.SYS_SHMAT, unix.ENOSYS, "as shmget"},
	{unix.SYS_SHMDT, unix.ENOSYS, "as shmget"},
	{unix.SYS_SHMCTL, unix.ENOSYS, "as shmget"},
	{unix.SYS_SEMGET, unix.ENOSYS, "as shmget"},
	{unix.SYS_SEMOP, unix.ENOSYS, "as shmget"},
	{unix.SYS_SEMTIMEDOP, unix.ENOSYS, "as shmget"},
	{unix.SYS_SEMCTL, unix.ENOSYS, "as shmget"},
	{unix.SYS_MSGGET, unix.ENOSYS, "as shmget"},
	{unix.SYS_MSGSND, unix.ENOSYS, "as shmget"},
	{unix.SYS_MSGRCV, unix.ENOSYS, "as shmget"},
	{unix.SYS_MSGCTL, unix.ENOSYS, "as shmget"},
	{unix.SYS_MQ_OPEN, unix.ENOSYS, "POSIX message queues live in the host's IPC namespace: a kernel without CONFIG_POSIX_MQUEUE answers ENOSYS"},
	{unix.SYS_MQ_UNLINK, unix.ENOSYS, "as mq_open"},
	{unix.SYS_MQ_TIMEDSEND, unix.ENOSYS, "as mq_open"},
	{unix.SYS_MQ_TIMEDRECEIVE, unix.ENOSYS, "as mq_open"},
	{unix.SYS_MQ_NOTIFY, unix.ENOSYS, "as mq_open"},
	{unix.SYS_MQ_GETSETATTR, unix.ENOSYS, "as mq_open"},
}

// absentReasons maps each absent syscall to why.
var absentReasons = map[int]string{}

func init() {
	for _, list := range [][]absent{absentCalls, legacyAbsent} {
		for _, a := range list {
			a := a
			absentReasons[a.nr] = a.reason
			register(a.nr, func(e *Engine, r *Request) Result { return errno(a.errno, ENOSYS) }) // absentCalls: answered as a kernel without them
		}
	}
}

// AbsentReason says why syscall nr is answered as absent, or "".
func AbsentReason(nr int) string { return absentReasons[nr] }
