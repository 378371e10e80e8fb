// Reading a program for execution (execve, the in-process tiers' first
// program): an image file through LKL, a bind's through its confined fd.

package dispatch

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// content is a file's bytes read for execution. An image file's are read
// by LKL straight into a memfd of kbox's (fd), which b maps read-only:
// nothing on Go's heap, and the memfd, sealed, is the program the tiers
// run (image.seal) without another copy; a bind's likewise, read with
// pread. fd is -1 when nothing was read. release unmaps and closes; the
// bytes must not be used after it.
type content struct {
	b  []byte
	fd int
}

// read reports whether the bytes were read (an empty file's too).
func (c *content) read() bool { return c.fd >= 0 }

func (c *content) release() {
	if c.fd >= 0 {
		if len(c.b) > 0 {
			unix.Munmap(c.b)
		}
		unix.Close(c.fd)
	}
	c.b, c.fd = nil, -1
}

// loadFile reads the file at guest path p for execution: from the bind
// holding p, confined in it, or else from the image. Nothing on a system
// host route (/proc, /sys, /dev) is executed. With skipKnown, an image
// file loadImage inspected before, unchanged, is not read: no bytes.
func (e *Engine) loadFile(p string, skipKnown bool) (content, execKey, unix.Errno) {
	if b := e.bindOf(p); b != nil {
		c, k, en := loadBindFile(p, b, b.Target(p).Rel)
		if en != unix.EXDEV {
			return c, k, en
		}
		// A link in the bind leads out of it: the path is walked in the
		// guest's tree, as a call's (redoWalked), and read from there.
		q, wen := e.walkIn(nil, "/", "/", p, true)
		if wen != 0 {
			return content{fd: -1}, execKey{}, wen
		}
		if b = e.bindOf(q); b != nil {
			return loadBindFile(q, b, b.Target(q).Rel)
		}
		p = q
	}
	if _, onRoute := e.route(p); onRoute {
		return content{fd: -1}, execKey{}, unix.EACCES
	}
	// The caller must be allowed to execute it, as the kernel checks:
	// search permission on the way, an execute bit for the caller (for
	// root, any execute bit), no noexec mount. Reading it is kbox's own
	// business (a program may be executable and not readable): as root.
	if _, le := lklPath(lkl.SysFaccessat2, 1, p, [6]uintptr{atFdcwd, 0, unix.X_OK, unix.AT_EACCESS}); le != 0 {
		return content{fd: -1}, execKey{}, le
	}
	var c content
	var k execKey
	var le unix.Errno
	asRoot(func() { c, k, le = e.loadImageFile(p, skipKnown) })
	return c, k, le
}

// loadImageFile reads an image file for execution, through LKL: a shadow
// of it is written back first. With skipKnown (an exec's), a file
// inspected before (its key: device, inode, size and change time) is not
// read, and one Prewarm read with the same key is taken from it.
func (e *Engine) loadImageFile(p string, skipKnown bool) (content, execKey, unix.Errno) {
	var k execKey
	none := content{fd: -1}
	// Non-blocking: opening a FIFO must not wait for a writer (a FIFO
	// then fails the regular-file check below).
	fd, le := lklPath(lkl.SysOpenat, 1, p, [6]uintptr{atFdcwd, 0, uintptr(lkl.OpenFlagsToLKL(unix.O_RDONLY|unix.O_NONBLOCK)) | unix.O_CLOEXEC})
	if le != 0 {
		return none, k, le
	}
	defer lkl.Close(int(fd))
	st, err := lkl.Fstat(int(fd))
	if err != nil {
		execFault(p, "fstat through the kernel", err)
		return none, k, unix.EIO
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return none, k, unix.EACCES // directories too
	}
	if err := e.Shadows.SyncInode(st.Dev, st.Ino); err != nil {
		return none, k, sysabi.Errno(err)
	}
	if st, err = lkl.Fstat(int(fd)); err != nil {
		execFault(p, "fstat through the kernel after its write-back", err)
		return none, k, unix.EIO
	}
	if st.Size > MaxExecSize {
		return none, k, unix.E2BIG
	}
	k = execKey{dev: st.Dev, ino: st.Ino, size: st.Size, ctime: st.Ctime, ctimeNs: int64(st.CtimeNsec)}
	if skipKnown {
		if inspectedInfo(k) != nil {
			return none, k, 0
		}
		if c, ok := e.takePrewarmed(p, k); ok {
			return c, k, 0 // read by Prewarm (warm.go)
		}
	}
	read := false
	c, en := readMemfd("kbox-exec:"+p, int(st.Size), func(mfd int) bool {
		// A file read before: from its node; else from the image's
		// blocks where they are the file's (a read-only image, a file
		// unchanged since a writable mount's start).
		if e.Shadows.CopyCurrent(&st, mfd) {
			return true
		}
		read = e.Opt.CopyFile != nil && e.Opt.CopyFile(int(fd), &st, mfd)
		return read
	}, func(b []byte, off int) (int, unix.Errno) {
		read = true
		n, le := lkl.Syscall6(lkl.SysPread64, fd, uptr(b), uintptr(len(b)), uintptr(off), 0, 0)
		return int(n), le
	})
	if read {
		// LKL's reads (or a copy from the blocks, which reads a byte
		// through fd for it) may have moved the file's access time, as
		// an exec's do on Linux (by the mount's rule): the shadows' log
		// has it for the stat cache (shadowfd/atime.go; the exec is
		// OwnChange).
		if now, err := lkl.Fstat(int(fd)); err != nil {
			e.stats.Changed()
		} else if now.Atime != st.Atime || now.AtimeNsec != st.AtimeNsec {
			e.Shadows.GaveAtime(&now)
		}
	}
	return c, k, en
}

