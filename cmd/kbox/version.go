package main

import (
	"fmt"

	"github.com/kbox-project/kbox/lkl"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

func runVersion() int {
	if lkl.Available {
		fmt.Printf("kbox %s (liblkl linked, API generation %d)\n", version, lkl.APIGeneration())
	} else {
		fmt.Printf("kbox %s (built without LKL)\n", version)
	}
	return 0
}
