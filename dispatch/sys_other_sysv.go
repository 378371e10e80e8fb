// System V IPC by the guest's credentials (FamOther in table.go).

package dispatch

import (
	"encoding/binary"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// The guest's System V objects live natively in its own IPC namespace
// (sys_other_ipc.go), where every guest process has kbox's host uid: the
// kernel's permission checks cannot tell one guest user from another. So
// kbox keeps the guest's view of each object's ipc_perm (owner, group,
// creator, mode) and checks the guest's credentials against it as Linux's
// ipcperms and ipcctl_obtain_check do; what passes runs natively.
//
//   - msgget, semget and shmget are made by the socket binder, which shares
//     the guest's IPC namespace: it tells kbox whether the object is new,
//     and kbox records the caller's euid and egid as owner and creator and
//     the requested mode. Natively the object's owner bits are rwx, so the
//     host uid (every guest process's) always passes the kernel's own check.
//   - msgsnd, msgrcv, semop, semtimedop, shmat and the semctl value
//     commands are checked and then run natively; Linux's errors that come
//     before EACCES stay the kernel's (kbox continues the call for those).
//   - IPC_STAT, *_STAT and IPC_SET run in the binder: kbox shows the
//     guest's owner, group, creator, mode (and a segment's creator pid) and
//     keeps what IPC_SET changes; IPC_RMID, SHM_LOCK and SHM_UNLOCK are
//     checked and run natively.
//
// An object kbox has no record of (none should exist) is left to the
// kernel's checks.

// The kinds of object.
const (
	ipcMsg = iota
	ipcSem
	ipcShm
	ipcKinds
)

// Linux's System V IPC constants (linux/ipc.h, msg.h, sem.h, shm.h).
const (
	ipcCreat   = 0o1000
	ipcExcl    = 0o2000
	ipcNowait  = 0o4000
	ipcRmid    = 0
	ipcSet     = 1
	ipcStat    = 2
	ipcInfo    = 3
	msgStat    = 11
	msgInfo    = 12
	msgStatAny = 13
	semStat    = 18
	semInfo    = 19
	semStatAny = 20
	shmStat    = 13
	shmInfo    = 14
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
	msgCopy    = 0o40000
	msgExcept  = 0o20000
	shmRdonly  = 0o10000
	shmRnd     = 0o20000
	shmExec    = 0o100000
	shmHugetlb = 0o4000

	capIPCLock     = 14
	capIPCOwner    = 15
	capSysResource = 24
)

// The *id64_ds layouts of the 64-bit ABIs: the ipc64_perm at 0 (uid,
// gid, cuid, cgid, mode at 4 to 20), a queue's msg_qbytes at 88, a
// segment's shm_cpid at 80, alike on amd64 and arm64; semid64_ds has two
// padding words more on amd64 (104 bytes) than asm-generic's (88).
var ipcDSSize = [ipcKinds]int{ipcMsg: 120, ipcSem: semidDSSize(), ipcShm: 112}

func semidDSSize() int {
	if runtime.GOARCH == "amd64" {
		return 104
	}
	return 88
}

const (
	ipcPermUID  = 4
	ipcPermGID  = 8
	ipcPermCUID = 12
	ipcPermCGID = 16
	ipcPermMode = 20
	msgQbytesAt = 88
	shmCpidAt   = 80
)

// ipcObj is the guest's view of one object's ipc_perm.
type ipcObj struct {
	uid, gid, cuid, cgid, mode uint32
	cpid                       int32 // the creator's pid (shm_cpid)
	nsems                      int32 // a semaphore set's size
}

// sysvState holds the guest's objects by kind and id.
type sysvState struct {
	mu   sync.Mutex
	objs [ipcKinds]map[int32]*ipcObj
	// shmPrune is the number of segment records beyond which the next
	// new segment prunes those that are gone (pruneShm).
	shmPrune int
}

// pruneShm drops the records of segments that are gone: a removed segment
// lives until its last detach, which kbox does not see. The threshold
// doubles with what is left, so pruning costs little per segment. Called
// with s.mu held.
func (e *Engine) pruneShm(b *unixsock.Binder) {
	s := &e.sysv
	defer func() { s.shmPrune = max(1024, 2*len(s.objs[ipcShm])) }()
	if s.shmPrune == 0 {
		return // the first time: only set the threshold
	}
	text := readSysvipc(b, "shm")
	if text == nil {
		return
	}
	live := map[int32]bool{}
	for i, l := range strings.Split(string(text), "\n") {
		if f := strings.Fields(l); i > 0 && len(f) > 1 {
			if id, err := strconv.ParseInt(f[1], 10, 32); err == nil {
				live[int32(id)] = true
			}
		}
	}
	for id := range s.objs[ipcShm] {
		if !live[id] {
			delete(s.objs[ipcShm], id)
		}
	}
}

func (s *sysvState) get(kind int, id int32) (ipcObj, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objs[kind][id]
	if o == nil {
		return ipcObj{}, false
	}
	return *o, true
}

func (s *sysvState) put(kind int, id int32, o ipcObj) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objs[kind] == nil {
		s.objs[kind] = map[int32]*ipcObj{}
	}
	s.objs[kind][id] = &o
}

