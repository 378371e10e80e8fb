// Package startup runs kbox's start-up program: the C of seccomp/supervisor
// (guestinit.c, binder.c, spawner.c, store.c) built static by the
// Makefile (musl-gcc) into bin/kbox-guest and embedded in kbox. The
// seccomp tier's guest start-up process, the in-process tiers' socket
// binder and the content store's helper run it from a sealed memfd
// instead of re-executing kbox, whose dynamic loading (about 100,000
// relocations) and 60 MB image cost each such process milliseconds where
// page faults are slow (docs/benchmarks.md). A kbox built without it
// (plain `go build`, or no musl-gcc) re-executes itself, whose
// constructor runs the same code.
package startup

import (
	"bytes"
	"debug/elf"
	"embed"
	"os"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

//go:embed bin/*
var bin embed.FS

// progFD is the start-up program's fd in its process: its own memfd,
// which the program closes first (guestinit.c, main).
const progFD = 5

var (
	once sync.Once
	prog *os.File
)

// Program is the start-up program in a sealed memfd, made once; nil when
// kbox was built without it, when it cannot be made, or with
// KBOX_GUEST_REEXEC=1 (tests: the re-execution kbox falls back on).
func Program() *os.File {
	once.Do(func() {
		b, err := bin.ReadFile("bin/kbox-guest")
		if err != nil || !native(b) || os.Getenv("KBOX_GUEST_REEXEC") == "1" {
			return
		}
		prog = sealed(b)
	})
	return prog
}

// native reports whether b is an ELF program for the machine kbox runs
// on: make builds it with the host's compiler, whatever GOARCH is.
func native(b []byte) bool {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return false
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return runtime.GOARCH == "amd64"
	case elf.EM_AARCH64:
		return runtime.GOARCH == "arm64"
	}
	return false
}

// sealed returns a memfd holding b, sealed against every change; nil if
// it cannot be made.
func sealed(b []byte) *os.File {
	fd, err := unix.MemfdCreate("kbox-guest", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil
	}
	for off := 0; off < len(b); {
		n, err := unix.Pwrite(fd, b[off:], int64(off))
		if err != nil || n <= 0 {
			unix.Close(fd)
			return nil
		}
		off += n
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "kbox-guest")
}

// Command makes c run the start-up program: c's ExtraFiles must be its
// fds 3 and 4, and the program goes in as fd 5, executed by that number.
// Without the program, c runs kbox itself (its path, so that ps names it
// kbox). It reports whether c runs the program.
func Command(c *exec.Cmd) bool {
	if p := Program(); p != nil && len(c.ExtraFiles) == progFD-3 {
		c.Path = "/proc/self/fd/5"
		c.ExtraFiles = append(c.ExtraFiles, p)
		return true
	}
	c.Path = "/proc/self/exe"
	if self, err := os.Executable(); err == nil {
		c.Path = self
	}
	return false
}

// Size is the embedded program's size in bytes: 0 when kbox was built
// without it (or with one for another machine).
func Size() int {
	b, _ := bin.ReadFile("bin/kbox-guest")
	if !native(b) {
		return 0
	}
	return len(b)
}
