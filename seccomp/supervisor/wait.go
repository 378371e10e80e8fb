package supervisor

import (
	"os"

	"golang.org/x/sys/unix"
)

// waitExit waits for kbox's child pid (the keeper) to end, and reaps it.
// The wait parks in Go's netpoller on a pidfd, readable once the child
// has exited, so that no thread of kbox stays blocked in waitid for the
// whole run (docs/benchmarks.md, "Start-up": kbox's threads). Where no
// pidfd can be polled, it is a blocking wait4.
func waitExit(pid int) unix.WaitStatus {
	var ws unix.WaitStatus
	if fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK); err == nil {
		f := os.NewFile(uintptr(fd), "kbox-keeper-pidfd")
		defer f.Close()
		if rc, err := f.SyscallConn(); err == nil {
			reaped := false
			err = rc.Read(func(uintptr) bool {
				for {
					got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
					if err == unix.EINTR {
						continue
					}
					reaped = got == pid
					return reaped || err != nil
				}
			})
			if err == nil && reaped {
				return ws
			}
		}
	}
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
			return ws
		}
	}
}