func (s *sysvState) drop(kind int, id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objs[kind], id)
}

// ipcInGroup is the kernel's in_group_p: the fsgid or a supplementary group.
func ipcInGroup(c *Cred, gid uint32) bool {
	return c.FSGID == gid || slices.Contains(c.Groups, gid)
}

// ipcAllowed is Linux's ipcperms: flag's rwx bits (in any of the three
// places) against the owner's, the group's or the others' bits of the
// object, CAP_IPC_OWNER passing all.
func ipcAllowed(c *Cred, o *ipcObj, flag uint32) bool {
	want := (flag>>6 | flag>>3 | flag) & 7
	granted := o.mode
	switch {
	case c.EUID == o.uid || c.EUID == o.cuid:
		granted >>= 6
	case ipcInGroup(c, o.cgid) || ipcInGroup(c, o.gid):
		granted >>= 3
	}
	return want&^granted&7 == 0 || c.Has(capIPCOwner)
}

// ipcOwner is ipcctl_obtain_check's rule for IPC_SET and IPC_RMID: the
// owner, the creator or CAP_SYS_ADMIN.
func ipcOwner(c *Cred, o *ipcObj) bool {
	return c.EUID == o.uid || c.EUID == o.cuid || c.Has(capSysAdmin)
}

// ipcBinderFor is the binder when the guest has an IPC namespace and kbox
// checks its objects; nil when the call should just run natively.
func (e *Engine) ipcBinderFor() *unixsock.Binder {
	if e.Sockets == nil {
		return nil
	}
	return e.Sockets.Binder
}

var ipcGetCalls = [ipcKinds]unixsock.IPCCall{ipcMsg: unixsock.IPCMsgget, ipcSem: unixsock.IPCSemget, ipcShm: unixsock.IPCShmget}
var ipcCtlCalls = [ipcKinds]unixsock.IPCCall{ipcMsg: unixsock.IPCMsgctl, ipcSem: unixsock.IPCSemctl, ipcShm: unixsock.IPCShmctl}

// sysMsgget serves msgget(2), semget(2) and shmget(2) through ipcGet.
func sysMsgget(e *Engine, r *Request) Result {
	return e.ipcGet(r, ipcMsg, int32(r.Args[0]), 0, uint32(r.Args[1]))
}

func sysSemget(e *Engine, r *Request) Result {
	return e.ipcGet(r, ipcSem, int32(r.Args[0]), int64(int32(r.Args[1])), uint32(r.Args[2]))
}

func sysShmget(e *Engine, r *Request) Result {
	return e.ipcGet(r, ipcShm, int32(r.Args[0]), int64(r.Args[1]), uint32(r.Args[2]))
}

