package procfs

import (
	"os"
	"strconv"
	"strings"
)

// Stat holds the fields of a host process's /proc/PID/stat that kbox
// itself reads (the session's liveness check, the signal tier's process
// groups).
type Stat struct {
	State byte   // field 3: R, S, D, Z, X ...
	Ppid  int    // field 4
	Pgrp  int    // field 5
	Start uint64 // field 22: start time in clock ticks since boot
}

// HostStat reads the host's /proc/PID/stat of pid; false when the
// process is gone or the file does not parse.
func HostStat(pid int) (Stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	return parseHostStat(string(b))
}

// parseHostStat parses a /proc/PID/stat text. The command name, field 2,
// is in parentheses and may hold anything (spaces, parentheses), so the
// fields are counted after the last ')'.
func parseHostStat(s string) (Stat, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Stat{}, false
	}
	return Stat{State: f[0][0], Ppid: ppid, Pgrp: pgrp, Start: start}, true
}
