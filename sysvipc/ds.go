package sysvipc

import (
	"encoding/binary"
	"runtime"
)

// The *id64_ds layouts of the 64-bit ABIs: the ipc64_perm at 0 (uid,
// gid, cuid, cgid, mode at 4 to 20), a queue's msg_qbytes at 88, a
// segment's shm_cpid at 80, alike on amd64 and arm64; semid64_ds has two
// padding words more on amd64 (104 bytes) than asm-generic's (88).
var dsSize = [kinds]int{Msg: 120, Sem: semidDSSize(), Shm: 112}

func semidDSSize() int {
	if runtime.GOARCH == "amd64" {
		return 104
	}
	return 88
}

// DSSize is the size of kind's *id64_ds, the buffer of its ctl calls.
func DSSize(kind Kind) int { return dsSize[kind] }

const (
	permUID     = 4
	permGID     = 8
	permCUID    = 12
	permCGID    = 16
	permMode    = 20
	msgQbytesAt = 88
	shmCpidAt   = 80
)

// showIn puts the guest's view of the object into ds, a *id64_ds.
func (o *Obj) showIn(kind Kind, ds []byte) {
	ne := binary.NativeEndian
	ne.PutUint32(ds[permUID:], o.UID)
	ne.PutUint32(ds[permGID:], o.GID)
	ne.PutUint32(ds[permCUID:], o.CUID)
	ne.PutUint32(ds[permCGID:], o.CGID)
	ne.PutUint32(ds[permMode:], ne.Uint32(ds[permMode:])&^0o777|o.Mode)
	if kind == Shm {
		ne.PutUint32(ds[shmCpidAt:], uint32(o.Cpid))
	}
}

// setIn reads IPC_SET's new owner, group and mode bits from in.
func setIn(in []byte) (uid, gid, mode uint32) {
	ne := binary.NativeEndian
	return ne.Uint32(in[permUID:]), ne.Uint32(in[permGID:]), ne.Uint32(in[permMode:]) & 0o777
}

// keepHost makes in, an IPC_SET buffer, keep the object's host owner and
// group (from cur, its IPC_STAT) and rwx owner bits beside the guest's
// mode.
func keepHost(in, cur []byte, mode uint32) {
	copy(in[permUID:permMode], cur[permUID:permMode])
	binary.NativeEndian.PutUint32(in[permMode:], mode|0o700)
}

// msgQbytes is a msqid64_ds's msg_qbytes.
func msgQbytes(ds []byte) uint64 { return binary.NativeEndian.Uint64(ds[msgQbytesAt:]) }