// ipcGet finds or makes an object in the binder. The binder first tries
// to make it (IPC_CREAT|IPC_EXCL), so that kbox knows the object is new,
// then to find it: the kernel's EEXIST, ENOENT and size errors come first,
// then the guest's EACCES, as Linux orders them.
func (e *Engine) ipcGet(r *Request, kind int, key int32, arg int64, flg uint32) Result {
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	b := e.ipcBinderFor()
	if b == nil {
		return cont
	}
	c := &r.P.creds().Cred
	e.sysv.mu.Lock() // one get at a time: a new object is recorded before another finds it
	defer e.sysv.mu.Unlock()
	base := int64(flg &^ 0o777)
	call := ipcGetCalls[kind]
	args := func(key int32, flg int64) [3]int64 {
		if kind == ipcMsg { // msgget(key, flg)
			return [3]int64{int64(key), flg, 0}
		}
		return [3]int64{int64(key), arg, flg}
	}
	made := func(id int64) Result {
		o := &ipcObj{uid: c.EUID, gid: c.EGID, cuid: c.EUID, cgid: c.EGID, mode: flg & 0o777, cpid: int32(r.P.Tgid)}
		if kind == ipcSem {
			o.nsems = int32(arg)
		}
		if e.sysv.objs[kind] == nil {
			e.sysv.objs[kind] = map[int32]*ipcObj{}
		}
		e.sysv.objs[kind][int32(id)] = o
		if kind == ipcShm && len(e.sysv.objs[kind]) > e.sysv.shmPrune {
			e.pruneShm(b)
		}
		return ok(id, Host)
	}
	// SHM_HUGETLB makes no segment: EINVAL, as a kernel without huge
	// pages answers (the guest's kernel configuration is LKL's), and the
	// binder's privileges never lock huge pages for the guest.
	huge := kind == ipcShm && flg&shmHugetlb != 0
	if key == 0 { // IPC_PRIVATE: always a new object
		if huge {
			return errno(unix.EINVAL, Host)
		}
		id, err := b.IPC(call, args(0, base|0o700), 0, nil)
		if err != nil {
			return fail(err, Host)
		}
		return made(id)
	}
	if flg&ipcCreat != 0 && !huge {
		id, err := b.IPC(call, args(key, base|ipcExcl|0o700), 0, nil)
		if err == nil {
			return made(id)
		}
		if err != unix.EEXIST || flg&ipcExcl != 0 {
			return fail(err, Host)
		}
	}
	id, err := b.IPC(call, args(key, base&^(ipcCreat|ipcExcl)), 0, nil)
	switch {
	case huge && err == unix.ENOENT && flg&ipcCreat != 0:
		return errno(unix.EINVAL, Host)
	case err != nil:
		return fail(err, Host)
	case huge && flg&(ipcCreat|ipcExcl) == ipcCreat|ipcExcl:
		return errno(unix.EEXIST, Host)
	}
	if o := e.sysv.objs[kind][int32(id)]; o != nil && !ipcAllowed(c, o, flg) {
		return errno(unix.EACCES, Host)
	}
	return ok(id, Host)
}

// ipcCheck looks up the object id of kind for a call that runs natively
// after kbox's check; found false leaves the call to the kernel's checks.
func (e *Engine) ipcCheck(r *Request, kind int, id int32) (o ipcObj, c *Cred, found bool) {
	o, found = e.sysv.get(kind, id)
	if !found {
		return o, nil, false
	}
	return o, &r.P.creds().Cred, true
}

// ipcLimit reads one int of the IPC namespace's limits (IPC_INFO's
// struct msginfo or seminfo, at byte off); ok false if the binder cannot.
func (e *Engine) ipcLimit(kind int, off int) (int64, bool) {
	buf := make([]byte, 40)
	a := [3]int64{0, ipcInfo, 0}
	arg := 2
	if kind == ipcSem {
		a, arg = [3]int64{0, 0, ipcInfo}, 3
	}
	if _, err := e.ipcBinderFor().IPC(ipcCtlCalls[kind], a, arg, buf); err != nil {
		return 0, false
	}
	return int64(int32(binary.NativeEndian.Uint32(buf[off:]))), true
}

// sysMsgsnd serves msgsnd(2): write permission, after Linux's earlier
// errors (a bad size or type, unreadable memory), which stay the kernel's.
func sysMsgsnd(e *Engine, r *Request) Result {
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	o, c, found := e.ipcCheck(r, ipcMsg, int32(r.Args[0]))
	if !found || ipcAllowed(c, &o, 0o222) {
		return cont
	}
	size := int64(r.Args[2])
	msgmax, known := e.ipcLimit(ipcMsg, 8) // struct msginfo's msgmax
	if !known || size < 0 || size > msgmax {
		return cont
	}
	body := make([]byte, 8+size)
	if r.G.Read(r.Args[1], body) != nil || int64(binary.NativeEndian.Uint64(body)) < 1 {
		return cont
	}
	return errno(unix.EACCES, Host)
}

// sysMsgrcv serves msgrcv(2): read permission, after a bad size or
// MSG_COPY's flag errors.
func sysMsgrcv(e *Engine, r *Request) Result {
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	o, c, found := e.ipcCheck(r, ipcMsg, int32(r.Args[0]))
	if !found || ipcAllowed(c, &o, 0o444) {
		return cont
	}
	flg := r.Args[4]
	if int64(r.Args[2]) < 0 || flg&msgCopy != 0 && (flg&ipcNowait == 0 || flg&msgExcept != 0) {
		return cont
	}
	return errno(unix.EACCES, Host)
}

