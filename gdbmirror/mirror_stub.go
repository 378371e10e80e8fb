//go:build !lkl

package gdbmirror

// On reports whether the debug flag is on: never without LKL.
func On() bool { return false }

// Enable does nothing without LKL.
func Enable(vfdBase int, name func(nr int) string, config string, kernel bool) {}

// Dispatch does nothing without LKL.
func Dispatch(pid, nr int) {}

// Dispatched does nothing without LKL.
func Dispatched(pid, nr int, val int64, errno int) {}

// Publish does nothing without LKL.
func Publish(procs []Proc, shadows []Shadow) {}

// Record does nothing without LKL.
func Record(r Resolved) {}

// KernelRequest reports no request without LKL.
func KernelRequest() (uint64, bool) { return 0, false }

// SetKernel does nothing without LKL.
func SetKernel(text string, gen uint64) {}
