package loopdev

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Device numbers of the loop driver.
const (
	Major         = 7   // the loop block devices' major
	devLoopCtlMin = 237 // misc minor of /dev/loop-control
)

var devLoopControl = unix.Mkdev(10, devLoopCtlMin)

// Device reports a device of LKL's that a guest may open: the loop
// driver's control device and its block devices.
func Device(mode uint32, rdev uint64) bool {
	switch mode & unix.S_IFMT {
	case unix.S_IFCHR:
		return rdev == devLoopControl
	case unix.S_IFBLK:
		return unix.Major(rdev) == Major
	}
	return false
}

// Loop ioctl commands (linux/loop.h).
const (
	SetFd           = 0x4C00
	ClrFd           = 0x4C01
	setStatus       = 0x4C02
	GetStatus       = 0x4C03
	setStatus64     = 0x4C04
	GetStatus64     = 0x4C05
	ChangeFd        = 0x4C06
	loopSetCapacity = 0x4C07
	loopSetDirectIO = 0x4C08
	loopSetBlkSize  = 0x4C09
	Configure       = 0x4C0A
	CtlAdd          = 0x4C80
	CtlRemove       = 0x4C81
	CtlGetFree      = 0x4C82
)

// Sizes of what the commands point to (the same for the guest's
// architectures and LKL's).
const (
	sizeInfo64     = 232 // struct loop_info64
	sizeLoopConfig = 304 // struct loop_config: fd, block_size, loop_info64, reserved
)

// Cmd is what kbox knows of one ioctl command on an LKL device.
type Cmd struct {
	In, Out int  // bytes the argument points to, copied in before / out after
	Fd      bool // the argument is a guest fd, translated to an LKL fd
	Old     bool // the guest's struct loop_info, served as loop_info64 (FromOld, ToOld)
	Ctl     bool // a command of loop-control, not of the loop devices
}

// cmds are the ioctls served on LKL's devices: the loop commands and the
// generic block commands (linux/fs.h) that losetup, mkfs, fsck and mount
// use. A scalar argument goes to LKL as it is; a pointed-to structure is
// copied from and to guest memory (EFAULT when it cannot be). Commands
// whose structures point further (BLKPG, BLKTRACESETUP) are not served:
// they get what the driver answers a command it does not know (EINVAL on a
// loop device, ENOSYS on loop-control), as does every command not listed,
// and each command on the other kind of device.
var cmds = map[uint32]Cmd{
	SetFd: {Fd: true}, ChangeFd: {Fd: true}, ClrFd: {},
	setStatus64: {In: sizeInfo64}, GetStatus64: {Out: sizeInfo64},
	setStatus: {In: oldLoopInfo.size, Old: true}, GetStatus: {Out: sizeInfo64, Old: true},
	loopSetCapacity: {}, loopSetDirectIO: {}, loopSetBlkSize: {},
	Configure: {In: sizeLoopConfig},
	CtlAdd:    {Ctl: true}, CtlRemove: {Ctl: true}, CtlGetFree: {Ctl: true},

	unix.BLKROSET: {In: 4}, unix.BLKROGET: {Out: 4}, unix.BLKRRPART: {},
	unix.BLKGETSIZE: {Out: 8}, unix.BLKFLSBUF: {}, unix.BLKRASET: {}, unix.BLKRAGET: {Out: 8},
	unix.BLKFRASET: {}, unix.BLKFRAGET: {Out: 8}, unix.BLKSECTGET: {Out: 2},
	unix.BLKSSZGET: {Out: 4}, unix.BLKBSZGET: {Out: 4}, unix.BLKBSZSET: {In: 4},
	unix.BLKGETSIZE64: {Out: 8}, unix.BLKDISCARD: {In: 16}, unix.BLKSECDISCARD: {In: 16},
	unix.BLKZEROOUT: {In: 16}, unix.BLKIOMIN: {Out: 4}, unix.BLKIOOPT: {Out: 4},
	unix.BLKALIGNOFF: {Out: 4}, unix.BLKPBSZGET: {Out: 4}, unix.BLKDISCARDZEROES: {Out: 4},
	unix.BLKROTATIONAL: {Out: 2}, blkGetDiskSeq: {Out: 8},
}

// blkGetDiskSeq is BLKGETDISKSEQ, _IOR(0x12, 128, __u64).
const blkGetDiskSeq = 0x80081280

// Lookup returns what kbox knows of ioctl command cmd on a loop device
// (ctl false) or on loop-control (ctl true), or the errno the driver
// answers a command it does not know there: ENOSYS on loop-control,
// EINVAL on a loop device.
func Lookup(cmd uint32, ctl bool) (Cmd, unix.Errno) {
	c, known := cmds[cmd]
	switch {
	case known && c.Ctl == ctl:
		return c, 0
	case ctl:
		return Cmd{}, unix.ENOSYS
	}
	return Cmd{}, unix.EINVAL
}

// LKLCmd is the command LKL gets for the guest's cmd: the old
// LOOP_SET_STATUS and LOOP_GET_STATUS become their 64-bit forms.
func LKLCmd(cmd uint32) uint32 {
	switch cmd {
	case setStatus:
		return setStatus64
	case GetStatus:
		return GetStatus64
	}
	return cmd
}

// ConfigFd returns the guest fd in a struct loop_config (LOOP_CONFIGURE's
// argument, its first field).
func ConfigFd(cfg []byte) int32 {
	return int32(uint32(cfg[0]) | uint32(cfg[1])<<8 | uint32(cfg[2])<<16 | uint32(cfg[3])<<24)
}

// SetConfigFd puts fd (LKL's) in a struct loop_config in place of the
// guest's.
func SetConfigFd(cfg []byte, fd int) {
	cfg[0], cfg[1], cfg[2], cfg[3] = byte(fd), byte(fd>>8), byte(fd>>16), byte(fd>>24)
}

// Binds reports a command that gives a loop device a backing file.
func Binds(cmd uint32) bool {
	return cmd == SetFd || cmd == Configure || cmd == ChangeFd
}

// Node returns the path and number of the guest's /dev/loopN for loop
// device n (as devtmpfs names it); ok is false for a number out of the
// driver's range.
func Node(n int) (path string, rdev uint64, ok bool) {
	if n < 0 || n >= 1<<20 {
		return "", 0, false
	}
	return "/dev/loop" + strconv.Itoa(n), unix.Mkdev(Major, uint32(n)), true
}

// MaySourceDevice reports a mount(2) source that may name a block device:
// a path, on a mount that is not a bind, a move or a remount (whose
// source is no device). Any other source (a filesystem's name, "none")
// goes to LKL as it is.
func MaySourceDevice(src string, flags uintptr) bool {
	return src != "" && strings.ContainsRune(src, '/') && flags&(unix.MS_BIND|unix.MS_MOVE|unix.MS_REMOUNT) == 0
}