// sysSemop serves semop(2) and semtimedop(2): write permission if an
// operation changes a value, read permission otherwise, after Linux's
// earlier errors (the timeout, the number of operations, unreadable
// operations, a semaphore beyond the set).
func sysSemop(e *Engine, r *Request) Result {
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	o, c, found := e.ipcCheck(r, ipcSem, int32(r.Args[0]))
	if !found || ipcAllowed(c, &o, 0o666) {
		return cont
	}
	if r.Nr == unix.SYS_SEMTIMEDOP && r.Args[3] != 0 {
		var ts [16]byte
		if r.G.Read(r.Args[3], ts[:]) != nil {
			return cont
		}
		sec, nsec := int64(binary.NativeEndian.Uint64(ts[:])), int64(binary.NativeEndian.Uint64(ts[8:]))
		if sec < 0 || nsec < 0 || nsec >= 1e9 {
			return cont
		}
	}
	n := int64(uint32(r.Args[2]))
	semopm, known := e.ipcLimit(ipcSem, 20) // struct seminfo's semopm
	if !known || n < 1 || n > semopm {
		return cont
	}
	ops := make([]byte, 6*n) // struct sembuf: u16 num, i16 op, i16 flg
	if r.G.Read(r.Args[1], ops) != nil {
		return cont
	}
	alter, most := false, uint16(0)
	for i := int64(0); i < n; i++ {
		num := binary.NativeEndian.Uint16(ops[6*i:])
		most = max(most, num)
		alter = alter || binary.NativeEndian.Uint16(ops[6*i+2:]) != 0
	}
	if int32(most) >= o.nsems {
		return cont // EFBIG
	}
	want := uint32(0o444)
	if alter {
		want = 0o222
	}
	if ipcAllowed(c, &o, want) {
		return cont
	}
	return errno(unix.EACCES, Host)
}

// sysShmat serves shmat(2): read, write unless SHM_RDONLY, and execute
// with SHM_EXEC, after a misaligned address's EINVAL.
func sysShmat(e *Engine, r *Request) Result {
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	o, c, found := e.ipcCheck(r, ipcShm, int32(r.Args[0]))
	if !found {
		return cont
	}
	flg := r.Args[2]
	want := uint32(0o666)
	if flg&shmRdonly != 0 {
		want = 0o444
	}
	if flg&shmExec != 0 {
		want |= 0o111
	}
	if ipcAllowed(c, &o, want) {
		return cont
	}
	if r.Args[1]&uint64(unix.Getpagesize()-1) != 0 && flg&shmRnd == 0 {
		return cont
	}
	return errno(unix.EACCES, Host)
}

func sysMsgctl(e *Engine, r *Request) Result {
	return e.ipcCtl(r, ipcMsg, int32(r.Args[0]), 0, int32(r.Args[1]), r.Args[2])
}

func sysSemctl(e *Engine, r *Request) Result {
	return e.ipcCtl(r, ipcSem, int32(r.Args[0]), int32(r.Args[1]), int32(r.Args[2]), r.Args[3])
}

func sysShmctl(e *Engine, r *Request) Result {
	return e.ipcCtl(r, ipcShm, int32(r.Args[0]), 0, int32(r.Args[1]), r.Args[2])
}

// ipcStatCmd says that cmd reads an object's ipc_perm (IPC_STAT or one of
// kind's *_STAT commands, which take an index), and whether it checks
// read permission (not *_STAT_ANY).
func ipcStatCmd(kind int, cmd int32) (stat, byIndex, check bool) {
	switch {
	case cmd == ipcStat:
		return true, false, true
	case kind == ipcMsg && (cmd == msgStat || cmd == msgStatAny):
		return true, true, cmd == msgStat
	case kind == ipcSem && (cmd == semStat || cmd == semStatAny):
		return true, true, cmd == semStat
	case kind == ipcShm && (cmd == shmStat || cmd == shmStatAny):
		return true, true, cmd == shmStat
	}
	return false, false, false
}

