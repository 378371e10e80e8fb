package clock

import _ "unsafe" // for go:linkname

// nanotime is the runtime's monotonic clock, without time.Now's wall-clock
// read.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
