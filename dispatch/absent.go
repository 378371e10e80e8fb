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
