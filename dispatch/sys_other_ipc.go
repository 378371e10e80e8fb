// The other family: System V IPC (FamOther in table.go).

package dispatch

import (
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sysvipc"
	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// System V IPC and POSIX message queues.
//
// The guest has an IPC namespace of its own (made at start-up, see
// seccomp/supervisor/guestinit.c): these run natively, private to the kbox
// run, and never reach kbox. Without one (no namespace could be made)
// they are notified and refused with ENOSYS, what a kernel without
// CONFIG_SYSVIPC and CONFIG_POSIX_MQUEUE answers: the host's objects
// must stay out of the guest's reach. The calls that name an object,
// mq_open and mq_unlink here and the System V ones in sys_other_sysv.go,
// are served: kbox checks the guest's credentials first.

// sysIPC serves mq_getsetattr(2), mq_notify(2), mq_timedsend(2) and the rest of its family: native in the guest's IPC namespace.
func sysIPC(e *Engine, r *Request) Result {
	if e.IPCNamespace {
		return cont // the filter lets them run natively; harmless
	}
	return errno(unix.ENOSYS, Denied)
}

// sysMqOpen serves mq_open(2): the binder opens or makes the queue in
// the guest's IPC namespace and kbox checks the guest's credentials
// against the owner and mode the guest gave it (sysvipc.Queues), which
// natively would be kbox's host uid for every guest process.
func sysMqOpen(e *Engine, r *Request) Result {
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	b := e.ipcBinderFor()
	if b == nil {
		return cont // the kernel's checks
	}
	// Linux reads the attributes first, whether or not they are used.
	var attr []byte
	if r.Args[3] != 0 {
		attr = make([]byte, unixsock.MqAttrSize)
		if err := r.G.Read(r.Args[3], attr); err != nil {
			return errno(unix.EFAULT, Host)
		}
	}
	name, en := readString(r.G, r.Args[0], PathMax)
	if en != 0 {
		return errno(en, Host)
	}
	oflag, mode := uint32(r.Args[1]), uint32(r.Args[2])
	w := ipcWho(r)
	fd, made, err := e.mqueues.Open(b, &w, name, oflag, mode, r.P.umask.Load(), attr)
	if err != nil {
		return fail(err, Host)
	}
	res := installHost(r, fd, unix.O_CLOEXEC, Host) // always, as Linux's mq_open
	if res.Errno != 0 && made {
		e.mqueues.Unmake(b, name) // EMFILE: Linux takes the fd before it makes the queue
	}
	return res
}

// sysMqUnlink serves mq_unlink(2): the queue's owner (or CAP_FOWNER)
// removes it, in the binder.
func sysMqUnlink(e *Engine, r *Request) Result {
	if !e.IPCNamespace {
		return errno(unix.ENOSYS, Denied)
	}
	b := e.ipcBinderFor()
	if b == nil {
		return cont
	}
	name, en := readString(r.G, r.Args[0], PathMax)
	if en != 0 {
		return errno(en, Host)
	}
	w := ipcWho(r)
	if err := e.mqueues.Unlink(b, &w, name); err != nil {
		return fail(err, Host)
	}
	return ok(0, Host)
}

// ipcBinder is the socket binder when the guest has an IPC namespace of
// its own (the binder shares it), nil otherwise.
func (e *Engine) ipcBinder() *unixsock.Binder {
	if !e.IPCNamespace {
		return nil
	}
	return e.binder()
}

// procSysvipc resolves /proc/sysvipc (sub "") and its files, which list
// the System V objects of the reader's IPC namespace: kbox's would be the
// host's, so the binder, in the guest's namespace, opens them, and kbox
// shows the owners, modes and creators the guest gave its objects
// (package sysvipc). Without a namespace of its own the guest has no
// System V IPC, and no sysvipc, as a kernel without it.
func (e *Engine) procSysvipc(abs, sub string) (*procfs.Node, unix.Errno) {
	b := e.ipcBinder()
	if b == nil {
		return nil, unix.ENOENT
	}
	name, rest, _ := strings.Cut(sub, "/")
	switch name {
	case "":
		return &procfs.Node{Kind: procfs.Dir, Like: "sysvipc", List: sysvipcList}, 0
	case "shm", "sem", "msg":
		if rest != "" {
			return nil, unix.ENOTDIR
		}
		return &procfs.Node{Kind: procfs.Text, Like: "sysvipc/" + name, Text: func() []byte { return e.sysv.Shown(name, sysvipc.ReadProc(b, name)) }}, 0
	}
	return nil, unix.ENOENT
}

func sysvipcList() []fdtable.Dirent {
	return []fdtable.Dirent{{Ino: 1, Type: unix.DT_DIR, Name: "."}, {Ino: 1, Type: unix.DT_DIR, Name: ".."},
		{Ino: 2, Type: unix.DT_REG, Name: "msg"}, {Ino: 3, Type: unix.DT_REG, Name: "sem"}, {Ino: 4, Type: unix.DT_REG, Name: "shm"}}
}

// ipcSysctl resolves /proc/sys/NAME (kernel/msgmnb, fs/mqueue/msg_max),
// one of the guest's IPC namespace's limits: the binder reads and writes
// it there (kbox's would be the host's). Like Linux's it is root's, mode
// 0644: root writes it.
func (e *Engine) ipcSysctl(name string) *procfs.Node {
	b := e.ipcBinder()
	if b == nil || !sysvipc.IsSysctl(name) {
		return nil
	}
	return &procfs.Node{Kind: procfs.Text, Like: "sys/" + name, Owner: sysctlOwner{},
		Text: func() []byte {
			text, _ := b.Sysctl(name, nil)
			return text
		},
		Store: func(w procfs.Creds, data []byte) (int, unix.Errno) {
			if len(data) == 0 {
				return 0, 0
			}
			if _, err := b.Sysctl(name, data); err != nil {
				if en, isErrno := err.(unix.Errno); isErrno {
					return 0, en
				}
				return 0, unix.EIO
			}
			return len(data), 0
		}}
}

// sysctlOwner is the owner of /proc/sys files: root, as procfs.Process
// for the permission check of an open for writing.
type sysctlOwner struct{}

func (sysctlOwner) Cwd() string                                             { return "/" }
func (sysctlOwner) CwdGone() bool                                           { return false }
func (sysctlOwner) Root() string                                            { return "/" }
func (sysctlOwner) Exe() string                                             { return "" }
func (sysctlOwner) IDs() procfs.Creds                                       { return procfs.Creds{} }
func (sysctlOwner) Ident() procfs.Ident                                     { return procfs.Ident{} }
func (sysctlOwner) UpdateIdent(f func(*procfs.Ident) unix.Errno) unix.Errno { return unix.EPERM }
