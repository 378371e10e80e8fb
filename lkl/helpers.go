package lkl

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Typed helpers over Syscall6. They allocate (path strings are copied into
// NUL-terminated buffers) and are meant for setup and tests; the dispatch
// hot path calls Syscall6 with its own buffers.

func cstr(s string) ([]byte, error) {
	if bytes.IndexByte([]byte(s), 0) >= 0 {
		return nil, unix.EINVAL
	}
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b, nil
}

func errOf(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// pathCall issues syscall nr with arguments pre, then path, then post.
func pathCall(nr uintptr, path string, pre []uintptr, post ...uintptr) (uintptr, error) {
	p, err := cstr(path)
	if err != nil {
		return 0, err
	}
	var a [6]uintptr
	n := copy(a[:], pre)
	a[n] = Ptr(p)
	copy(a[n+1:], post)
	r, e := Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	runtime.KeepAlive(p)
	return r, errOf(e)
}

// Openat opens path relative to dirfd.
func Openat(dirfd int, path string, flags int, mode uint32) (int, error) {
	r, err := pathCall(SysOpenat, path, []uintptr{uintptr(dirfd)}, uintptr(flags), uintptr(mode))
	return int(r), err
}

// Open opens path relative to the kernel's cwd.
func Open(path string, flags int, mode uint32) (int, error) {
	return Openat(AtFdcwd, path, flags, mode)
}

// Close closes an LKL fd.
func Close(fd int) error {
	_, e := Syscall6(SysClose, uintptr(fd), 0, 0, 0, 0, 0)
	return errOf(e)
}

// Read reads from an LKL fd.
func Read(fd int, b []byte) (int, error) {
	r, e := Syscall6(SysRead, uintptr(fd), Ptr(b), uintptr(len(b)), 0, 0, 0)
	runtime.KeepAlive(b)
	return int(r), errOf(e)
}

// Write writes to an LKL fd.
func Write(fd int, b []byte) (int, error) {
	r, e := Syscall6(SysWrite, uintptr(fd), Ptr(b), uintptr(len(b)), 0, 0, 0)
	runtime.KeepAlive(b)
	return int(r), errOf(e)
}

// Fsync flushes an LKL fd.
func Fsync(fd int) error {
	_, e := Syscall6(SysFsync, uintptr(fd), 0, 0, 0, 0, 0)
	return errOf(e)
}

// Sync flushes every filesystem.
func Sync() { Syscall6(SysSync, 0, 0, 0, 0, 0, 0) }

// Mkdir creates a directory.
func Mkdir(path string, mode uint32) error {
	_, err := pathCall(SysMkdirat, path, []uintptr{uintptr(AtFdcwd & 0xffffffff)}, uintptr(mode))
	return err
}

// Unlink removes a file; with dir set, an empty directory.
func Unlink(path string, dir bool) error {
	flags := uintptr(0)
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	_, err := pathCall(SysUnlinkat, path, []uintptr{uintptr(AtFdcwd & 0xffffffff)}, flags)
	return err
}

// Rename renames oldpath to newpath.
func Rename(oldpath, newpath string) error {
	o, err := cstr(oldpath)
	if err != nil {
		return err
	}
	n, err := cstr(newpath)
	if err != nil {
		return err
	}
	cwd := uintptr(AtFdcwd & 0xffffffff)
	_, e := Syscall6(SysRenameat2, cwd, Ptr(o), cwd, Ptr(n), 0, 0)
	runtime.KeepAlive(o)
	runtime.KeepAlive(n)
	return errOf(e)
}

// Mknod creates a device node.
func Mknod(path string, mode uint32, dev uint64) error {
	_, err := pathCall(SysMknodat, path, []uintptr{uintptr(AtFdcwd & 0xffffffff)}, uintptr(mode), uintptr(dev))
	return err
}

// Symlink makes a symbolic link at path holding target.
func Symlink(target, path string) error {
	t, err := cstr(target)
	if err != nil {
		return err
	}
	_, err = pathCall(SysSymlinkat, path, []uintptr{Ptr(t), uintptr(AtFdcwd & 0xffffffff)})
	runtime.KeepAlive(t)
	return err
}

// Chdir changes the kernel's cwd.
func Chdir(path string) error {
	_, err := pathCall(SysChdir, path, nil)
	return err
}

// Fchdir changes the kernel's cwd to an open directory.
func Fchdir(fd int) error {
	_, e := Syscall6(SysFchdir, uintptr(fd), 0, 0, 0, 0, 0)
	return errOf(e)
}

// Chroot changes the kernel's root.
func Chroot(path string) error {
	_, err := pathCall(SysChroot, path, nil)
	return err
}

// Mount mounts source on target.
func Mount(source, target, fstype string, flags uintptr, data string) error {
	s, err := cstr(source)
	if err != nil {
		return err
	}
	t, err := cstr(target)
	if err != nil {
		return err
	}
	f, err := cstr(fstype)
	if err != nil {
		return err
	}
	var d []byte
	if data != "" {
		if d, err = cstr(data); err != nil {
			return err
		}
	}
	_, e := Syscall6(SysMount, Ptr(s), Ptr(t), Ptr(f), flags, Ptr(d), 0)
	runtime.KeepAlive(s)
	runtime.KeepAlive(t)
	runtime.KeepAlive(f)
	runtime.KeepAlive(d)
	return errOf(e)
}

// Umount unmounts target.
func Umount(target string, flags int) error {
	_, err := pathCall(SysUmount2, target, nil, uintptr(flags))
	return err
}

// Stat returns the LKL stat of path, following symlinks unless nofollow.
func Stat(path string, nofollow bool) (Stat64, error) {
	var st Stat64
	flags := uintptr(0)
	if nofollow {
		flags = unix.AT_SYMLINK_NOFOLLOW
	}
	_, err := pathCall(SysNewfstatat, path, []uintptr{uintptr(AtFdcwd & 0xffffffff)}, PtrOf(&st), flags)
	return st, err
}

// Fstat returns the LKL stat of fd. LKL writes a pooled buffer (heap
// memory, as a cgo call's pointer must be), copied out: a call allocates
// nothing (an LKL open is followed by one).
func Fstat(fd int) (Stat64, error) {
	b := statBufs.Get().(*Stat64)
	defer statBufs.Put(b)
	_, e := Syscall6(SysFstat, uintptr(fd), PtrOf(b), 0, 0, 0, 0)
	return *b, errOf(e)
}

var statBufs = sync.Pool{New: func() any { return new(Stat64) }}

// CoarseNow returns the kernel's CLOCK_REALTIME_COARSE: the clock its
// inodes' times are taken from (current_time).
func CoarseNow() (unix.Timespec, error) {
	var ts unix.Timespec
	_, e := Syscall6(SysClockGettime, unix.CLOCK_REALTIME_COARSE, PtrOf(&ts), 0, 0, 0, 0)
	return ts, errOf(e)
}

// Uname returns the kernel's utsname (the layout is the same on every arch).
func Uname() (unix.Utsname, error) {
	var u unix.Utsname
	_, e := Syscall6(SysUname, PtrOf(&u), 0, 0, 0, 0, 0)
	return u, errOf(e)
}

// ReadFile reads a whole file from the kernel's filesystem.
func ReadFile(path string) ([]byte, error) { return ReadFileAt(unix.AT_FDCWD, path) }

// ReadFileAt reads a whole file, path resolved relative to the kernel fd
// dirfd. It reads into the slice it returns, from 512 bytes up, doubled
// when full: most files read so are a few bytes of sysfs or proc (at
// start-up, the loop devices' numbers), and a 16 KB buffer each was fresh
// memory to fault in.
func ReadFileAt(dirfd int, path string) ([]byte, error) {
	fd, err := Openat(dirfd, path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer Close(fd)
	out := make([]byte, 0, 512)
	for {
		if len(out) == cap(out) {
			out = slices.Grow(out, cap(out))
		}
		n, err := Read(fd, out[len(out):cap(out)])
		if err != nil {
			return out, err
		}
		if n == 0 {
			return out, nil
		}
		out = out[:len(out)+n]
	}
}

// WriteFile creates or truncates path and writes data.
func WriteFile(path string, data []byte, mode uint32) error {
	fd, err := Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	for len(data) > 0 {
		n, err := Write(fd, data)
		if err != nil {
			Close(fd)
			return err
		}
		data = data[n:]
	}
	return Close(fd)
}

// ReadDir lists the names in a directory (without . and ..).
func ReadDir(path string) ([]string, error) { return ReadDirAt(unix.AT_FDCWD, path) }

// ReadDirAt is ReadDir with path resolved relative to the kernel fd dirfd.
func ReadDirAt(dirfd int, path string) ([]string, error) {
	fd, err := Openat(dirfd, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer Close(fd)
	var names []string
	buf := make([]byte, 8<<10)
	for {
		r, e := Syscall6(SysGetdents64, uintptr(fd), Ptr(buf), uintptr(len(buf)), 0, 0, 0)
		if e != 0 {
			return names, e
		}
		if r == 0 {
			return names, nil
		}
		err := WalkDirents(buf[:r], func(d Dirent) bool {
			if d.Name != "." && d.Name != ".." {
				names = append(names, d.Name)
			}
			return true
		})
		if err != nil {
			return names, fmt.Errorf("lkl: getdents64 %s: %w", path, err)
		}
	}
}
