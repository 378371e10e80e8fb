package dispatch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// dup2/dup3 of a virtual fd onto a host fd number (below Opt.VirtualFDs),
// as a shell does for `cmd < fifo`, `cmd >> big-file` or `exec 3< fifo`:
// the filter runs I/O on low fds natively, so the low fd must be a real host
// fd. kbox installs there one end of a pipe and pumps between the pipe's
// other end and a dup of the LKL file (sharing its offset and flags):
//
//   - read-only: a goroutine reads the LKL file into the pipe (ahead of the
//     guest, up to the pipe's buffer) until end of file;
//   - write-only: a goroutine writes what the pipe receives to the LKL file,
//     until every copy of the guest's end is closed; kbox waits for these
//     before it unmounts the image (Drain).
//
// The guest sees a pipe: no seek (ESPIPE), fstat says FIFO. Refused: a
// directory (EISDIR), an O_PATH fd (EBADF), and a read-write open (EINVAL),
// which cannot be pumped without reading ahead of the guest's writes.
//
// dup2/dup3 of a host fd onto a virtual fd number gives EBADF, what the
// kernel itself answers for a target at or above RLIMIT_NOFILE (which the
// guest's is, the virtual base).

// pumpSet is an Engine's running write pumps: wg counts them for Drain,
// set lists them for flushPumps, n makes the common no-pump case free.
type pumpSet struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	set map[*pump]bool
	n   atomic.Int32
}

// pump is a running write pump: src is kbox's end of the pipe; busy is set
// while data read from it is not yet written to LKL.
type pump struct {
	src  int
	busy atomic.Bool
}

func (e *Engine) bridge(r *Request, f *fdtable.File, target int, cloexec bool) Result {
	if f.Flags&unix.O_PATH != 0 {
		return errno(unix.EBADF, Emulated)
	}
	st, err := lkl.Fstat(f.LKLFd)
	if err != nil {
		return fail(err, LKL)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return errno(unix.EISDIR, Emulated)
	}
	acc := f.Flags & unix.O_ACCMODE
	if acc == unix.O_RDWR {
		return errno(unix.EINVAL, Emulated)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fail(err, Emulated)
	}
	guestEnd, ourEnd := p[0], p[1]
	if acc == unix.O_WRONLY {
		guestEnd, ourEnd = p[1], p[0]
	}
	lfd, le := lkl.Syscall6(lkl.SysDup, uintptr(f.LKLFd), 0, 0, 0, 0, 0)
	if le != 0 {
		unix.Close(p[0])
		unix.Close(p[1])
		return errno(le, LKL)
	}
	_, err = r.G.AddFD(guestEnd, target, cloexec)
	unix.Close(guestEnd)
	if err != nil {
		unix.Close(ourEnd)
		lkl.Close(int(lfd))
		return fail(err, Emulated)
	}
	if acc == unix.O_WRONLY {
		e.writePump(ourEnd, func(pm *pump) { pumpToLKL(pm, int(lfd), &e.stats) })
	} else {
		go pumpFromLKL(int(lfd), ourEnd, &e.stats)
	}
	return ok(int64(target), Emulated)
}

// writePump runs a write pump that reads src, kbox's end of a pipe, with
// run, registered for flushPumps and Drain; src is closed after.
func (e *Engine) writePump(src int, run func(pm *pump)) {
	pm := &pump{src: src}
	ps := &e.pumps
	ps.mu.Lock()
	if ps.set == nil {
		ps.set = map[*pump]bool{}
	}
	ps.set[pm] = true
	ps.mu.Unlock()
	ps.n.Add(1)
	ps.wg.Add(1)
	go func() {
		defer ps.wg.Done()
		run(pm)
		ps.mu.Lock()
		delete(ps.set, pm)
		ps.mu.Unlock()
		ps.n.Add(-1)
		unix.Close(pm.src)
	}()
}

// Both pumps change LKL state behind the supervisor (sizes, times): they
// end the stat cache's generation around each transfer.
func pumpToLKL(pm *pump, lfd int, stats *guestpath.StatCache) {
	defer lkl.Close(lfd)
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(pm.src, buf)
		if err == unix.EINTR {
			continue
		}
		if n <= 0 {
			return
		}
		pm.busy.Store(true)
		stats.Changed()
		for off := 0; off < n; {
			w, le := lkl.Syscall6(lkl.SysWrite, uintptr(lfd), uptr(buf[off:n]), uintptr(n-off), 0, 0, 0)
			if le != 0 || w == 0 {
				return // the guest's later writes go to a closed pipe
			}
			off += int(w)
		}
		stats.Changed()
		pm.busy.Store(false)
	}
}

// flushPumps waits until every write pump has written what its pipe holds,
// so that output the guest wrote through a bridge is in the image before
// the guest goes on (called on close, dup2 over a host fd, exit_group).
func (e *Engine) flushPumps() {
	ps := &e.pumps
	if ps.n.Load() == 0 {
		return
	}
	ps.mu.Lock()
	list := make([]*pump, 0, len(ps.set))
	for pm := range ps.set {
		list = append(list, pm)
	}
	ps.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for _, pm := range list {
		for time.Now().Before(deadline) {
			n, err := unix.IoctlGetInt(pm.src, unix.TIOCINQ)
			if err != nil || n == 0 && !pm.busy.Load() {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// flushDonePumps waits, for at most 5 s, until no write pump's pipe is
// left without a writer (poll's POLLHUP) with data or its end of file to
// read: the seccomp tier's filter runs dup2 and close of host fds natively,
// so the guest's last end of a pump's pipe may have gone since kbox last
// looked, and what it wrote must be in the image before any later call is
// served. A pump whose writer is still there (a background writer) is not
// waited for. A pump leaves the set (its pipe closed after) under ps.mu.
func (e *Engine) flushDonePumps() {
	ps := &e.pumps
	deadline := time.Now().Add(5 * time.Second)
	for {
		ps.mu.Lock()
		done := false
		for pm := range ps.set {
			pfd := []unix.PollFd{{Fd: int32(pm.src), Events: unix.POLLIN}}
			if n, err := unix.Poll(pfd, 0); err == nil && n > 0 && pfd[0].Revents&unix.POLLHUP != 0 {
				done = true
				break
			}
		}
		ps.mu.Unlock()
		if !done || time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func pumpFromLKL(lfd, dst int, stats *guestpath.StatCache) {
	defer unix.Close(dst)
	defer lkl.Close(lfd)
	buf := make([]byte, 64<<10)
	for {
		n, le := lkl.Syscall6(lkl.SysRead, uintptr(lfd), uptr(buf), uintptr(len(buf)), 0, 0, 0)
		stats.Changed() // the read may have moved the access time
		if le == unix.EINTR {
			continue
		}
		if le != 0 || n == 0 {
			return
		}
		for off := 0; off < int(n); {
			w, err := unix.Write(dst, buf[off:n])
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return // the guest closed its end
			}
			off += w
		}
	}
}

// Drain waits (at most d) for the pumps that write guest output to the
// image: call it after the guest is gone and before the image is unmounted.
// It first drops the fd tables of processes that never ran exit_group
// (killed by a signal): a host fd kept in one (hostfd.go) may be a pump's
// pipe end, which would keep that pump waiting for more.
func (e *Engine) Drain(d time.Duration) {
	e.dropProcs()
	done := make(chan struct{})
	go func() {
		e.pumps.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}
