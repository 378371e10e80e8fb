package sysvipc

import (
	"encoding/binary"
	"strconv"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// Binder runs System V IPC calls in the guest's IPC namespace: the socket
// binder (*unixsock.Binder) in kbox, a fake in tests.
type Binder interface {
	// IPC runs call with arguments a, buf at argument bufarg.
	IPC(call unixsock.IPCCall, a [3]int64, bufarg int, buf []byte) (int64, error)
	// OpenIPC opens /proc/sysvipc/NAME.
	OpenIPC(name string) (int, error)
}

var getCalls = [kinds]unixsock.IPCCall{Msg: unixsock.IPCMsgget, Sem: unixsock.IPCSemget, Shm: unixsock.IPCShmget}
var ctlCalls = [kinds]unixsock.IPCCall{Msg: unixsock.IPCMsgctl, Sem: unixsock.IPCSemctl, Shm: unixsock.IPCShmctl}

// State holds the guest's objects by kind and id. The zero State is empty.
type State struct {
	mu   sync.Mutex
	objs [kinds]map[int32]*Obj
	// shmPrune is the number of segment records beyond which the next
	// new segment prunes those that are gone (pruneShm).
	shmPrune int
}

// Lookup is the guest's view of object id of kind; found false if kbox
// has no record of it (the kernel's checks then stand).
func (s *State) Lookup(kind Kind, id int32) (Obj, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objs[kind][id]
	if o == nil {
		return Obj{}, false
	}
	return *o, true
}

func (s *State) put(kind Kind, id int32, o Obj) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLocked(kind, id, &o)
}

func (s *State) putLocked(kind Kind, id int32, o *Obj) {
	if s.objs[kind] == nil {
		s.objs[kind] = map[int32]*Obj{}
	}
	s.objs[kind][id] = o
}

func (s *State) drop(kind Kind, id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objs[kind], id)
}

// pruneShm drops the records of segments that are gone: a removed segment
// lives until its last detach, which kbox does not see. The threshold
// doubles with what is left, so pruning costs little per segment. Called
// with s.mu held.
func (s *State) pruneShm(b Binder) {
	defer func() { s.shmPrune = max(1024, 2*len(s.objs[Shm])) }()
	if s.shmPrune == 0 {
		return // the first time: only set the threshold
	}
	text := ReadProc(b, "shm")
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
	for id := range s.objs[Shm] {
		if !live[id] {
			delete(s.objs[Shm], id)
		}
	}
}

// Get serves msgget (arg 0), semget (arg the number of semaphores) and
// shmget (arg the size) for w in process pid: it finds or makes the object
// in the binder, which first tries to make it (IPC_CREAT|IPC_EXCL), so
// that kbox knows the object is new, then to find it: the kernel's EEXIST,
// ENOENT and size errors come first, then w's EACCES, as Linux orders
// them.
func (s *State) Get(b Binder, w *Who, pid int32, kind Kind, key int32, arg int64, flg uint32) (int64, error) {
	s.mu.Lock() // one get at a time: a new object is recorded before another finds it
	defer s.mu.Unlock()
	base := int64(flg &^ 0o777)
	call := getCalls[kind]
	args := func(key int32, flg int64) [3]int64 {
		if kind == Msg { // msgget(key, flg)
			return [3]int64{int64(key), flg, 0}
		}
		return [3]int64{int64(key), arg, flg}
	}
	made := func(id int64) (int64, error) {
		o := &Obj{UID: w.EUID, GID: w.EGID, CUID: w.EUID, CGID: w.EGID, Mode: flg & 0o777, Cpid: pid}
		if kind == Sem {
			o.Nsems = int32(arg)
		}
		s.putLocked(kind, int32(id), o)
		if kind == Shm && len(s.objs[kind]) > s.shmPrune {
			s.pruneShm(b)
		}
		return id, nil
	}
	// SHM_HUGETLB makes no segment: EINVAL, as a kernel without huge
	// pages answers (the guest's kernel configuration is LKL's), and the
	// binder's privileges never lock huge pages for the guest.
	huge := kind == Shm && flg&shmHugetlb != 0
	if key == 0 { // IPC_PRIVATE: always a new object
		if huge {
			return 0, unix.EINVAL
		}
		id, err := b.IPC(call, args(0, base|0o700), 0, nil)
		if err != nil {
			return 0, err
		}
		return made(id)
	}
	if flg&ipcCreat != 0 && !huge {
		id, err := b.IPC(call, args(key, base|ipcExcl|0o700), 0, nil)
		if err == nil {
			return made(id)
		}
		if err != unix.EEXIST || flg&ipcExcl != 0 {
			return 0, err
		}
	}
	id, err := b.IPC(call, args(key, base&^(ipcCreat|ipcExcl)), 0, nil)
	switch {
	case huge && err == unix.ENOENT && flg&ipcCreat != 0:
		return 0, unix.EINVAL
	case err != nil:
		return 0, err
	case huge && flg&(ipcCreat|ipcExcl) == ipcCreat|ipcExcl:
		return 0, unix.EEXIST
	}
	if o := s.objs[kind][int32(id)]; o != nil && !Allowed(w, o, flg) {
		return 0, unix.EACCES
	}
	return id, nil
}

