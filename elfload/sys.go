package elfload

import (
	"errors"
	"io"

	"golang.org/x/sys/unix"
)

// The memory syscalls, raw: the loader works on addresses it chose, never
// on Go slices (unix.Mmap keeps its own table of mappings made through it).

func mmap(addr, length uintptr, prot, flags, fd int, off uint64) (uintptr, error) {
	r, _, e := unix.Syscall6(unix.SYS_MMAP, addr, length, uintptr(prot), uintptr(flags), uintptr(fd), uintptr(off))
	if e != 0 {
		return 0, e
	}
	return r, nil
}

func munmap(addr, length uintptr) error {
	if _, _, e := unix.Syscall(unix.SYS_MUNMAP, addr, length, 0); e != 0 {
		return e
	}
	return nil
}

func mprotect(addr, length uintptr, prot int) error {
	if _, _, e := unix.Syscall(unix.SYS_MPROTECT, addr, length, uintptr(prot)); e != 0 {
		return e
	}
	return nil
}

// Flags of the loader's anonymous reservations: address space only, no
// memory committed until a part is made accessible.
const reserveFlags = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_NORESERVE

// fdReader reads a file by pread, leaving its offset alone (the fd may be
// shared with other loads).
type fdReader int

func (f fdReader) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Pread(int(f), b[n:], off+int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.ErrUnexpectedEOF
		}
		n += m
	}
	return n, nil
}

// bytesReader reads a []byte; a read past its end is an error.
type bytesReader []byte

func (b bytesReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}

// newMemfd makes a memfd of size bytes named name (for /proc/PID/maps).
func newMemfd(name string, size int64) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, err
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// pwriteAll writes b at off.
func pwriteAll(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}