// ipcCtl serves msgctl(2), semctl(2) and shmctl(2) (semnum is semctl's,
// arg its fourth argument or the others' buffer).
func (e *Engine) ipcCtl(r *Request, kind int, id, semnum, cmd int32, arg uint64) Result {
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	b := e.ipcBinderFor()
	if b == nil {
		return cont
	}
	if stat, byIndex, check := ipcStatCmd(kind, cmd); stat {
		return e.ipcStat(r, b, kind, id, cmd, arg, byIndex, check)
	}
	if cmd == ipcSet {
		return e.ipcSetPerm(r, b, kind, id, arg)
	}
	o, c, found := e.ipcCheck(r, kind, id)
	if !found {
		return cont
	}
	switch {
	case cmd == ipcRmid:
		if !ipcOwner(c, &o) {
			return errno(unix.EPERM, Host)
		}
		if kind != ipcShm { // a segment lives on until its last detach
			e.sysv.drop(kind, id)
		}
	case kind == ipcShm && (cmd == shmLock || cmd == shmUnlock):
		if !c.Has(capIPCLock) && c.EUID != o.uid && c.EUID != o.cuid {
			return errno(unix.EPERM, Host)
		}
	case kind == ipcSem && (cmd == semGetVal || cmd == semGetPid || cmd == semGetNcnt || cmd == semGetZcnt || cmd == semGetAll):
		if !ipcAllowed(c, &o, 0o444) {
			return errno(unix.EACCES, Host)
		}
	case kind == ipcSem && cmd == semSetAll:
		if !ipcAllowed(c, &o, 0o222) {
			return errno(unix.EACCES, Host)
		}
	case kind == ipcSem && cmd == semSetVal:
		// Linux: ERANGE for the value, EINVAL for the number, then EACCES.
		if v := int32(arg); v >= 0 && v <= semVMX && semnum >= 0 && semnum < o.nsems && !ipcAllowed(c, &o, 0o222) {
			return errno(unix.EACCES, Host)
		}
	}
	return cont
}

// ipcCtlArgs are a ctl call's arguments for the binder, with the buffer
// at its place.
func ipcCtlArgs(kind int, id, cmd int32) ([3]int64, int) {
	if kind == ipcSem {
		return [3]int64{int64(id), 0, int64(cmd)}, 3
	}
	return [3]int64{int64(id), int64(cmd), 0}, 2
}

// ipcStat runs IPC_STAT or a *_STAT command in the binder and gives the
// guest the object as it sees it: EACCES without read permission (but for
// *_STAT_ANY), its owner, group, creator and mode (a segment's creator
// pid too), EFAULT for a buffer it cannot write.
func (e *Engine) ipcStat(r *Request, b *unixsock.Binder, kind int, id, cmd int32, buf uint64, byIndex, check bool) Result {
	o, c, found := e.ipcCheck(r, kind, id)
	if !byIndex && !found {
		return cont
	}
	if !byIndex && check && !ipcAllowed(c, &o, 0o444) {
		return errno(unix.EACCES, Host)
	}
	ds := make([]byte, ipcDSSize[kind])
	a, at := ipcCtlArgs(kind, id, cmd)
	ret, err := b.IPC(ipcCtlCalls[kind], a, at, ds)
	if err != nil {
		return fail(err, Host)
	}
	if byIndex {
		if o, c, found = e.ipcCheck(r, kind, int32(ret)); found && check && !ipcAllowed(c, &o, 0o444) {
			return errno(unix.EACCES, Host)
		}
	}
	if found {
		o.showIn(kind, ds)
	}
	if r.G.Write(buf, ds) != nil {
		return errno(unix.EFAULT, Host)
	}
	return ok(ret, Host)
}

// showIn puts the guest's view of the object into ds, a *id64_ds.
func (o *ipcObj) showIn(kind int, ds []byte) {
	ne := binary.NativeEndian
	ne.PutUint32(ds[ipcPermUID:], o.uid)
	ne.PutUint32(ds[ipcPermGID:], o.gid)
	ne.PutUint32(ds[ipcPermCUID:], o.cuid)
	ne.PutUint32(ds[ipcPermCGID:], o.cgid)
	ne.PutUint32(ds[ipcPermMode:], ne.Uint32(ds[ipcPermMode:])&^0o777|o.mode)
	if kind == ipcShm {
		ne.PutUint32(ds[shmCpidAt:], uint32(o.cpid))
	}
}

