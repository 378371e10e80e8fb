package main

import (
	"fmt"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/seccomp/startup"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

// runVersion prints kbox's version and, with liblkl linked, what the
// kernel has: it boots it without a disk to ask (lkl.Inspect; about as
// long as a kbox start).
func runVersion() int {
	if !lkl.Available {
		fmt.Printf("kbox %s (built without LKL)\n", version)
		printStartup()
		return 0
	}
	fmt.Printf("kbox %s (liblkl linked, API generation %d)\n", version, lkl.APIGeneration())
	printStartup()
	k, err := lkl.Inspect()
	if err != nil {
		fmt.Printf("kernel: unknown (%v)\n", err)
		return 0
	}
	fmt.Printf("kernel: %s\n", k)
	return 0
}

// printStartup says how the seccomp tier's guest start-up process runs
// (package startup).
func printStartup() {
	if n := startup.Size(); n > 0 {
		fmt.Printf("guest start-up: its own program (%d bytes, static)\n", n)
		return
	}
	fmt.Println("guest start-up: kbox re-executed (built without its start-up program: build with make and musl-gcc)")
}
