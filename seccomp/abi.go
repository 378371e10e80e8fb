//go:build linux

// Package seccomp installs seccomp filters with user notification and talks
// to the resulting listener file descriptor. It is the lowest layer of the
// kbox supervisor: the filter decides in BPF which guest syscalls run
// natively, which are refused outright and which are forwarded to the
// supervisor; the Listener carries the forwarded ones.
//
// See DESIGN.md in this directory for the policy layout and fd-number scheme.
package seccomp

import "golang.org/x/sys/unix"

// SeccompData mirrors struct seccomp_data: the input the BPF program sees.
type SeccompData struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

// Notif mirrors struct seccomp_notif, filled by SECCOMP_IOCTL_NOTIF_RECV.
type Notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  SeccompData
}

// NotifResp mirrors struct seccomp_notif_resp, passed to
// SECCOMP_IOCTL_NOTIF_SEND. For a successful return Error is 0 and Val is
// the syscall result; for a failure Error is a negative errno.
type NotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// NotifAddfd mirrors struct seccomp_notif_addfd, passed to
// SECCOMP_IOCTL_NOTIF_ADDFD to install a supervisor fd into the target.
type NotifAddfd struct {
	ID         uint64
	Flags      uint32
	Srcfd      uint32
	Newfd      uint32
	NewfdFlags uint32
}

// NotifSizes mirrors struct seccomp_notif_sizes, the kernel's answer to
// SECCOMP_GET_NOTIF_SIZES.
type NotifSizes struct {
	Notif     uint16
	NotifResp uint16
	Data      uint16
}

// Sizes of the ABI structs as the kernel defines them (checked by tests).
const (
	SizeofSeccompData = 64
	SizeofNotif       = 80
	SizeofNotifResp   = 24
	SizeofNotifAddfd  = 24
)

// Offsets inside struct seccomp_data used by the BPF program. Argument words
// are 64-bit; on the little-endian targets we support the low 32 bits of
// args[i] live at ArgOffset(i).
const (
	offNr   = 0
	offArch = 4
	offIP   = 8
	offArgs = 16
)

// ArgLowOffset returns the seccomp_data offset of the low 32 bits of args[i]
// on a little-endian machine.
func ArgLowOffset(i int) uint32 { return offArgs + 8*uint32(i) }

// Filter return values (re-exported from x/sys/unix for readability). Every
// SECCOMP_* constant this package needs exists in golang.org/x/sys/unix
// v0.49.0, so none are redefined here except the convenience aliases below.
const (
	RetKillProcess = unix.SECCOMP_RET_KILL_PROCESS
	RetErrno       = unix.SECCOMP_RET_ERRNO
	RetUserNotif   = unix.SECCOMP_RET_USER_NOTIF
	RetAllow       = unix.SECCOMP_RET_ALLOW
	RetActionFull  = unix.SECCOMP_RET_ACTION_FULL
	RetData        = unix.SECCOMP_RET_DATA

	// FlagContinue in NotifResp.Flags asks the kernel to run the syscall
	// natively (SECCOMP_USER_NOTIF_FLAG_CONTINUE).
	FlagContinue = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE

	// DefaultInstallFlags are the flags Install tries first.
	DefaultInstallFlags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
)
