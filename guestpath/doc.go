// Package guestpath resolves the guest's paths to what they name, without
// the engine: clean absolute guest paths (Clean), their Target (an image
// path, a host route, a bind or a node kbox serves), the binds (-b) and
// the system host routes confined beneath their roots (openat2), kbox's
// /dev (the devpts instance at /dev/pts, device nodes by number, the
// controlling terminal, /dev/fd/N names) and the cache of LKL path stats.
//
// Package dispatch calls it: resolveAt and classifyN (dispatch/resolve.go)
// put the pieces together for a guest's request, with the caller's fds,
// /proc and the policy, which stay with the engine. It imports neither
// dispatch nor any tier.
package guestpath
