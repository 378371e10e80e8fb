package unixsock

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// The binder's POSIX message queue requests (binder.c): a queue is the
// IPC namespace's, and the binder shares the guest's.
const (
	opMqOpen   = 7
	opMqUnlink = 8
)

// maxDir is binder.c's MAX_DIR, the longest name a request carries.
const maxDir = 4096

// MqAttrSize is the size of the kernel's struct mq_attr (eight longs).
const MqAttrSize = 64

// MqOpen opens the guest's message queue name (mq_open's name, without
// glibc's leading slash) in the guest's IPC namespace with oflag's access
// mode and O_NONBLOCK, making it (host mode 0600) when oflag has O_CREAT
// and it does not exist, with attr (a struct mq_attr, or nil) then. It
// returns a close-on-exec fd of the queue and whether the call made it;
// an error is the kernel's errno (EEXIST for O_CREAT|O_EXCL on a queue
// that exists).
func (b *Binder) MqOpen(name string, oflag uint32, attr []byte) (fd int, made bool, err error) {
	if b == nil {
		return -1, false, unix.ENOSYS
	}
	if len(name) > maxDir {
		return -1, false, unix.ENAMETOOLONG
	}
	req := make([]byte, 8+MqAttrSize)
	binary.NativeEndian.PutUint32(req[0:], oflag)
	if len(attr) == MqAttrSize {
		binary.NativeEndian.PutUint32(req[4:], 1)
		copy(req[8:], attr)
	}
	v, fd, err := b.callRaw(opMqOpen, 0, name, string(req))
	switch {
	case err != nil:
		return -1, false, err
	case v > 0:
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, false, unix.Errno(v)
	case fd < 0:
		return -1, false, unix.EIO
	}
	return fd, v == -1, nil
}

// MqUnlink removes the guest's message queue name in its IPC namespace.
func (b *Binder) MqUnlink(name string) error {
	if b == nil {
		return unix.ENOSYS
	}
	if len(name) > maxDir {
		return unix.ENAMETOOLONG
	}
	fd, err := b.call(opMqUnlink, 0, name, "")
	if fd >= 0 {
		unix.Close(fd)
	}
	return err
}