// The offsets of IPC_INFO's struct msginfo and seminfo that Limit reads.
const (
	MsgmaxAt = 8  // msginfo's msgmax
	msgmnbAt = 12 // msginfo's msgmnb
	SemopmAt = 20 // seminfo's semopm
)

// Limit reads one int of the IPC namespace's limits (IPC_INFO's struct
// msginfo or seminfo of kind, at byte off); ok false if the binder cannot.
func Limit(b Binder, kind Kind, off int) (int64, bool) {
	buf := make([]byte, 40)
	a := [3]int64{0, ipcInfo, 0}
	arg := 2
	if kind == Sem {
		a, arg = [3]int64{0, 0, ipcInfo}, 3
	}
	if _, err := b.IPC(ctlCalls[kind], a, arg, buf); err != nil {
		return 0, false
	}
	return int64(int32(binary.NativeEndian.Uint32(buf[off:]))), true
}

// ctlArgs are a ctl call's arguments for the binder, with the buffer at
// its place.
func ctlArgs(kind Kind, id, cmd int32) ([3]int64, int) {
	if kind == Sem {
		return [3]int64{int64(id), 0, int64(cmd)}, 3
	}
	return [3]int64{int64(id), int64(cmd), 0}, 2
}

// Ctl checks msgctl, semctl or shmctl's cmd on object id for w when the
// command then runs natively (not IPC_STAT, *_STAT or IPC_SET): 0 lets it
// run (also for an object kbox has no record of); an IPC_RMID that passes
// drops kbox's record (but a segment's, which lives on until its last
// detach). semnum and arg are semctl's third and fourth arguments.
func (s *State) Ctl(w *Who, kind Kind, id, semnum, cmd int32, arg uint64) unix.Errno {
	o, found := s.Lookup(kind, id)
	if !found {
		return 0
	}
	if en := ctlCheck(w, &o, kind, semnum, cmd, arg); en != 0 {
		return en
	}
	if cmd == ipcRmid && kind != Shm {
		s.drop(kind, id)
	}
	return 0
}

// Stat runs IPC_STAT or a *_STAT command (IsStat) in the binder and
// returns its answer and the *id64_ds the guest sees: EACCES without read
// permission (but for *_STAT_ANY), the guest's owner, group, creator and
// mode (a segment's creator pid too). ds nil and err nil: kbox has no
// record of the object, and the call runs natively.
func (s *State) Stat(b Binder, w *Who, kind Kind, id, cmd int32) (ret int64, ds []byte, err error) {
	_, byIndex, check := statCmd(kind, cmd)
	o, found := s.Lookup(kind, id)
	if !byIndex && !found {
		return 0, nil, nil
	}
	if !byIndex && check && !Allowed(w, &o, 0o444) {
		return 0, nil, unix.EACCES
	}
	ds = make([]byte, dsSize[kind])
	a, at := ctlArgs(kind, id, cmd)
	if ret, err = b.IPC(ctlCalls[kind], a, at, ds); err != nil {
		return 0, nil, err
	}
	if byIndex {
		if o, found = s.Lookup(kind, int32(ret)); found && check && !Allowed(w, &o, 0o444) {
			return 0, nil, unix.EACCES
		}
	}
	if found {
		o.showIn(kind, ds)
	}
	return ret, ds, nil
}

// SetPerm serves IPC_SET of object id with in, the guest's *id64_ds
// (DSSize bytes): the new owner, group and mode (a queue's size too) by
// the owner, the creator or CAP_SYS_ADMIN; natively the object keeps its
// host owner and rwx owner bits, and kbox records the guest's. done false
// (err nil): kbox has no record of the object, and the call runs natively.
// in is changed.
func (s *State) SetPerm(b Binder, w *Who, kind Kind, id int32, in []byte) (done bool, err error) {
	o, found := s.Lookup(kind, id)
	if !found {
		return false, nil
	}
	if !Owner(w, &o) {
		return false, unix.EPERM
	}
	if kind == Msg && !w.has(capSysResource) {
		// Linux: raising a queue's size beyond msgmnb needs CAP_SYS_RESOURCE.
		if msgmnb, known := Limit(b, Msg, msgmnbAt); known && msgQbytes(in) > uint64(msgmnb) {
			return false, unix.EPERM
		}
	}
	uid, gid, mode := setIn(in)
	if uid == noID || gid == noID {
		return false, unix.EINVAL
	}
	cur := make([]byte, dsSize[kind])
	a, at := ctlArgs(kind, id, ipcStat)
	if _, err := b.IPC(ctlCalls[kind], a, at, cur); err != nil {
		return false, err
	}
	keepHost(in, cur, mode)
	a, at = ctlArgs(kind, id, IPCSet)
	if _, err := b.IPC(ctlCalls[kind], a, at, in); err != nil {
		return false, err
	}
	o.UID, o.GID, o.Mode = uid, gid, mode
	s.put(kind, id, o)
	return true, nil
}
