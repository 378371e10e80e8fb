package main

import (
	"fmt"

	"github.com/kbox-project/kbox/lkl"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

// runVersion prints kbox's version and, with liblkl linked, what the
// kernel has: it boots it without a disk to ask (lkl.Inspect; about as
// long as a kbox start).
func runVersion() int {
	if !lkl.Available {
		fmt.Printf("kbox %s (built without LKL)\n", version)
		return 0
	}
	fmt.Printf("kbox %s (liblkl linked, API generation %d)\n", version, lkl.APIGeneration())
	k, err := lkl.Inspect()
	if err != nil {
		fmt.Printf("kernel: unknown (%v)\n", err)
		return 0
	}
	fmt.Printf("kernel: %s\n", k)
	return 0
}
