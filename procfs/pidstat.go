package procfs

import (
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/hostproc"
)

// PidStat holds the fields of a host process's /proc/PID/stat that kbox
// itself reads (the session's liveness check, the signal tier's process
// groups).
type PidStat struct {
	State byte   // field 3: R, S, D, Z, X ...
	Ppid  int    // field 4
	Pgrp  int    // field 5
	Start uint64 // field 22: start time in clock ticks since boot
}

// ReadPidStat reads the host's /proc/PID/stat of pid; false when the
// process is gone or the file does not parse.
func ReadPidStat(pid int) (PidStat, bool) {
	b, err := hostproc.Read("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return PidStat{}, false
	}
	return parsePidStat(string(b))
}

// parsePidStat parses a /proc/PID/stat text. The command name, field 2,
// is in parentheses and may hold anything (spaces, parentheses), so the
// fields are counted after the last ')'.
func parsePidStat(s string) (PidStat, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return PidStat{}, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 20 || len(f[0]) != 1 {
		return PidStat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return PidStat{}, false
	}
	return PidStat{State: f[0][0], Ppid: ppid, Pgrp: pgrp, Start: start}, true
}
