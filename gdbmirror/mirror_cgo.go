//go:build lkl

package gdbmirror

/*
#cgo CFLAGS: -g
#include "mirror.h"
*/
import "C"

import "sync"

// mu serialises the engine's writers; GDB reads while kbox is stopped and
// checks kbox_gdb.seq.
var mu sync.Mutex

// On reports whether the debug flag is on.
func On() bool { return C.kbox_gdb_enabled != 0 }

// Enable turns the flag on and records the layout version and the fd
// base, syscall names (name(nr), "" for none), the engine's configuration
// (text) and whether kernel snapshots are served (SetKernel).
func Enable(vfdBase int, name func(nr int) string, config string, kernel bool) {
	mu.Lock()
	defer mu.Unlock()
	C.kbox_gdb.version = C.KBOX_GDB_VERSION
	C.kbox_gdb.vfd_base = C.int32_t(vfdBase)
	for nr := range C.KBOX_GDB_SYSCALLS {
		put(C.kbox_gdb.sysnames[nr][:], name(nr))
	}
	put(C.kbox_gdb.config[:], config)
	C.kbox_gdb.kernel_served = C.int32_t(b2i(kernel))
	C.kbox_gdb_enabled = 1
}

// Dispatch is called before the engine serves syscall nr of pid.
func Dispatch(pid, nr int) { C.kbox_gdb_dispatch(C.int32_t(pid), C.int32_t(nr)) }

// Dispatched is called after it, with the result (errno 0: val).
func Dispatched(pid, nr int, val int64, errno int) {
	C.kbox_gdb_dispatched(C.int32_t(pid), C.int32_t(nr), C.int64_t(val), C.int32_t(errno))
}

// Publish replaces the processes, fds and shadows; what does not fit is
// left out (the counts say how many were written).
func Publish(procs []Proc, shadows []Shadow) {
	mu.Lock()
	defer mu.Unlock()
	m := &C.kbox_gdb
	m.seq++ // odd: being written
	m.version = C.KBOX_GDB_VERSION
	np, nf, ns := 0, 0, 0
	for _, p := range procs {
		if np == C.KBOX_GDB_PROCS {
			break
		}
		cp := &m.procs[np]
		cp.pid, cp.nfds = C.int32_t(p.Pid), C.int32_t(len(p.Fds))
		put(cp.cwd[:], p.Cwd)
		put(cp.exe[:], p.Exe)
		np++
		for _, f := range p.Fds {
			if nf == C.KBOX_GDB_FDS {
				break
			}
			cf := &m.fds[nf]
			cf.pid, cf.fd, cf.kind = C.int32_t(p.Pid), C.int32_t(f.Fd), C.int32_t(f.Kind)
			cf.lkl_fd, cf.host_fd, cf.flags = C.int32_t(f.LKLFd), C.int32_t(f.HostFd), C.int32_t(f.Flags)
			cf.cloexec = C.int32_t(b2i(f.Cloexec))
			put(cf.path[:], f.Path)
			nf++
		}
	}
	for _, s := range shadows {
		if ns == C.KBOX_GDB_SHADOWS {
			break
		}
		cs := &m.shadows[ns]
		cs.host_dev, cs.host_ino, cs.lkl_fd = C.uint64_t(s.HostDev), C.uint64_t(s.HostIno), C.int32_t(s.LKLFd)
		put(cs.path[:], s.Path)
		ns++
	}
	m.nprocs, m.nfds, m.nshadows = C.int32_t(np), C.int32_t(nf), C.int32_t(ns)
	m.seq++
}

// Record adds a path resolution to the ring of the last ones.
func Record(r Resolved) {
	mu.Lock()
	defer mu.Unlock()
	m := &C.kbox_gdb
	m.resolved_seq++
	cr := &m.resolved[int(m.resolved_seq)%C.KBOX_GDB_RESOLVED]
	cr.seq = m.resolved_seq
	cr.pid, cr.nr, cr.route = C.int32_t(r.Pid), C.int32_t(r.Nr), C.int32_t(r.Route)
	cr.read_only = C.int32_t(b2i(r.ReadOnly))
	put(cr.given[:], r.Given)
	put(cr.abs[:], r.Abs)
	put(cr.host[:], r.Host)
	put(cr.rel[:], r.Rel)
}

// KernelRequest returns the kernel snapshot GDB asks for, if it asks for
// one newer than the last written.
func KernelRequest() (uint64, bool) {
	req := uint64(C.kbox_gdb_kernel_req)
	return req, req > uint64(C.kbox_gdb.kernel_gen)
}

// SetKernel writes kernel snapshot gen and tells GDB
// (kbox_gdb_snapshot_done).
func SetKernel(text string, gen uint64) {
	mu.Lock()
	put(C.kbox_gdb.kernel[:], text)
	C.kbox_gdb.kernel_gen = C.uint64_t(gen)
	mu.Unlock()
	C.kbox_gdb_snapshot_done(C.uint64_t(gen))
}

// put copies s into a C string field, cut to fit, NUL-terminated.
func put(dst []C.char, s string) {
	n := min(len(s), len(dst)-1)
	for i := range n {
		dst[i] = C.char(s[i])
	}
	dst[n] = 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
