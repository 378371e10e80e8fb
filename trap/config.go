// Package trap is kbox's in-process interception tier: the guest program
// is loaded into kbox's own process and runs on threads kbox creates in C;
// a seccomp filter installed on those threads makes every syscall of guest
// code that cannot run natively raise SIGSYS (SECCOMP_RET_TRAP), and the
// tier serves it through the same engine as the seccomp tier
// (dispatch.Engine.Serve, which also reports to the engine's Observe
// hook). The tier supplies transport only: guest
// memory, fd installation in the shared fd table, running a call on the
// host, and what a process inside kbox's needs to stay apart from kbox:
// the fd and memory guards, emulated signals, threads. docs/tiers.md
// (Trap tier) explains the design; docs/security.md what it confines.
//
// It is built for linux/amd64 with cgo (core.c is its C and assembly
// core). Elsewhere Available reports false and Run refuses.
package trap

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kbox-project/kbox/dispatch"
	"golang.org/x/sys/unix"
)

// Config describes one guest run in the trap tier.
type Config struct {
	Argv    []string
	Env     []string
	Path    string // guest path of the program
	WorkDir string
	Engine  *dispatch.Engine
	Verbose bool
	// Rewrite patches syscall sites that trap often (the rewrite tier).
	Rewrite bool
	// Phase, when set, is told where the run is (kbox's start-up trace):
	// "load" once the program is mapped, "run" once it exited.
	Phase func(name string)
}

// Exit is how the guest ended: Status as a shell reports it, and Signal,
// when a signal killed it, which kbox then dies of itself (Die) once it
// has written the guest's files back.
type Exit struct {
	Status int
	Signal int
	// Sites: the rewrite tier's syscall sites, and W^X refusals.
	Sites SiteStats
}

// ProgramError says the program cannot be executed (as execve would
// fail: ENOENT, EACCES, ENOEXEC): kbox exits 127 or 126 as a shell does.
type ProgramError struct {
	Path  string
	Errno unix.Errno
}

func (e *ProgramError) Error() string { return e.Path + ": " + e.Errno.Error() }

// InstallError says the in-process tier could not be set up (before any
// guest code ran): auto falls through to the seccomp tier.
type InstallError struct{ Err error }

func (e *InstallError) Error() string { return e.Err.Error() }
func (e *InstallError) Unwrap() error { return e.Err }

// SiteStats counts the rewrite tier's sites, and the W^X refusals of the
// in-process tiers.
type SiteStats struct {
	Seen    int            // distinct syscall sites that trapped
	Patched int            // of them patched (Inline of them answered in the stub)
	Inline  int            //
	Dynamic int            // of them, sites whose number is in a register
	Refused map[string]int // of them refused, by reason
	WX      int            // mmap/mprotect asking for write and execute, refused
}

// String is the --stats line.
func (s SiteStats) String() string {
	var rs []string
	n := 0
	for k, v := range s.Refused {
		rs = append(rs, fmt.Sprintf("%d %s", v, k))
		n += v
	}
	sort.Strings(rs)
	out := fmt.Sprintf("%d sites trapped, %d patched (%d inline), %d still trapping", s.Seen, s.Patched, s.Inline, s.Seen-s.Patched)
	if s.Dynamic > 0 {
		out += fmt.Sprintf(", %d patched with the number in a register", s.Dynamic)
	}
	if len(rs) > 0 {
		out += " (refused: " + strings.Join(rs, "; ") + ")"
	}
	return out
}
