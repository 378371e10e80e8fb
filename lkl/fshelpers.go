package lkl

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Typed helpers for building a filesystem through the kernel (package
// rootfs applies image layers with them). Each works on a path relative
// to the kernel's cwd and root, without following a final symlink.

const atCwd = uintptr(AtFdcwd & 0xffffffff)

// Link makes newpath a hard link to oldpath (not following a symlink).
func Link(oldpath, newpath string) error {
	o, err := cstr(oldpath)
	if err != nil {
		return err
	}
	n, err := cstr(newpath)
	if err != nil {
		return err
	}
	_, e := Syscall6(SysLinkat, atCwd, Ptr(o), atCwd, Ptr(n), 0, 0)
	runtime.KeepAlive(o)
	runtime.KeepAlive(n)
	return errOf(e)
}

// Lchown sets path's owner and group.
func Lchown(path string, uid, gid uint32) error {
	_, err := pathCall(SysFchownat, path, []uintptr{atCwd}, uintptr(uid), uintptr(gid), unix.AT_SYMLINK_NOFOLLOW)
	return err
}

// Chmod sets path's mode bits (path is not a symlink).
func Chmod(path string, mode uint32) error {
	_, err := pathCall(SysFchmodat, path, []uintptr{atCwd}, uintptr(mode))
	return err
}

// Lutimes sets path's access and modification times.
func Lutimes(path string, atime, mtime unix.Timespec) error {
	ts := &[2]unix.Timespec{atime, mtime}
	_, err := pathCall(SysUtimensat, path, []uintptr{atCwd}, PtrOf(ts), unix.AT_SYMLINK_NOFOLLOW)
	runtime.KeepAlive(ts)
	return err
}

// Lsetxattr sets an extended attribute of path.
func Lsetxattr(path, name string, value []byte) error {
	n, err := cstr(name)
	if err != nil {
		return err
	}
	// An empty value is passed as NULL with size 0, which Linux takes.
	_, err = pathCall(SysSetxattr+1, path, nil, Ptr(n), Ptr(value), uintptr(len(value)), 0)
	runtime.KeepAlive(n)
	runtime.KeepAlive(value)
	return err
}

// Umask sets the kernel's file mode creation mask and returns the old one.
func Umask(mask uint32) uint32 {
	r, _ := Syscall6(SysUmask, uintptr(mask), 0, 0, 0, 0, 0)
	return uint32(r)
}
