package unixsock

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// opIPC runs a System V IPC call in the guest's IPC namespace, opSysctl
// reads or writes one of its /proc/sys/kernel files (binder.c).
const (
	opIPC    = 4
	opSysctl = 5
)

// IPCCall names the calls IPC runs.
type IPCCall uint32

// The calls of IPC; the binder runs the *ctl ones only for IPC_STAT,
// IPC_SET, IPC_RMID and the *_INFO and *_STAT commands.
const (
	IPCMsgget IPCCall = iota + 1
	IPCSemget
	IPCShmget
	IPCMsgctl
	IPCSemctl
	IPCShmctl
)

// IPCBufMax is the largest buffer IPC carries.
const IPCBufMax = 512

// IPC runs call with arguments a in the guest's IPC namespace, with the
// binder's credentials (the IPC namespace's owner: kbox checks the guest's
// before). Argument bufarg (1 to 3; 0 for none) is replaced by a pointer
// to a copy of buf, which is copied back after the call. It returns the
// call's result, or its errno.
func (b *Binder) IPC(call IPCCall, a [3]int64, bufarg int, buf []byte) (int64, error) {
	if b == nil {
		return -1, unix.ENOSYS
	}
	if len(buf) > IPCBufMax {
		return -1, unix.EINVAL
	}
	payload := make([]byte, 32, 32+len(buf))
	binary.NativeEndian.PutUint32(payload[0:], uint32(call))
	binary.NativeEndian.PutUint32(payload[4:], uint32(bufarg))
	for i, v := range a {
		binary.NativeEndian.PutUint64(payload[8+8*i:], uint64(v))
	}
	payload = append(payload, buf...)
	ans, err := b.callLong(opIPC, payload, "")
	if err != nil || len(ans) != 16+len(buf) {
		return -1, unix.EIO
	}
	copy(buf, ans[16:])
	if en := binary.NativeEndian.Uint32(ans[0:]); en != 0 {
		return -1, unix.Errno(en)
	}
	return int64(binary.NativeEndian.Uint64(ans[8:])), nil
}

// Sysctl reads the guest's IPC namespace's /proc/sys/kernel/NAME (msgmax,
// shmmax, sem and the others of System V IPC), or writes data to it.
func (b *Binder) Sysctl(name string, data []byte) ([]byte, error) {
	if b == nil {
		return nil, unix.ENOENT
	}
	if len(data) > 4096 || len(name) > 108 {
		return nil, unix.EINVAL
	}
	ans, err := b.callLong(opSysctl, data, name)
	if err != nil || len(ans) < 16 {
		return nil, unix.EIO
	}
	if en := binary.NativeEndian.Uint32(ans[0:]); en != 0 {
		return nil, unix.Errno(en)
	}
	return ans[16:], nil
}

// callLong sends a request with payload in place of the directory and
// returns the binder's long answer: an errno, 4 bytes of padding, an i64
// and data.
func (b *Binder) callLong(op uint32, payload []byte, name string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.helloLocked() != nil {
		return nil, unix.EIO
	}
	msg := make([]byte, 16, 16+len(payload)+len(name))
	binary.NativeEndian.PutUint32(msg[0:], op)
	binary.NativeEndian.PutUint32(msg[8:], uint32(len(payload)))
	binary.NativeEndian.PutUint32(msg[12:], uint32(len(name)))
	msg = append(append(msg, payload...), name...)
	if err := unix.Sendmsg(b.fd, msg, nil, nil, 0); err != nil {
		return nil, unix.EIO
	}
	ans := make([]byte, 16+IPCBufMax)
	for {
		n, _, _, _, err := unix.Recvmsg(b.fd, ans, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, unix.EIO
		}
		return ans[:n], nil
	}
}
