package sysvipc

import (
	"testing"

	"golang.org/x/sys/unix"
)

// user is a caller with uid and gid in every slot, the given
// supplementary groups and no capabilities.
func user(uid, gid uint32, groups ...uint32) Who {
	return Who{EUID: uid, EGID: gid, FSUID: uid, FSGID: gid, Groups: groups}
}

// TestAllowed: Linux's ipcperms for the owner, the creator, a member of
// the group (fsgid or supplementary, of the owner's or the creator's
// group), others, and CAP_IPC_OWNER, against each class's mode bits.
func TestAllowed(t *testing.T) {
	obj := Obj{UID: 10, GID: 20, CUID: 0, CGID: 0, Mode: 0o640}
	cases := []struct {
		name string
		w    Who
		o    Obj
		flag uint32
		want bool
	}{
		{"owner reads", user(10, 99), obj, 0o444, true},
		{"owner writes", user(10, 99), obj, 0o222, true},
		{"owner cannot execute", user(10, 99), obj, 0o111, false},
		{"owner with group bits only", user(10, 20), obj, 0o111, false},
		{"owner's bits win over the group's", user(10, 20), Obj{UID: 10, GID: 20, Mode: 0o060}, 0o444, false},
		{"creator uses the owner's bits", Who{EUID: 0, FSGID: 5}, obj, 0o222, true},
		{"group reads", user(30, 20), obj, 0o444, true},
		{"group cannot write", user(30, 20), obj, 0o222, false},
		{"creator's group reads", user(30, 0), obj, 0o444, true},
		{"group by fsgid, not egid", Who{EUID: 30, EGID: 20, FSGID: 31}, obj, 0o444, false},
		{"supplementary group reads", user(30, 31, 20), obj, 0o444, true},
		{"group's bits win over others'", user(30, 20), Obj{UID: 10, GID: 20, CUID: 10, CGID: 20, Mode: 0o604}, 0o444, false},
		{"others cannot read", user(30, 31), obj, 0o444, false},
		{"others read with o+r", user(30, 31), Obj{UID: 10, GID: 20, Mode: 0o604}, 0o444, true},
		{"others cannot write with o+r", user(30, 31), Obj{UID: 10, GID: 20, Mode: 0o604}, 0o222, false},
		{"others ask nothing", user(30, 31), obj, 0, true},
		{"flag bits count in any place", user(30, 31), Obj{Mode: 0o004}, 0o400, true},
		{"read and write asks both", user(10, 99), Obj{UID: 10, Mode: 0o400}, 0o666, false},
		{"get's flags count their mode bits only", user(30, 31), obj, ipcCreat | 0o600, false},
		{"CAP_IPC_OWNER passes", Who{EUID: 30, Caps: 1 << capIPCOwner}, obj, 0o666, true},
		{"CAP_SYS_ADMIN does not", Who{EUID: 30, FSGID: 31, Caps: 1 << capSysAdmin}, obj, 0o444, false},
	}
	for _, c := range cases {
		if got := Allowed(&c.w, &c.o, c.flag); got != c.want {
			t.Errorf("%s: Allowed = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestOwner: IPC_SET and IPC_RMID's rule: the owner, the creator or
// CAP_SYS_ADMIN; not the group, not CAP_IPC_OWNER.
func TestOwner(t *testing.T) {
	obj := Obj{UID: 10, GID: 20, CUID: 11, CGID: 21, Mode: 0o777}
	cases := []struct {
		name string
		w    Who
		want bool
	}{
		{"owner", user(10, 99), true},
		{"creator", user(11, 99), true},
		{"group", user(30, 20), false},
		{"other", user(30, 31), false},
		{"CAP_SYS_ADMIN", Who{EUID: 30, Caps: 1 << capSysAdmin}, true},
		{"CAP_IPC_OWNER", Who{EUID: 30, Caps: 1 << capIPCOwner}, false},
	}
	for _, c := range cases {
		if got := Owner(&c.w, &obj); got != c.want {
			t.Errorf("%s: Owner = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCtlCheck: the checks of the ctl commands that run natively.
func TestCtlCheck(t *testing.T) {
	sem := Obj{UID: 10, GID: 20, CUID: 10, CGID: 20, Mode: 0o640, Nsems: 2}
	shm := Obj{UID: 10, GID: 20, CUID: 11, CGID: 20, Mode: 0o600}
	other, group := user(30, 31), user(30, 20)
	cases := []struct {
		name        string
		w           Who
		o           Obj
		kind        Kind
		semnum, cmd int32
		arg         uint64
		want        unix.Errno
	}{
		{"IPC_RMID by the owner", user(10, 1), sem, Sem, 0, ipcRmid, 0, 0},
		{"IPC_RMID by the creator", user(11, 1), shm, Shm, 0, ipcRmid, 0, 0},
		{"IPC_RMID by another", other, sem, Msg, 0, ipcRmid, 0, unix.EPERM},
		{"IPC_RMID by CAP_SYS_ADMIN", Who{EUID: 30, Caps: 1 << capSysAdmin}, sem, Msg, 0, ipcRmid, 0, 0},
		{"SHM_LOCK by the owner", user(10, 1), shm, Shm, 0, shmLock, 0, 0},
		{"SHM_UNLOCK by the creator", user(11, 1), shm, Shm, 0, shmUnlock, 0, 0},
		{"SHM_LOCK by another", other, shm, Shm, 0, shmLock, 0, unix.EPERM},
		{"SHM_LOCK with CAP_IPC_LOCK", Who{EUID: 30, Caps: 1 << capIPCLock}, shm, Shm, 0, shmLock, 0, 0},
		{"GETVAL by the group", group, sem, Sem, 0, semGetVal, 0, 0},
		{"GETALL by another", other, sem, Sem, 0, semGetAll, 0, unix.EACCES},
		{"GETPID by another", other, sem, Sem, 0, semGetPid, 0, unix.EACCES},
		{"GETNCNT by another", other, sem, Sem, 0, semGetNcnt, 0, unix.EACCES},
		{"GETZCNT by another", other, sem, Sem, 0, semGetZcnt, 0, unix.EACCES},
		{"GETZCNT with CAP_IPC_OWNER", Who{EUID: 30, Caps: 1 << capIPCOwner}, sem, Sem, 0, semGetZcnt, 0, 0},
		{"SETALL by the group", group, sem, Sem, 0, semSetAll, 0, unix.EACCES},
		{"SETALL by the owner", user(10, 1), sem, Sem, 0, semSetAll, 0, 0},
		{"SETVAL by the group", group, sem, Sem, 1, semSetVal, 5, unix.EACCES},
		{"SETVAL's ERANGE first", group, sem, Sem, 1, semSetVal, semVMX + 1, 0},
		{"SETVAL's negative value first", group, sem, Sem, 1, semSetVal, uint64(1<<32 - 1), 0},
		{"SETVAL's EINVAL first", group, sem, Sem, 2, semSetVal, 5, 0},
		{"SETVAL's negative number first", group, sem, Sem, -1, semSetVal, 5, 0},
		{"IPC_INFO is not checked", other, sem, Sem, 0, ipcInfo, 0, 0},
		{"SHM_LOCK's number is not a queue's", other, shm, Msg, 0, shmLock, 0, 0},
	}
	for _, c := range cases {
		if got := ctlCheck(&c.w, &c.o, c.kind, c.semnum, c.cmd, c.arg); got != c.want {
			t.Errorf("%s: ctlCheck = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestStatCmd: which commands read an object's ipc_perm, by id or by
// index, with a read check or without (*_STAT_ANY).
func TestStatCmd(t *testing.T) {
	cases := []struct {
		kind                 Kind
		cmd                  int32
		stat, byIndex, check bool
	}{
		{Msg, ipcStat, true, false, true},
		{Sem, ipcStat, true, false, true},
		{Shm, ipcStat, true, false, true},
		{Msg, msgStat, true, true, true},
		{Msg, msgStatAny, true, true, false},
		{Sem, semStat, true, true, true},
		{Sem, semStatAny, true, true, false},
		{Shm, shmStat, true, true, true},
		{Shm, shmStatAny, true, true, false},
		{Msg, semStat, false, false, false},
		{Sem, shmStat, false, false, false},
		{Shm, IPCSet, false, false, false},
		{Msg, ipcInfo, false, false, false},
	}
	for _, c := range cases {
		stat, byIndex, check := statCmd(c.kind, c.cmd)
		if stat != c.stat || byIndex != c.byIndex || check != c.check || IsStat(c.kind, c.cmd) != c.stat {
			t.Errorf("kind %d cmd %d: statCmd = %v %v %v, want %v %v %v", c.kind, c.cmd, stat, byIndex, check, c.stat, c.byIndex, c.check)
		}
	}
}

// TestShmatWant and TestSembufs: the access shmat and semop ask for.
func TestShmatWant(t *testing.T) {
	cases := []struct {
		flg  uint64
		want uint32
	}{
		{0, 0o666},
		{shmRdonly, 0o444},
		{shmExec, 0o777},
		{shmRdonly | shmExec, 0o555},
		{ShmRnd, 0o666},
	}
	for _, c := range cases {
		if got := ShmatWant(c.flg); got != c.want {
			t.Errorf("ShmatWant(%#o) = %#o, want %#o", c.flg, got, c.want)
		}
	}
}

func TestSembufs(t *testing.T) {
	sembuf := func(num uint16, op int16) []byte {
		var b [6]byte
		b[0], b[1] = byte(num), byte(num>>8)
		b[2], b[3] = byte(op), byte(uint16(op)>>8)
		return b[:]
	}
	cases := []struct {
		name  string
		ops   []byte
		most  uint16
		alter bool
	}{
		{"one wait for zero", sembuf(0, 0), 0, false},
		{"waits for zero", append(sembuf(3, 0), sembuf(1, 0)...), 3, false},
		{"a decrement alters", append(sembuf(0, 0), sembuf(2, -1)...), 2, true},
		{"an increment alters", sembuf(0, 1), 0, true},
		{"a high number", sembuf(300, 0), 300, false},
	}
	for _, c := range cases {
		if most, alter := Sembufs(c.ops); most != c.most || alter != c.alter {
			t.Errorf("%s: Sembufs = %d %v, want %d %v", c.name, most, alter, c.most, c.alter)
		}
	}
}
