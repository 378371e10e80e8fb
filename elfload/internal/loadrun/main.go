// Command loadrun loads a program with package elfload into its own
// process and starts it there with no interception at all (package
// nativerun): the loader's tests compare what a program does loaded so
// with what it does started by the kernel. Build it as PIE (go build
// -buildmode=pie), as kbox is, so that it leaves a non-PIE program's
// addresses free.
//
//	loadrun [-argv0 NAME] [-execfn PATH] PROGRAM [ARG...]
//
// The program gets loadrun's environment; a dynamic program's interpreter
// is read from the host path its PT_INTERP names. loadrun exits with the
// program's status, 127 when it cannot load it.
package main

import (
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/kbox-project/kbox/elfload"
	"github.com/kbox-project/kbox/elfload/internal/nativerun"
	"golang.org/x/sys/unix"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadrun: "+format+"\n", args...)
	os.Exit(127)
}

// sealed returns a sealed memfd holding the file at path, as
// dispatch.ReadProgram gives an in-process tier.
func sealed(path string) (int, []byte) {
	b, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	fd, err := unix.MemfdCreate("kbox-exec:"+filepath.Base(path), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		fail("memfd: %v", err)
	}
	for off := 0; off < len(b); {
		n, err := unix.Write(fd, b[off:])
		if err != nil {
			fail("memfd: %v", err)
		}
		off += n
	}
	unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	return fd, b
}

func main() {
	argv0 := flag.String("argv0", "", "the program's argv[0] (default: PROGRAM)")
	execfn := flag.String("execfn", "", "its AT_EXECFN (default: PROGRAM)")
	flag.Parse()
	if flag.NArg() < 1 {
		fail("usage: loadrun [-argv0 NAME] [-execfn PATH] PROGRAM [ARG...]")
	}
	path := flag.Arg(0)
	argv := flag.Args()
	if *argv0 != "" {
		argv[0] = *argv0
	}
	if *execfn == "" {
		*execfn = path
	}
	machine := elf.EM_X86_64
	if runtime.GOARCH == "arm64" {
		machine = elf.EM_AARCH64
	}
	fd, b := sealed(path)
	info, err := elfload.Inspect(b, machine)
	if err != nil {
		fail("%s: %v", path, err)
	}
	spec := &elfload.Spec{
		Prog: elfload.Image{Name: filepath.Base(path), FD: fd},
		Argv: argv, Envp: os.Environ(), ExecFn: *execfn,
		UID: uint32(os.Getuid()), EUID: uint32(os.Geteuid()), GID: uint32(os.Getgid()), EGID: uint32(os.Getegid()),
	}
	if info.Kind == elfload.Dynamic {
		ifd, _ := sealed(info.Interp)
		spec.Interp = &elfload.Image{Name: filepath.Base(info.Interp), FD: ifd}
	}
	l, err := elfload.Load(spec)
	if err != nil {
		fail("%v", err)
	}
	if err := nativerun.Start(l.Entry, l.SP); err != nil {
		fail("start: %v", err)
	}
	time.Sleep(time.Minute)
	fail("%s did not exit in a minute", path)
}
