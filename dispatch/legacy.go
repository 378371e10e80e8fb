package dispatch

import "golang.org/x/sys/unix"

// Handlers of x86_64 syscalls that asm-generic architectures (arm64)
// replaced with *at() forms, where no family file has them (the others,
// sysOpen, sysStat, ..., live with their families). They build on every
// architecture: the one table (table.go) names them.

// sysUtime is utime(path, struct utimbuf *): whole seconds, or now.
func sysUtime(e *Engine, r *Request) Result {
	if r.Args[1] == 0 {
		return e.utimens(r, unix.AT_FDCWD, r.Args[0], nil, 0)
	}
	var buf [2]int64 // actime, modtime
	if err := r.G.Read(r.Args[1], asBytes(&buf)); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	ts := [2]unix.Timespec{{Sec: buf[0]}, {Sec: buf[1]}}
	return e.utimens(r, unix.AT_FDCWD, r.Args[0], &ts, 0)
}

// sysUtimes is utimes(path, struct timeval[2]).
func sysUtimes(e *Engine, r *Request) Result {
	ts, en := timevals(r, r.Args[1])
	if en != 0 {
		return errno(en, LKL)
	}
	return e.utimens(r, unix.AT_FDCWD, r.Args[0], ts, 0)
}
