//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// SetNoNewPrivs sets PR_SET_NO_NEW_PRIVS on the calling thread. The flag is
// per thread (inherited by children and across execve), so it must be set on
// the same OS thread that installs the filter; Install does this itself.
func SetNoNewPrivs() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	return nil
}

// Install loads prog as a seccomp filter on the calling OS thread and returns
// the user-notification listener fd together with the filter flags the
// kernel accepted.
//
// flags is normally DefaultInstallFlags (NEW_LISTENER|WAIT_KILLABLE_RECV).
// If it contains SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV and the kernel
// answers EINVAL (older than 5.19), Install retries without that flag;
// usedFlags tells which variant was installed.
//
// Threading: a seccomp filter installed without TSYNC applies to the calling
// thread and to everything it later creates or execs, nothing else. In Go
// that means Install must run in the process that will exec the guest
// (normally a re-exec'd child of the supervisor), on the goroutine that will
// call execve. Install therefore calls runtime.LockOSThread and never unlocks:
// the filtered thread must not run other goroutines, and if its goroutine
// exits without exec the runtime discards the thread instead of reusing it.
// Install also sets PR_SET_NO_NEW_PRIVS on that thread first, which the kernel
// requires of unprivileged callers.
func Install(prog []bpf.RawInstruction, flags uint) (listenerFd int, usedFlags uint, err error) {
	runtime.LockOSThread()
	if err := SetNoNewPrivs(); err != nil {
		return -1, 0, err
	}
	fd, err := setModeFilter(prog, flags)
	if errors.Is(err, unix.EINVAL) && flags&unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0 {
		flags &^= unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
		fd, err = setModeFilter(prog, flags)
	}
	if err != nil {
		return -1, 0, fmt.Errorf("seccomp: SECCOMP_SET_MODE_FILTER (flags %#x): %w", flags, err)
	}
	if flags&unix.SECCOMP_FILTER_FLAG_NEW_LISTENER == 0 {
		fd = -1
	}
	return fd, flags, nil
}
