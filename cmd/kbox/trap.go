package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/lkl"
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

// autoUntrusted is why auto runs a program nobody vouched for in the
// seccomp tier: only that tier confines a program that attacks kbox
// (docs/security.md, "Which tier confines what").
const autoUntrusted = "auto: not --trusted, so the tier that confines it"

// tierWhy is why the tier runs, as -v, --stats and the trace say it.
func tierWhy(o *ImageOptions) string {
	switch {
	case o.TierWhy != "":
		return o.TierWhy
	case o.Trusted:
		return "asked for, --trusted"
	case inProcess(o.SyscallMode):
		return "asked for; not confined"
	}
	return "asked for"
}

// notConfined is the line kbox prints when the user asked for an
// in-process tier without saying the program is trusted.
func notConfined(mode string) string {
	return "kbox: warning: --syscall-mode=" + mode + " runs the program inside kbox's own process: it is not confined (docs/security.md); --trusted says you trust it"
}

// chooseTier is auto's choice for the program at path (auto.go), read
// from the image through the engine (as execve would read it).
func chooseTier(o *ImageOptions, path string, eng *dispatch.Engine) (string, string) {
	prog, en := eng.ReadProgram(path)
	if en != 0 {
		// A script (ENOEXEC), or a program the seccomp tier will report
		// on as execve does.
		if en == unix.ENOEXEC {
			return "seccomp", "auto: a script or not an ELF program"
		}
		return "seccomp", "auto: the program cannot be read (" + en.Error() + ")"
	}
	defer prog.Close()
	mode, why := tierChoice(o.Command[0], fdReader(prog.Main), func(p string) (io.ReaderAt, error) {
		b, err := lkl.ReadFile(p)
		if err != nil {
			return nil, err
		}
		return bytes.NewReader(b), nil
	})
	return mode, "auto: " + why
}

// fdReader reads a file by its fd.
type fdReader int

func (f fdReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := unix.Pread(int(f), b, off)
	if err == nil && n < len(b) {
		return n, io.EOF
	}
	return n, err
}

// runTrap runs the guest in the in-process trap tier (docs/tiers.md).
func runTrap(o *ImageOptions, path string, eng *dispatch.Engine, phase func(string)) (int, error) {
	ex, err := trap.Run(trap.Config{
		Argv:    o.Command,
		Env:     guestEnv(o),
		Path:    path,
		WorkDir: o.WorkDir,
		Engine:  eng,
		Verbose: o.Verbose,
		Rewrite: o.SyscallMode == "rewrite",
		Phase:   phase,
	})
	if o.Stats && err == nil {
		fmt.Fprintf(os.Stderr, "kbox: tier %s (%s): %s, %d W^X mappings refused\n", o.SyscallMode, tierWhy(o), ex.Sites, ex.Sites.WX)
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
	if ex.Signal == int(unix.SIGKILL) {
		// SIGKILL (--timeout, or the guest's own kill): kbox exits
		// 137 as the seccomp tier does; dying of it gains nothing.
		return ex.Status, nil
	}
	dieWith = ex.Signal
	return ex.Status, nil
}
