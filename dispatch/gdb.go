package dispatch

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/gdbmirror"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// The debug mirror for GDB (package gdbmirror, scripts/gdb/kbox-gdb.py,
// docs/gdb-workflow.md). With KBOX_GDB=1 in kbox's environment, or once GDB
// sets kbox_gdb_enabled, Dispatch calls kbox_gdb_dispatch before each
// syscall and kbox_gdb_dispatched after it, and rewrites the mirror of the
// processes, virtual fds and shadow nodes; resolveAt records each path
// resolution. With KBOX_GDB=1 a goroutine also answers GDB's requests for
// a snapshot of the kernel's own /proc (tasks, meminfo, slabinfo), which
// the reduced DWARF of the default liblkl cannot give (task_struct and
// kmem_cache are only declared there).

// debugRoot is the last engine made, where a debugger finds the engine's
// Go state (scripts/dlv/kbox.star: Delve reads Go maps and slices well,
// unlike GDB). Written under debugMu; only debuggers read it.
var (
	debugMu   sync.Mutex
	debugRoot *Engine
)

func setDebugRoot(e *Engine) {
	debugMu.Lock()
	debugRoot = e
	debugMu.Unlock()
}

// gdbKernel is the kernel-snapshot goroutine's stop and done.
type gdbKernel struct {
	stop chan struct{}
	done sync.WaitGroup
}

// gdbState is the engine's side of the mirror.
type gdbState struct {
	gdbk gdbKernel
	// gdbNamed says the mirror has the syscall names and configuration:
	// at start with KBOX_GDB=1, else at the first syscall after GDB set
	// kbox_gdb_enabled (no kernel snapshots then).
	gdbNamed atomic.Bool
}

// gdbInit turns the mirror on when KBOX_GDB asks for it.
func (e *Engine) gdbInit() {
	if v := os.Getenv("KBOX_GDB"); v == "" || v == "0" {
		return
	}
	e.gdbNamed.Store(true)
	gdbmirror.Enable(e.Opt.VirtualFDs, NameOf, e.gdbConfig(), e.Opt.HasKernelProc)
	if e.Opt.HasKernelProc {
		e.gdbk.stop = make(chan struct{})
		e.gdbk.done.Add(1)
		go e.gdbKernelLoop()
	}
}

// gdbStop ends the kernel-snapshot goroutine, before the kernel halts.
func (e *Engine) gdbStop() {
	if e.gdbk.stop != nil {
		close(e.gdbk.stop)
		e.gdbk.done.Wait()
		e.gdbk.stop = nil
	}
}

// gdbConfig describes how paths are placed: one line per host route and
// bind, in the order classify tries them.
func (e *Engine) gdbConfig() string {
	var b strings.Builder
	for _, bd := range e.Opt.Binds {
		mode := "rw"
		if bd.ReadOnly {
			mode = "ro"
		}
		fmt.Fprintf(&b, "bind %s %s %s\n", bd.Guest, bd.Host, mode)
	}
	if e.Opt.Dev {
		b.WriteString("dev /dev/pts /dev/fd /dev/stdin /dev/stdout /dev/stderr\n")
	}
	for _, r := range e.Opt.HostRoutes {
		fmt.Fprintf(&b, "route %s\n", r)
	}
	return b.String()
}

// gdbDispatch is Dispatch with the mirror on.
func (e *Engine) gdbDispatch(r *Request) Result {
	pid := 0
	if r.G != nil {
		pid = r.G.Pid()
	}
	if !e.gdbNamed.Load() && e.gdbNamed.CompareAndSwap(false, true) {
		gdbmirror.Enable(e.Opt.VirtualFDs, NameOf, e.gdbConfig(), false)
	}
	gdbmirror.Dispatch(pid, r.Nr)
	res := e.dispatch(r)
	val := res.Val
	if res.Errno != 0 {
		val = -int64(res.Errno)
	}
	gdbmirror.Dispatched(pid, r.Nr, val, int(res.Errno))
	e.gdbPublish()
	return res
}

