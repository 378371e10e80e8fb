// Package procfs is the guest's /proc: which path under /proc means what
// for which guest process, and the texts kbox makes in place of the
// host's (mount tables, loadavg, uptime, stat, the identity files, fdinfo
// of virtual fds), the listing of the guest's processes and who may
// inspect whom, and the values kbox keeps for the guest (oom_score_adj).
//
// The syscall engine (package dispatch) asks Classify what a path is,
// and this package decides how a Node is served: an open (PlanOpen,
// OpenLKL), a stat (Stat), access(2) (Access), statfs (Statfs), a write
// to a guest process's host file (WriteCheck); it describes a guest fd
// as its /proc/PID/fd link shows it (VirtualFdRef, GuestFdRef) and makes
// the host fds of its texts (TextFd) and writable files (Var). The
// engine acts on the answers: it follows links and installs fds. What the package needs of the
// engine (its process table, a process's fds, kbox's own mounts and
// names of host files, LKL's proc) it asks through System, an interface
// the engine implements. Only paths under /proc reach it.
//
// docs/guest-view.md "The guest's /proc" says what the guest sees;
// docs/tiers.md says how the engine serves it.
package procfs
