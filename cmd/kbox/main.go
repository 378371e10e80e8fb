//go:debug containermaxprocs=0

// Command kbox boots the Linux kernel in-process (LKL) from a filesystem
// image and runs unmodified Linux programs against it.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/kbox-project/kbox/trap"
)

// Exit statuses of kbox itself. A guest's own status is passed through
// unchanged (128+N when a signal killed it), so kbox's setup failures use
// the 125-127 range that chroot(1) and env(1) use.
const (
	exitUsage    = 2   // bad command line, or a feature this build lacks
	exitSetup    = 125 // image, kernel or supervisor setup failed
	exitNotExec  = 126 // the guest program exists but cannot run
	exitNotFound = 127 // the guest program does not exist

)

const mainUsage = `usage: kbox COMMAND [options]

commands:
  image     boot a kernel from an image and run a program in it
  pull      make an image from a registry's (kbox pull alpine:3.20 -o alpine.ext4)
  import    make an image from a docker save, OCI layout or rootfs tarball
  mcp       serve agents' tool calls (Model Context Protocol, docs/agents.md)
  session   a live kernel kept up between commands: open, run, checkpoint,
            rollback, fork, ps, close (kbox session --help)
  audit     verify an audit log (kbox audit verify FILE [--head HASH])
  policy    check a policy file (kbox policy check FILE)
  probe     measure the boundary: probes in a guest under the image options
  file      one file operation on an image, with no guest (used by mcp)
  version   print the version, the linked LKL API and what the kernel has
  help      this help

Run 'kbox image --help' for the image options.
`

func main() {
	// The in-process tiers' guest fds are the low numbers of kbox's own
	// fd table (trap/fds.go): they are reserved before kbox opens
	// anything. Go's runtime keeps no fd of its own open at this point
	// but its netpoll's (containermaxprocs=0, above: it closes its cgroup
	// files).
	if mayRunInProcess(os.Args[1:]) {
		trap.Prepare() // errors are reported where runImage calls it again
	}
	code := run(os.Args[1:])
	if dieWith != 0 {
		trap.Die(dieWith) // the trap tier's guest died of a signal
	}
	os.Exit(code)
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, mainUsage)
		return exitUsage
	}
	switch args[0] {
	case "image":
		return runImage(args[1:])
	case "import":
		return runImport(args[1:])
	case "pull":
		return runPull(args[1:])
	case "mcp":
		return runMCP(args[1:])
	case "session":
		return runSession(args[1:])
	case "audit":
		return runAudit(args[1:])
	case "policy":
		return runPolicy(args[1:])
	case "probe":
		return runProbe(args[1:])
	case "file":
		return runFile(args[1:])
	case "version", "--version":
		return runVersion()
	case "help", "-h", "--help":
		fmt.Print(mainUsage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "kbox: unknown command %q\n%s", args[0], mainUsage)
	return exitUsage
}

// fail prints one line for err and returns the exit status it deserves.
func fail(err error) int {
	fmt.Fprintf(os.Stderr, "kbox: %v\n", err)
	var ue *UsageError
	var ns *notSupportedError
	switch {
	case errors.As(err, &ue), errors.As(err, &ns):
		return exitUsage
	}
	return exitSetup
}

// mayRunInProcess reports options (before "--") that may put the guest in
// kbox's own process: --syscall-mode trap or rewrite, or --trusted (auto
// may then choose rewrite). Each needs trap.Prepare before Go's netpoll
// opens its fds, which would otherwise take guest numbers (4, 5) that the
// guest could then neither get nor dup2 onto.
func mayRunInProcess(args []string) bool {
	for i, a := range args {
		mode, isMode := strings.CutPrefix(a, "--syscall-mode=")
		if a == "--syscall-mode" && i+1 < len(args) {
			mode, isMode = args[i+1], true
		}
		switch {
		case a == "--":
			return false
		case a == "--trusted", isMode && (mode == "trap" || mode == "rewrite"):
			return true
		}
	}
	return false
}
