package dispatch

// StatGen returns the stat cache's generation (cache.go): a test sees by it
// whether a syscall made every cached stat stale.
func (e *Engine) StatGen() uint64 { return e.stats.Gen() }
