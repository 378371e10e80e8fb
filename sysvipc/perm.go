package sysvipc

import (
	"encoding/binary"
	"slices"

	"golang.org/x/sys/unix"
)

// Kind is a kind of object.
type Kind int

// The kinds of object.
const (
	Msg Kind = iota
	Sem
	Shm
	kinds
)

// Linux's System V IPC constants (linux/ipc.h, msg.h, sem.h, shm.h); the
// exported ones are those the handlers test.
const (
	ipcCreat   = 0o1000
	ipcExcl    = 0o2000
	IPCNowait  = 0o4000
	ipcRmid    = 0
	IPCSet     = 1
	ipcStat    = 2
	ipcInfo    = 3
	msgStat    = 11
	msgStatAny = 13
	semStat    = 18
	semStatAny = 20
	shmStat    = 13
	shmStatAny = 15
	shmLock    = 11
	shmUnlock  = 12
	semGetPid  = 11
	semGetVal  = 12
	semGetAll  = 13
	semGetNcnt = 14
	semGetZcnt = 15
	semSetVal  = 16
	semSetAll  = 17
	semVMX     = 32767
	MsgCopy    = 0o40000
	MsgExcept  = 0o20000
	shmRdonly  = 0o10000
	ShmRnd     = 0o20000
	shmExec    = 0o100000
	shmHugetlb = 0o4000

	capDacOverride   = 1
	capDacReadSearch = 2
	capFowner        = 3
	capIPCLock       = 14
	capIPCOwner      = 15
	capSysAdmin      = 21
	capSysResource   = 24

	// noID is the -1 that IPC_SET refuses as an owner or group.
	noID = ^uint32(0)
)

// Who is the caller's credentials as the rules here need them.
type Who struct {
	EUID, EGID, FSUID, FSGID uint32
	Groups                   []uint32 // the supplementary groups
	Caps                     uint64   // the effective capabilities (bit N is capability N)
}

func (w *Who) has(capability int) bool { return w.Caps&(1<<capability) != 0 }

// Obj is the guest's view of one object's ipc_perm.
type Obj struct {
	UID, GID, CUID, CGID, Mode uint32
	Cpid                       int32 // the creator's pid (shm_cpid)
	Nsems                      int32 // a semaphore set's size
}

// InGroup is the kernel's in_group_p: the fsgid or a supplementary group.
func InGroup(w *Who, gid uint32) bool {
	return w.FSGID == gid || slices.Contains(w.Groups, gid)
}

// Allowed is Linux's ipcperms: flag's rwx bits (in any of the three
// places) against the owner's, the group's or the others' bits of the
// object, CAP_IPC_OWNER passing all.
func Allowed(w *Who, o *Obj, flag uint32) bool {
	want := (flag>>6 | flag>>3 | flag) & 7
	granted := o.Mode
	switch {
	case w.EUID == o.UID || w.EUID == o.CUID:
		granted >>= 6
	case InGroup(w, o.CGID) || InGroup(w, o.GID):
		granted >>= 3
	}
	return want&^granted&7 == 0 || w.has(capIPCOwner)
}

// Owner is ipcctl_obtain_check's rule for IPC_SET and IPC_RMID: the
// owner, the creator or CAP_SYS_ADMIN.
func Owner(w *Who, o *Obj) bool {
	return w.EUID == o.UID || w.EUID == o.CUID || w.has(capSysAdmin)
}

// ShmatWant is the access shmat's flags ask for: read, write unless
// SHM_RDONLY, and execute with SHM_EXEC.
func ShmatWant(flg uint64) uint32 {
	want := uint32(0o666)
	if flg&shmRdonly != 0 {
		want = 0o444
	}
	if flg&shmExec != 0 {
		want |= 0o111
	}
	return want
}

// Sembufs reads semop's operations (struct sembuf: u16 num, i16 op, i16
// flg, 6 bytes each): the highest semaphore number, and whether an
// operation changes a value (then semop needs write permission, else
// read).
func Sembufs(ops []byte) (most uint16, alter bool) {
	for i := 0; i+6 <= len(ops); i += 6 {
		most = max(most, binary.NativeEndian.Uint16(ops[i:]))
		alter = alter || binary.NativeEndian.Uint16(ops[i+2:]) != 0
	}
	return most, alter
}

// IsStat says that cmd reads an object's ipc_perm: IPC_STAT or one of
// kind's *_STAT commands (State.Stat serves them).
func IsStat(kind Kind, cmd int32) bool {
	stat, _, _ := statCmd(kind, cmd)
	return stat
}

// statCmd says that cmd reads an object's ipc_perm (IPC_STAT or one of
// kind's *_STAT commands, which take an index), and whether it checks
// read permission (not *_STAT_ANY).
func statCmd(kind Kind, cmd int32) (stat, byIndex, check bool) {
	switch {
	case cmd == ipcStat:
		return true, false, true
	case kind == Msg && (cmd == msgStat || cmd == msgStatAny):
		return true, true, cmd == msgStat
	case kind == Sem && (cmd == semStat || cmd == semStatAny):
		return true, true, cmd == semStat
	case kind == Shm && (cmd == shmStat || cmd == shmStatAny):
		return true, true, cmd == shmStat
	}
	return false, false, false
}

// ctlCheck is the check of a ctl command that then runs natively
// (IPC_RMID, SHM_LOCK, SHM_UNLOCK, semctl's value commands): 0 lets it
// run; others pass unchecked (semnum and arg are semctl's).
func ctlCheck(w *Who, o *Obj, kind Kind, semnum, cmd int32, arg uint64) unix.Errno {
	switch {
	case cmd == ipcRmid:
		if !Owner(w, o) {
			return unix.EPERM
		}
	case kind == Shm && (cmd == shmLock || cmd == shmUnlock):
		if !w.has(capIPCLock) && w.EUID != o.UID && w.EUID != o.CUID {
			return unix.EPERM
		}
	case kind == Sem && (cmd == semGetVal || cmd == semGetPid || cmd == semGetNcnt || cmd == semGetZcnt || cmd == semGetAll):
		if !Allowed(w, o, 0o444) {
			return unix.EACCES
		}
	case kind == Sem && cmd == semSetAll:
		if !Allowed(w, o, 0o222) {
			return unix.EACCES
		}
	case kind == Sem && cmd == semSetVal:
		// Linux: ERANGE for the value, EINVAL for the number, then EACCES.
		if v := int32(arg); v >= 0 && v <= semVMX && semnum >= 0 && semnum < o.Nsems && !Allowed(w, o, 0o222) {
			return unix.EACCES
		}
	}
	return 0
}
