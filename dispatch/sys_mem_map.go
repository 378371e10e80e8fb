// The mem family: mmap of virtual fds (FamMem in table.go).

package dispatch

import (
	"os"
	"strconv"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// A virtual fd (a file above KBOX_SHADOW_MAX, docs/tiers.md) is no host
// fd, so the host's mmap cannot map it. A program that maps such a file
// (git's pack files, a large shared library, a database) gets instead the
// mapped part of the file's content, read from LKL into a host file of
// the file's size at the same offsets (the rest a hole): MapWindow. The
// seccomp tier puts that file, read-only, at the guest's fd number and
// lets the guest's mmap run on it; the in-process tiers map it themselves.
// Not exact: the mapping holds the content as it was when mapped (later
// writes through fds do not show, a private mapping's untouched pages
// would on Linux; mremap beyond the window shows zeros), and a shared
// writable mapping is EACCES (the host file is read-only: no store could
// reach the file).

// mapName begins the names of the host files MapWindow makes, followed by
// the file's guest path (its last bytes, past a memfd name's limit): the
// guest's /proc/PID/maps shows that path (procfs/maps.go), the host's
// "/memfd:kbox-map:PATH (deleted)".
const mapName = "kbox-map:"

// memfdNameMax is the longest name memfd_create takes.
const memfdNameMax = 249

// memfdName is the name of one of kbox's memfds for the file at guest
// path p: prefix and p, cut to its last bytes past memfd_create's limit.
func memfdName(prefix, p string) string {
	if max := memfdNameMax - len(prefix); len(p) > max {
		p = p[len(p)-max:]
	}
	return prefix + p
}

// mapChunk is how much of a window one LKL read fills.
const mapChunk = 1 << 20

// sysMmap serves mmap(2) of a virtual fd in the seccomp tier (the filter
// notifies an fd in the virtual range, FDArg4): its window goes at the
// fd's number, and the host's mmap runs on it.
func sysMmap(e *Engine, r *Request) Result {
	fd := int32(r.Args[4])
	if r.Args[3]&unix.MAP_ANONYMOUS != 0 || !r.P.FDs.IsVirtual(int(fd)) {
		return cont // the host's EBADF for a number that is no fd
	}
	if e.locks.any.Load() {
		if x, _ := e.lockProxy(int(fd), r.P, false); x.fd > 0 && e.proxyAt(r, int(fd), x) {
			// The guest's locks hang on the proxy's description there
			// (sys_file_locks.go): replacing it would drop them.
			return errno(unix.ENODEV, Emulated)
		}
	}
	hfd, en := e.MapWindow(r.P, int(fd), r.Args[5], r.Args[1])
	if en != 0 {
		return errno(en, LKL)
	}
	defer unix.Close(hfd)
	if en := AddFDAt(r, hfd, fd, true); en != 0 {
		return errno(en, Host)
	}
	e.windows.Store(true)
	return cont
}

// MapWindow returns a new host fd, read-only, of a file holding what the
// file of virtual fd fd of process p holds from off for length bytes, at
// the same offsets, for an mmap of fd: a memfd of the file's size, the
// rest of it a hole. Linux's errors of mmap come first: EBADF for no fd or
// an O_PATH one, ENODEV for what is not a regular file (a directory),
// EACCES for one not open for reading, EINVAL for an offset not a page's
// or no length. A host file kept in the virtual table (hostfd.go: a shell's
// saved fd) is ENODEV.
func (e *Engine) MapWindow(p *Proc, fd int, off, length uint64) (int, unix.Errno) {
	ent, open := p.FDs.Get(fd)
	switch {
	case !open || ent.File.Flags&unix.O_PATH != 0:
		return -1, unix.EBADF
	case ent.File.Host || ent.File.Listing != nil:
		return -1, unix.ENODEV
	case ent.File.Flags&unix.O_ACCMODE == unix.O_WRONLY:
		return -1, unix.EACCES
	case off%uint64(os.Getpagesize()) != 0 || length == 0:
		return -1, unix.EINVAL
	}
	lfd := ent.File.LKLFd
	st, err := lkl.Fstat(lfd)
	if err != nil {
		return -1, sysabi.Errno(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, unix.ENODEV
	}
	if off+length < off {
		return -1, unix.ENOMEM // Linux: no room for such a range
	}
	size := uint64(st.Size)
	end := min(off+length, size)
	mfd, err := unix.MemfdCreate(memfdName(mapName, ent.File.Path), unix.MFD_CLOEXEC)
	if err != nil {
		return -1, sysabi.Errno(err)
	}
	defer unix.Close(mfd)
	if err := unix.Ftruncate(mfd, int64(size)); err != nil {
		return -1, sysabi.Errno(err)
	}
	buf := make([]byte, min(mapChunk, max(end, off)-off))
	for at := off; at < end; {
		n, le := lkl.Syscall6(lkl.SysPread64, uintptr(lfd), uptr(buf), uintptr(min(uint64(len(buf)), end-at)), uintptr(at), 0, 0)
		if le != 0 {
			return -1, le
		}
		if n == 0 {
			break // the file shrank: the rest is a hole
		}
		if _, err := unix.Pwrite(mfd, buf[:n], int64(at)); err != nil {
			return -1, sysabi.Errno(err)
		}
		at += uint64(n)
	}
	ro, err := unix.Open("/proc/self/fd/"+strconv.Itoa(mfd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, sysabi.Errno(err)
	}
	return ro, 0
}

// AddFDAt installs kbox's hostfd in the seccomp guest at fd. A virtual fd
// number lies above the guest's RLIMIT_NOFILE (the virtual base), where
// the kernel installs nothing: kbox raises the guest's soft limit for the
// install and puts it back, and the host fd there is not in the guest's
// view (fds at that number are virtual ones, served by kbox).
func AddFDAt(r *Request, hostfd int, fd int32, cloexec bool) unix.Errno {
	if fd < 0 {
		return unix.EBADF
	}
	if r.P.FDs.IsVirtual(int(fd)) {
		var old unix.Rlimit
		if err := unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
			return sysabi.Errno(err)
		}
		raised := unix.Rlimit{Cur: uint64(fd) + 1, Max: old.Max}
		if raised.Cur > raised.Max {
			return unix.EMFILE
		}
		if err := unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, &raised, nil); err != nil {
			return sysabi.Errno(err)
		}
		defer unix.Prlimit(r.P.Tgid, unix.RLIMIT_NOFILE, &old, nil)
	}
	if _, err := r.G.AddFD(hostfd, int(fd), cloexec); err != nil {
		return sysabi.Errno(err)
	}
	return 0
}