// gdbPublish rewrites the mirror's processes, fds and shadows.
func (e *Engine) gdbPublish() {
	var procs []gdbmirror.Proc
	for id, p := range *e.procs.Load() {
		if id != p.Tgid {
			continue
		}
		mp := gdbmirror.Proc{Pid: p.Tgid, Cwd: p.Cwd(), Exe: p.Exe()}
		fds, ents := p.FDs.Fds()
		for i, fd := range fds {
			f := ents[i].File
			mf := gdbmirror.Fd{Fd: fd, Kind: gdbmirror.KindLKL, LKLFd: f.LKLFd, HostFd: -1,
				Flags: f.Flags, Cloexec: ents[i].Cloexec, Path: f.Path}
			switch {
			case f.Host:
				mf.Kind, mf.HostFd = gdbmirror.KindHost, f.HostFd
				if l, err := os.Readlink(guestpath.ProcFd(f.HostFd)); err == nil {
					mf.Path = l // kbox's own fd: the host's name for it
				}
			case f.Listing != nil:
				mf.Kind = gdbmirror.KindListing
			}
			mp.Fds = append(mp.Fds, mf)
		}
		procs = append(procs, mp)
	}
	slices.SortFunc(procs, func(a, b gdbmirror.Proc) int { return a.Pid - b.Pid })
	var shadows []gdbmirror.Shadow
	e.Shadows.EachNode(func(path string, lklfd int, dev, ino uint64) {
		shadows = append(shadows, gdbmirror.Shadow{HostDev: dev, HostIno: ino, LKLFd: lklfd, Path: path})
	})
	gdbmirror.Publish(procs, shadows)
}

// gdbResolved records how resolveAt placed path p.
func (e *Engine) gdbResolved(r *Request, p string, t guestpath.Target, en unix.Errno) {
	rec := gdbmirror.Resolved{Nr: r.Nr, Given: p, Abs: t.Path}
	if r.G != nil {
		rec.Pid = r.G.Pid()
	}
	switch {
	case en != 0:
		rec.Host = "error: " + en.Error()
	case t.Bind != nil:
		rec.Route, rec.Host, rec.Rel, rec.ReadOnly = gdbmirror.RouteBind, t.Bind.Host, t.Rel, t.Bind.ReadOnly
	case t.Proc != nil:
		rec.Route = gdbmirror.RouteProc
	case t.Fd > 0 || t.FdDir:
		rec.Route = gdbmirror.RouteDevFd
		if t.Fd > 0 {
			rec.Rel = "fd " + strconv.Itoa(t.Fd-1)
		}
	case t.Host:
		rec.Route, rec.Host, rec.Rel = gdbmirror.RouteHost, t.Route, t.Rel
	default:
		rec.Route, rec.Rel = gdbmirror.RouteImage, t.LKLPath()
	}
	gdbmirror.Record(rec)
}

// gdbKernelLoop answers GDB's requests for a kernel snapshot. GDB sets
// kbox_gdb_kernel_req and lets kbox run until kbox_gdb_snapshot_done.
func (e *Engine) gdbKernelLoop() {
	defer e.gdbk.done.Done()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-e.gdbk.stop:
			return
		case <-tick.C:
		}
		if gen, ok := gdbmirror.KernelRequest(); ok {
			gdbmirror.SetKernel(e.kernelSnapshot(), gen)
		}
	}
}

// kernelSnapshot reads the kernel's own /proc: every task (pid, parent,
// state, name, threads included), meminfo and slabinfo, as sections
// "@@ name".
func (e *Engine) kernelSnapshot() string {
	runtime.LockOSThread() // AsRoot is per thread
	defer runtime.UnlockOSThread()
	var b strings.Builder
	lkl.AsRoot(func() {
		kp := e.Opt.KernelProc
		b.WriteString("@@ tasks\n")
		names, err := lkl.ReadDirAt(kp, ".")
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		var pids []int
		for _, n := range names {
			if id, err := strconv.Atoi(n); err == nil {
				pids = append(pids, id)
			}
		}
		slices.Sort(pids)
		for _, id := range pids {
			tids, _ := lkl.ReadDirAt(kp, strconv.Itoa(id)+"/task")
			for _, t := range tids {
				st, err := lkl.ReadFileAt(kp, strconv.Itoa(id)+"/task/"+t+"/stat")
				if err != nil {
					continue // gone since the listing
				}
				b.WriteString(taskLine(id, string(st)))
			}
		}
		for _, f := range []string{"meminfo", "slabinfo"} {
			fmt.Fprintf(&b, "@@ %s\n", f)
			txt, err := lkl.ReadFileAt(kp, f)
			if err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
				continue
			}
			b.Write(txt)
		}
	})
	return b.String()
}

// taskLine turns /proc/PID/task/TID/stat into "tgid tid ppid state comm".
func taskLine(tgid int, stat string) string {
	l, r := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if l < 0 || r < l {
		return ""
	}
	tid := strings.TrimSpace(stat[:l])
	f := strings.Fields(stat[r+1:])
	if len(f) < 2 {
		return ""
	}
	return fmt.Sprintf("%d %s %s %s %s\n", tgid, tid, f[1], f[0], stat[l+1:r])
}
