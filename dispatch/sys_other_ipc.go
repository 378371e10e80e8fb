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
// must stay out of the guest's reach.

// sysIPC serves mq_getsetattr(2), mq_notify(2), mq_open(2) and the rest of its family: native in the guest's IPC namespace.
func sysIPC(e *Engine, r *Request) Result {
	if e.IPCNamespace {
		return cont // the filter lets them run natively; harmless
	}
	return errno(unix.ENOSYS, Denied)
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

// ipcSysctl resolves /proc/sys/kernel/NAME, one of the guest's IPC
// namespace's limits: the binder reads and writes it there (kbox's would
// be the host's). Like Linux's it is root's, mode 0644: root writes it.
func (e *Engine) ipcSysctl(name string) *procfs.Node {
	b := e.ipcBinder()
	if b == nil || !sysvipc.IsSysctl(name) {
		return nil
	}
	return &procfs.Node{Kind: procfs.Text, Like: "sys/kernel/" + name, Owner: sysctlOwner{},
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
