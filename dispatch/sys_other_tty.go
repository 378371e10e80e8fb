// The other family's terminal call: vhangup (FamOther in table.go).

package dispatch

import (
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/hostproc"
	"golang.org/x/sys/unix"
)

// capSysTTYConfig is CAP_SYS_TTY_CONFIG's bit.
const capSysTTYConfig = 26

// sysVhangup serves vhangup(2), never for the host's terminal.
func sysVhangup(e *Engine, r *Request) Result {
	// EPERM without the guest's CAP_SYS_TTY_CONFIG, then 0 for a caller with
	// no controlling terminal (a daemon after setsid, nothing to hang up). A
	// controlling terminal is the host's (the user's terminal, or a pty kbox
	// cannot tell from it): hanging it up would cut the user's session, so
	// that is EPERM.
	if c := r.P.creds(); !c.Has(capSysTTYConfig) {
		return errno(unix.EPERM, Emulated)
	}
	if tty, okk := ttyNr(r.G.Pid()); okk && tty == 0 {
		return ok(0, Emulated)
	}
	return errno(unix.EPERM, Denied)
}

// ttyNr reads the controlling terminal (tty_nr, 0 for none) of the
// process of host task tid.
func ttyNr(tid int) (int64, bool) {
	b, err := hostproc.Read("/proc/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold anything
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // state ppid pgrp session tty_nr ...
	if len(f) < 5 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[4], 10, 64)
	return n, err == nil
}
