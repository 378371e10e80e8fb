// cbfloor is the floor of the in-process tiers' way into Go and back,
// measured with no kbox: a thread made in C (as the tiers' guest threads
// are, never a Go thread) calls an exported Go function N times, as the
// rewrite tier's stub reaches the engine (kbox_rw_entry, then cgo's
// callback into kboxTrapServe), then returns to C.
//
//	cbfloor MODE N [PATH]
//
//	  loop     the C loop alone
//	  xsave    XSAVE and XRSTOR of every state component around an empty
//	           body: what the stub saves of the guest's FP and vector state
//	  call     a callback into an empty Go function
//	  xcall    both: the rewrite tier's way into Go and back, without the
//	           general registers and FS switches (a few ns)
//	  openclose  PATH opened and closed natively in the C loop
//	  xopenclose the open in one xcall and the close in another, each
//	           made by the Go function: an open+close under the rewrite
//	           tier with nothing of kbox's between the way in and the
//	           host's calls
//	  vsave, vcall, vopenclose  the same with the vector registers
//	           moved by hand after XGETBV 1 instead of XSAVE and XRSTOR,
//	           as the tiers do when the guest uses no x87
//	           (trap/fpstate.c): the widest registers the CPU has
//
// It prints "MODE ns_per_op" (the median of 5 rounds of N).
package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: cbfloor loop|xsave|call|xcall|openclose|xopenclose|vsave|vcall|vopenclose N [PATH]")
		os.Exit(2)
	}
	mode := os.Args[1]
	n, err := strconv.Atoi(os.Args[2])
	if err != nil || n <= 0 {
		fmt.Fprintln(os.Stderr, "cbfloor: N must be a positive count")
		os.Exit(2)
	}
	m, ok := map[string]int{"loop": 0, "xsave": 1, "call": 2, "xcall": 3, "openclose": 4, "xopenclose": 7, "vsave": 8, "vcall": 9, "vopenclose": 12}[mode]
	if !ok {
		fmt.Fprintln(os.Stderr, "cbfloor: unknown mode", mode)
		os.Exit(2)
	}
	if m&4 != 0 {
		if len(os.Args) < 4 {
			fmt.Fprintln(os.Stderr, "cbfloor:", mode, "needs a PATH")
			os.Exit(2)
		}
		setPath(os.Args[3])
	}
	var v []float64
	for range 5 {
		v = append(v, run(m, n))
	}
	slices.Sort(v)
	fmt.Printf("%s %.1f\n", mode, v[2])
}