// readMemfd makes a memfd of size bytes named name (sealable, as a
// program's copy must be), fills it with fill when fill can, else with
// pread's bytes through a bounce buffer (n == 0 before the end: the file
// shrank, EIO), and maps it read-only. Written with pwrite, the memfd
// takes no page fault; with no writable mapping, it may be sealed against
// writes.
func readMemfd(name string, size int, fill func(mfd int) bool, pread func(b []byte, off int) (int, unix.Errno)) (content, unix.Errno) {
	none := content{fd: -1}
	mfd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return none, unix.ENOMEM
	}
	c := content{fd: mfd}
	if size == 0 {
		return c, 0 // nothing to map: an empty file (ENOEXEC when inspected)
	}
	fail := func(en unix.Errno) (content, unix.Errno) {
		unix.Close(mfd)
		return none, en
	}
	if err := unix.Ftruncate(mfd, int64(size)); err != nil {
		return fail(unix.ENOMEM)
	}
	bp := bounce.Get().(*[]byte)
	defer bounce.Put(bp)
	buf := *bp
	off := 0
	if fill(mfd) {
		off = size
	}
	for off < size {
		n, en := pread(buf[:min(len(buf), size-off)], off)
		if en == 0 && n <= 0 {
			execFault(name, fmt.Sprintf("reading it: end of file at %d of %d bytes", off, size), nil)
			en = unix.EIO
		}
		if en == unix.EIO {
			execFault(name, fmt.Sprintf("reading it at %d of %d bytes", off, size), en)
		}
		if en != 0 {
			return fail(en)
		}
		for w := 0; w < n; {
			k, err := unix.Pwrite(mfd, buf[w:n], int64(off+w))
			if err != nil {
				return fail(unix.ENOMEM)
			}
			w += k
		}
		off += n
	}
	// Private: a shared mapping of the writable memfd would make the
	// seal against writes (image.seal) fail with EBUSY while it lasts.
	// Nothing writes to it, so it shows the memfd's pages.
	if c.b, err = unix.Mmap(mfd, 0, size, unix.PROT_READ, unix.MAP_PRIVATE); err != nil {
		return fail(unix.ENOMEM)
	}
	return c, 0
}

// execFault says on kbox's stderr why an exec of program p failed with
// EIO for a reason of kbox's or the image's (a read, a seal), which the
// guest sees only as the errno.
func execFault(p, what string, err error) {
	if err != nil {
		what += ": " + err.Error()
	}
	fmt.Fprintf(os.Stderr, "kbox: exec %s: %s (EIO)\n", strings.TrimPrefix(p, "kbox-exec:"), what)
}

// bounce holds readMemfd's buffers.
var bounce = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// stNoexec is ST_NOEXEC of statfs's f_flags (MS_NOEXEC's value).
const stNoexec = 0x8

// loadBindFile reads a bind's host file for execution. It is opened with
// the bind's confined openat2 as an O_PATH fd (no open of a FIFO or device
// node), and must be a regular file that kbox's host uid may execute, on a
// filesystem not mounted noexec, as the host kernel would require of an
// execve. Its content is then read through kbox's own /proc/self/fd link
// of that fd, which reaches exactly that inode.
func loadBindFile(p string, b *guestpath.Bind, rel string) (content, execKey, unix.Errno) {
	var k execKey
	none := content{fd: -1}
	pfd, err := b.OpenIn(rel, unix.O_PATH, 0)
	if err != nil {
		return none, k, sysabi.Errno(err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return none, k, sysabi.Errno(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
		return none, k, unix.EACCES // directories and special files too
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(pfd, &sfs); err != nil || sfs.Flags&stNoexec != 0 {
		return none, k, unix.EACCES
	}
	if err := unix.Access(guestpath.ProcFd(pfd), unix.X_OK); err != nil {
		return none, k, sysabi.Errno(err)
	}
	fd, err := unix.Open(guestpath.ProcFd(pfd), unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return none, k, sysabi.Errno(err)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return none, k, sysabi.Errno(err)
	}
	if st.Size > MaxExecSize {
		return none, k, unix.E2BIG
	}
	k = execKey{host: true, dev: st.Dev, ino: st.Ino, size: st.Size, ctime: st.Ctim.Sec, ctimeNs: st.Ctim.Nsec}
	c, en := readMemfd("kbox-exec:"+p, int(st.Size), func(int) bool { return false }, func(b []byte, off int) (int, unix.Errno) {
		for {
			n, err := unix.Pread(fd, b, int64(off))
			if err != unix.EINTR {
				return n, sysabi.Errno(err)
			}
		}
	})
	return c, k, en
}
