//go:build linux && amd64 && cgo

package trap

import (
	"encoding/binary"

	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// Fds received with SCM_RIGHTS. A native recvmsg or recvmmsg of the guest
// gets them from the kernel at the lowest free numbers, which are kbox's
// (every free number of the guest's range holds a placeholder): each is
// moved into the guest's range, and its number in the guest's control
// buffer written again. One that finds the guest's range full is closed,
// its number becomes -1 and the message is marked MSG_CTRUNC (Linux
// installs what it can and marks the message so).

// maxRights bounds the control data looked at in one message: what
// SCM_RIGHTS can carry (SCM_MAX_FD, 253 fds) with room for other messages.
const maxRights = 4096

// recvRights moves the fds of the msghdr at addr, just filled by a native
// call.
func recvRights(addr uint64) {
	var mh [sysabi.MsghdrSize]byte
	if readMem(addr, mh[:]) != nil {
		return
	}
	le := binary.NativeEndian
	ctl, ctllen := le.Uint64(mh[32:]), le.Uint64(mh[40:])
	if ctl == 0 || ctllen < unix.SizeofCmsghdr {
		return
	}
	buf := make([]byte, min(ctllen, maxRights))
	if readMem(ctl, buf) != nil {
		return
	}
	moved, truncated := moveRights(buf)
	if moved {
		writeMem(&tr.mem, ctl, buf)
	}
	if truncated {
		le.PutUint32(mh[48:], le.Uint32(mh[48:])|unix.MSG_CTRUNC)
		writeMem(&tr.mem, addr+48, mh[48:52])
	}
}

// moveRights moves the fds of the SCM_RIGHTS messages in control data
// buf into the guest's range, in place. It reports whether it found any,
// and whether it closed any (the guest's range was full: their numbers
// become -1).
func moveRights(buf []byte) (moved, truncated bool) {
	le := binary.NativeEndian
	for off := 0; off+unix.SizeofCmsghdr <= len(buf); {
		l := int(le.Uint64(buf[off:]))
		if l < unix.SizeofCmsghdr || off+l > len(buf) {
			break
		}
		if int32(le.Uint32(buf[off+8:])) == unix.SOL_SOCKET && int32(le.Uint32(buf[off+12:])) == unix.SCM_RIGHTS {
			for p := off + unix.SizeofCmsghdr; p+4 <= off+l; p += 4 {
				fd := int(int32(le.Uint32(buf[p:])))
				if fd < tr.fds.g {
					continue
				}
				moved = true
				nfd, err := tr.fds.move(fd) // closes fd
				if err != nil {
					truncated = true
					nfd = -1
				}
				le.PutUint32(buf[p:], uint32(int32(nfd)))
			}
		}
		off += (l + 7) &^ 7
	}
	return moved, truncated
}