// ipcSetPerm serves IPC_SET: the new owner, group and mode (a queue's
// size too) by the owner, the creator or CAP_SYS_ADMIN; natively the
// object keeps its host owner and rwx owner bits.
func (e *Engine) ipcSetPerm(r *Request, b *unixsock.Binder, kind int, id int32, buf uint64) Result {
	in := make([]byte, ipcDSSize[kind])
	if r.G.Read(buf, in) != nil {
		return errno(unix.EFAULT, Host)
	}
	o, c, found := e.ipcCheck(r, kind, id)
	if !found {
		return cont
	}
	if !ipcOwner(c, &o) {
		return errno(unix.EPERM, Host)
	}
	ne := binary.NativeEndian
	if kind == ipcMsg && !c.Has(capSysResource) {
		// Linux: raising a queue's size beyond msgmnb needs CAP_SYS_RESOURCE.
		if msgmnb, known := e.ipcLimit(ipcMsg, 12); known && ne.Uint64(in[msgQbytesAt:]) > uint64(msgmnb) {
			return errno(unix.EPERM, Host)
		}
	}
	uid, gid, mode := ne.Uint32(in[ipcPermUID:]), ne.Uint32(in[ipcPermGID:]), ne.Uint32(in[ipcPermMode:])&0o777
	if uid == noID || gid == noID {
		return errno(unix.EINVAL, Host)
	}
	cur := make([]byte, ipcDSSize[kind])
	a, at := ipcCtlArgs(kind, id, ipcStat)
	if _, err := b.IPC(ipcCtlCalls[kind], a, at, cur); err != nil {
		return fail(err, Host)
	}
	copy(in[ipcPermUID:ipcPermMode], cur[ipcPermUID:ipcPermMode]) // the host's owner and group stay
	ne.PutUint32(in[ipcPermMode:], mode|0o700)
	a, at = ipcCtlArgs(kind, id, ipcSet)
	if _, err := b.IPC(ipcCtlCalls[kind], a, at, in); err != nil {
		return fail(err, Host)
	}
	o.uid, o.gid, o.mode = uid, gid, mode
	e.sysv.put(kind, id, o)
	return ok(0, Host)
}

// The columns of /proc/sysvipc/{msg,sem,shm} that kbox shows as the guest
// sees them: the id, perms, uid, gid, cuid and cgid (and a segment's cpid).
var sysvipcCols = map[string]struct {
	kind                       int
	uid, gid, cuid, cgid, cpid int
}{
	"msg": {ipcMsg, 7, 8, 9, 10, -1},
	"sem": {ipcSem, 4, 5, 6, 7, -1},
	"shm": {ipcShm, 7, 8, 9, 10, 4},
}

// sysvipcShown rewrites the lines of /proc/sysvipc/name (the kernel's, in
// the guest's namespace) with the guest's view of each object kbox knows,
// keeping the columns' alignment.
func (e *Engine) sysvipcShown(name string, text []byte) []byte {
	col, known := sysvipcCols[name]
	if !known {
		return text
	}
	lines := strings.SplitAfter(string(text), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if i == 0 || len(f) <= col.cgid {
			continue
		}
		id, err := strconv.ParseInt(f[1], 10, 32)
		if err != nil {
			continue
		}
		o, found := e.sysv.get(col.kind, int32(id))
		if !found {
			continue
		}
		perms, err := strconv.ParseUint(f[2], 8, 32)
		if err != nil {
			continue
		}
		set := map[int]string{2: strconv.FormatUint(perms&^0o777|uint64(o.mode), 8),
			col.uid: strconv.FormatUint(uint64(o.uid), 10), col.gid: strconv.FormatUint(uint64(o.gid), 10),
			col.cuid: strconv.FormatUint(uint64(o.cuid), 10), col.cgid: strconv.FormatUint(uint64(o.cgid), 10)}
		if col.cpid >= 0 {
			set[col.cpid] = strconv.Itoa(int(o.cpid))
		}
		lines[i] = replaceColumns(l, set)
	}
	return []byte(strings.Join(lines, ""))
}

// replaceColumns replaces the whitespace-separated fields of line by index
// with set's values, right-aligned in the field's old width where they fit
// (the kernel prints the columns right-aligned).
func replaceColumns(line string, set map[int]string) string {
	var b strings.Builder
	field, i := 0, 0
	for i < len(line) {
		j := i
		for j < len(line) && (line[j] == ' ' || line[j] == '\t' || line[j] == '\n') {
			j++
		}
		gap := line[i:j]
		k := j
		for k < len(line) && line[k] != ' ' && line[k] != '\t' && line[k] != '\n' {
			k++
		}
		word := line[j:k]
		if word == "" {
			b.WriteString(gap)
			break
		}
		if v, ok := set[field]; ok && v != word {
			switch d := len(v) - len(word); {
			case d < 0:
				gap += strings.Repeat(" ", -d)
			case d > 0 && len(gap) > 1:
				gap = gap[:max(1, len(gap)-d)]
			}
			word = v
		}
		b.WriteString(gap)
		b.WriteString(word)
		field++
		i = k
	}
	return b.String()
}
