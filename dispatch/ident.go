package dispatch

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

func init() {
	register(unix.SYS_GETUID, sysGetuid)       // getuid(2)
	register(unix.SYS_GETEUID, sysGetuid)      // geteuid(2)
	register(unix.SYS_GETGID, sysGetgid)       // getgid(2)
	register(unix.SYS_GETEGID, sysGetgid)      // getegid(2)
	register(unix.SYS_GETRESUID, sysGetresuid) // getresuid(2)
	register(unix.SYS_GETRESGID, sysGetresgid) // getresgid(2)
	register(unix.SYS_GETGROUPS, sysGetgroups) // getgroups(2)
	for _, nr := range []int{unix.SYS_SETUID, unix.SYS_SETGID, unix.SYS_SETREUID, unix.SYS_SETREGID,
		unix.SYS_SETRESUID, unix.SYS_SETRESGID, unix.SYS_SETGROUPS, unix.SYS_SETFSUID, unix.SYS_SETFSGID} {
		register(nr, sysSetid) // set*id(2): accepted when identity is emulated
	}
}

func (e *Engine) emulatedID() (uid, gid uint32, on bool) {
	switch {
	case e.Opt.RootID:
		return 0, 0, true
	case e.Opt.ChangeID:
		return e.Opt.UID, e.Opt.GID, true
	}
	return 0, 0, false
}

func sysGetuid(e *Engine, r *Request) Result {
	uid, _, on := e.emulatedID()
	if !on {
		return cont
	}
	return ok(int64(uid), Emulated)
}

func sysGetgid(e *Engine, r *Request) Result {
	_, gid, on := e.emulatedID()
	if !on {
		return cont
	}
	return ok(int64(gid), Emulated)
}

func writeRes(r *Request, v uint32) Result {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	for i := 0; i < 3; i++ {
		if err := r.G.Write(r.Args[i], b[:]); err != nil {
			return errno(unix.EFAULT, Emulated)
		}
	}
	return ok(0, Emulated)
}

func sysGetresuid(e *Engine, r *Request) Result {
	uid, _, on := e.emulatedID()
	if !on {
		return cont
	}
	return writeRes(r, uid)
}

func sysGetresgid(e *Engine, r *Request) Result {
	_, gid, on := e.emulatedID()
	if !on {
		return cont
	}
	return writeRes(r, gid)
}

func sysGetgroups(e *Engine, r *Request) Result {
	if _, _, on := e.emulatedID(); !on {
		return cont
	}
	return ok(0, Emulated)
}

func sysSetid(e *Engine, r *Request) Result {
	if _, _, on := e.emulatedID(); !on {
		return cont
	}
	return ok(0, Emulated)
}
