package clock

const tscAvailable = true

// readTSC executes RDTSC (tsc_amd64.s).
func readTSC() uint64
