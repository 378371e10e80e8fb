//go:build lkl

package tests

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// floorDial makes an LKL TCP socket with TCP_NODELAY (as inet's) and
// connects it to dst:port.
func floorDial(dst [4]byte, port int) (int, error) {
	fd, e := lkl.Syscall6(lkl.SysSocket, unix.AF_INET, unix.SOCK_STREAM, 0, 0, 0, 0)
	if e != 0 {
		return -1, fmt.Errorf("socket: %v", e)
	}
	one := new(int32)
	*one = 1
	lkl.Syscall6(lkl.SysSetsockopt, fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, uintptr(unsafe.Pointer(one)), 4, 0)
	runtime.KeepAlive(one)
	sa := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst}
	sa.Port = uint16(port>>8) | uint16(port&0xff)<<8
	_, e = lkl.Syscall6(lkl.SysConnect, fd, uintptr(unsafe.Pointer(sa)), unix.SizeofSockaddrInet4, 0, 0, 0)
	runtime.KeepAlive(sa)
	if e != 0 {
		lkl.Close(int(fd))
		return -1, fmt.Errorf("connect: %v", e)
	}
	return int(fd), nil
}
