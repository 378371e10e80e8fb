//go:build linux && amd64 && cgo

package trap

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// kill(2) and friends: the guest's one process is kbox's pid; its threads
// are kbox's guest threads. Any other process does not exist for it.
func (t *tier) killTarget(pid int) bool {
	return pid == t.pid || pid == 0 || pid == -unix.Getpgrp() || pid == -t.pid
}

func sysKill(th *thread, a *[6]uint64) bool {
	t := tr
	pid, sig := int(int32(a[0])), int(int32(a[1]))
	switch {
	case sig < 0 || sig > 64:
		th.fail(unix.EINVAL)
	case pid == -1:
		th.fail(unix.EPERM)
	case !t.killTarget(pid):
		th.fail(unix.ESRCH)
	case sig == 0:
		th.ret(0)
	default:
		t.send(nil, sig, makeInfo(sig, siUser, t.pid, 0))
		th.ret(0)
	}
	return true
}

func (t *tier) sendThread(th *thread, tgid, tid, sig int, info []byte) {
	switch {
	case sig < 0 || sig > 64 || tid <= 0:
		th.fail(unix.EINVAL)
		return
	case tgid != -1 && tgid != t.pid:
		th.fail(unix.ESRCH)
		return
	}
	to := t.byTID(tid)
	if to == nil {
		th.fail(unix.ESRCH)
		return
	}
	if sig != 0 {
		t.send(to, sig, info)
	}
	th.ret(0)
}

func sysTkill(th *thread, a *[6]uint64) bool {
	sig := int(int32(a[1]))
	tr.sendThread(th, -1, int(int32(a[0])), sig, makeInfo(sig, siTkill, tr.pid, 0))
	return true
}

func sysTgkill(th *thread, a *[6]uint64) bool {
	sig := int(int32(a[2]))
	tr.sendThread(th, int(int32(a[0])), int(int32(a[1])), sig, makeInfo(sig, siTkill, tr.pid, 0))
	return true
}

// rt_sigqueueinfo and rt_tgsigqueueinfo carry the sender's siginfo.
func sysRtSigqueueinfo(th *thread, a *[6]uint64) bool {
	t := tr
	info := make([]byte, 128)
	if readMem(a[2], info) != nil {
		th.fail(unix.EFAULT)
		return true
	}
	pid, sig := int(int32(a[0])), int(int32(a[1]))
	binary.LittleEndian.PutUint32(info[0:], uint32(sig))
	if !t.killTarget(pid) || pid <= 0 {
		th.fail(unix.ESRCH)
		return true
	}
	if sig < 0 || sig > 64 {
		th.fail(unix.EINVAL)
		return true
	}
	if sig != 0 {
		t.send(nil, sig, info)
	}
	th.ret(0)
	return true
}

func sysRtTgsigqueueinfo(th *thread, a *[6]uint64) bool {
	info := make([]byte, 128)
	if readMem(a[3], info) != nil {
		th.fail(unix.EFAULT)
		return true
	}
	sig := int(int32(a[2]))
	binary.LittleEndian.PutUint32(info[0:], uint32(sig))
	tr.sendThread(th, int(int32(a[0])), int(int32(a[1])), sig, info)
	return true
}
