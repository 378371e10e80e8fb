package dispatch

// What an in-process tier (package trap), which loads and starts guest
// programs itself, needs from the engine beyond Dispatch.

// Cred returns the process's credentials: the ids an in-process tier puts
// in a program's auxiliary vector.
func (p *Proc) Cred() Cred { return p.cred.Load().Cred }

// SetExe records the guest path of the program p now runs (/proc/PID/exe),
// as an exec served by the engine does.
func (e *Engine) SetExe(p *Proc, path string) { p.exe = e.canonical(Clean("/", path)) }
