// System V IPC by the guest's credentials (FamOther in table.go): the
// handlers; package sysvipc keeps the objects' guest owners and modes and
// the permission rules (its package comment says which call is checked
// how).

package dispatch

import (
	"encoding/binary"

	"github.com/kbox-project/kbox/sysvipc"
	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// ipcBinderFor is the binder when the guest has an IPC namespace and kbox
// checks its objects; nil when the call should just run natively.
func (e *Engine) ipcBinderFor() *unixsock.Binder {
	if e.Sockets == nil {
		return nil
	}
	return e.Sockets.Binder
}

// ipcWho is the caller's credentials as package sysvipc checks them.
func ipcWho(r *Request) sysvipc.Who {
	c := &r.P.creds().Cred
	return sysvipc.Who{EUID: c.EUID, EGID: c.EGID, FSUID: c.FSUID, FSGID: c.FSGID, Groups: c.Groups, Caps: c.Eff}
}

// sysMsgget serves msgget(2) through ipcGet.
func sysMsgget(e *Engine, r *Request) Result {
	return e.ipcGet(r, sysvipc.Msg, int32(r.Args[0]), 0, uint32(r.Args[1]))
}

// sysSemget serves semget(2) through ipcGet.
func sysSemget(e *Engine, r *Request) Result {
	return e.ipcGet(r, sysvipc.Sem, int32(r.Args[0]), int64(int32(r.Args[1])), uint32(r.Args[2]))
}

// sysShmget serves shmget(2) through ipcGet.
func sysShmget(e *Engine, r *Request) Result {
	return e.ipcGet(r, sysvipc.Shm, int32(r.Args[0]), int64(r.Args[1]), uint32(r.Args[2]))
}

// ipcGet finds or makes an object in the binder (sysvipc.State.Get).
func (e *Engine) ipcGet(r *Request, kind sysvipc.Kind, key int32, arg int64, flg uint32) Result {
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	b := e.ipcBinderFor()
	if b == nil {
		return cont
	}
	w := ipcWho(r)
	id, err := e.sysv.Get(b, &w, int32(r.P.Tgid), kind, key, arg, flg)
	if err != nil {
		return fail(err, Host)
	}
	return ok(id, Host)
}

// ipcCheck looks up the object id of kind for a call that runs natively
// after kbox's check; found false leaves the call to the kernel's checks.
func (e *Engine) ipcCheck(r *Request, kind sysvipc.Kind, id int32) (o sysvipc.Obj, w sysvipc.Who, found bool) {
	o, found = e.sysv.Lookup(kind, id)
	if !found {
		return o, w, false
	}
	return o, ipcWho(r), true
}

// sysMsgsnd serves msgsnd(2): the queue's write permission by guest credentials.
func sysMsgsnd(e *Engine, r *Request) Result {
	// Write permission, after Linux's earlier errors (a bad size or type,
	// unreadable memory), which stay the kernel's.
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	o, w, found := e.ipcCheck(r, sysvipc.Msg, int32(r.Args[0]))
	if !found || sysvipc.Allowed(&w, &o, 0o222) {
		return cont
	}
	size := int64(r.Args[2])
	msgmax, known := sysvipc.Limit(e.ipcBinderFor(), sysvipc.Msg, sysvipc.MsgmaxAt)
	if !known || size < 0 || size > msgmax {
		return cont
	}
	body := make([]byte, 8+size)
	if r.G.Read(r.Args[1], body) != nil || int64(binary.NativeEndian.Uint64(body)) < 1 {
		return cont
	}
	return errno(unix.EACCES, Host)
}

// sysMsgrcv serves msgrcv(2): the queue's read permission by guest credentials.
func sysMsgrcv(e *Engine, r *Request) Result {
	// Read permission, after a bad size or MSG_COPY's flag errors.
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	o, w, found := e.ipcCheck(r, sysvipc.Msg, int32(r.Args[0]))
	if !found || sysvipc.Allowed(&w, &o, 0o444) {
		return cont
	}
	flg := r.Args[4]
	if int64(r.Args[2]) < 0 || flg&sysvipc.MsgCopy != 0 && (flg&sysvipc.IPCNowait == 0 || flg&sysvipc.MsgExcept != 0) {
		return cont
	}
	return errno(unix.EACCES, Host)
}

// sysSemop serves semop(2) and semtimedop(2): the set's permissions by guest credentials.
func sysSemop(e *Engine, r *Request) Result {
	// Write permission if an operation changes a value, read permission
	// otherwise, after Linux's earlier errors (the timeout, the number of
	// operations, unreadable operations, a semaphore beyond the set).
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	o, w, found := e.ipcCheck(r, sysvipc.Sem, int32(r.Args[0]))
	if !found || sysvipc.Allowed(&w, &o, 0o666) {
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
	semopm, known := sysvipc.Limit(e.ipcBinderFor(), sysvipc.Sem, sysvipc.SemopmAt)
	if !known || n < 1 || n > semopm {
		return cont
	}
	ops := make([]byte, 6*n) // struct sembuf
	if r.G.Read(r.Args[1], ops) != nil {
		return cont
	}
	most, alter := sysvipc.Sembufs(ops)
	if int32(most) >= o.Nsems {
		return cont // EFBIG
	}
	want := uint32(0o444)
	if alter {
		want = 0o222
	}
	if sysvipc.Allowed(&w, &o, want) {
		return cont
	}
	return errno(unix.EACCES, Host)
}

// sysShmat serves shmat(2): the segment's permissions by guest credentials.
func sysShmat(e *Engine, r *Request) Result {
	// Read, write unless SHM_RDONLY, and execute with SHM_EXEC, after a
	// misaligned address's EINVAL.
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	o, w, found := e.ipcCheck(r, sysvipc.Shm, int32(r.Args[0]))
	if !found {
		return cont
	}
	flg := r.Args[2]
	if sysvipc.Allowed(&w, &o, sysvipc.ShmatWant(flg)) {
		return cont
	}
	if r.Args[1]&uint64(unix.Getpagesize()-1) != 0 && flg&sysvipc.ShmRnd == 0 {
		return cont
	}
	return errno(unix.EACCES, Host)
}

// sysMsgctl serves msgctl(2) through ipcCtl.
func sysMsgctl(e *Engine, r *Request) Result {
	return e.ipcCtl(r, sysvipc.Msg, int32(r.Args[0]), 0, int32(r.Args[1]), r.Args[2])
}

// sysSemctl serves semctl(2) through ipcCtl.
func sysSemctl(e *Engine, r *Request) Result {
	return e.ipcCtl(r, sysvipc.Sem, int32(r.Args[0]), int32(r.Args[1]), int32(r.Args[2]), r.Args[3])
}

// sysShmctl serves shmctl(2) through ipcCtl.
func sysShmctl(e *Engine, r *Request) Result {
	return e.ipcCtl(r, sysvipc.Shm, int32(r.Args[0]), 0, int32(r.Args[1]), r.Args[2])
}

// ipcCtl serves msgctl(2), semctl(2) and shmctl(2) (semnum is semctl's,
// arg its fourth argument or the others' buffer): IPC_STAT and *_STAT
// give the guest the object as it sees it (EFAULT for a buffer it cannot
// write), IPC_SET changes it, the rest is checked and runs natively.
func (e *Engine) ipcCtl(r *Request, kind sysvipc.Kind, id, semnum, cmd int32, arg uint64) Result {
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	b := e.ipcBinderFor()
	if b == nil {
		return cont
	}
	w := ipcWho(r)
	switch {
	case sysvipc.IsStat(kind, cmd):
		ret, ds, err := e.sysv.Stat(b, &w, kind, id, cmd)
		switch {
		case err != nil:
			return fail(err, Host)
		case ds == nil:
			return cont
		case r.G.Write(arg, ds) != nil:
			return errno(unix.EFAULT, Host)
		}
		return ok(ret, Host)
	case cmd == sysvipc.IPCSet:
		in := make([]byte, sysvipc.DSSize(kind))
		if r.G.Read(arg, in) != nil {
			return errno(unix.EFAULT, Host)
		}
		done, err := e.sysv.SetPerm(b, &w, kind, id, in)
		switch {
		case err != nil:
			return fail(err, Host)
		case !done:
			return cont
		}
		return ok(0, Host)
	}
	if en := e.sysv.Ctl(&w, kind, id, semnum, cmd, arg); en != 0 {
		return errno(en, Host)
	}
	return cont
}
