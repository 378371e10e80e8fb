package main

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/trap"
)

// trapFDs is the guest's fd limit in the trap tier (trap.Prepare), the
// engine's virtual fd base; 0 in the seccomp tier.
var trapFDs int

// dieWith is the signal that killed a trap-tier guest: kbox dies of it
// once everything is written back and unmounted (main), so that its
// parent sees the guest's death.
var dieWith int

// inProcess reports whether mode is an in-process tier (package trap).
func inProcess(mode string) bool { return mode == "trap" || mode == "rewrite" }

// runTrap runs the guest in the in-process trap tier (docs/tiers.md).
func runTrap(o *ImageOptions, path string, eng *dispatch.Engine) (int, error) {
	ex, err := trap.Run(trap.Config{
		Argv:    o.Command,
		Env:     guestEnv(o),
		Path:    path,
		WorkDir: o.WorkDir,
		Engine:  eng,
		Verbose: o.Verbose,
		Rewrite: o.SyscallMode == "rewrite",
	})
	if o.Stats && err == nil {
		fmt.Fprintf(os.Stderr, "kbox: tier %s: %s, %d W^X mappings refused\n", o.SyscallMode, ex.Sites, ex.Sites.WX)
	}
	var pe *trap.ProgramError
	if errors.As(err, &pe) {
		fmt.Fprintf(os.Stderr, "kbox: %v\n", err)
		if pe.Errno == unix.ENOENT {
			return exitNotFound, nil
		}
		return exitNotFound - 1, nil // 126: found, not executable
	}
	if err != nil {
		return 0, err
	}
	dieWith = ex.Signal
	return ex.Status, nil
}
