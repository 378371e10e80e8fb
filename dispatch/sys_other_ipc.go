// The other family: System V IPC (FamOther in table.go).

package dispatch

import (
	"io"
	"os"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/procfs"
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
// host's, so the binder, in the guest's namespace, opens them. Without a
// namespace of its own the guest has no System V IPC, and no sysvipc, as
// a kernel without it.
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
		return &procfs.Node{Kind: procfs.Text, Like: "sysvipc/" + name, Text: func() []byte { return readSysvipc(b, name) }}, 0
	}
	return nil, unix.ENOENT
}

func sysvipcList() []fdtable.Dirent {
	return []fdtable.Dirent{{Ino: 1, Type: unix.DT_DIR, Name: "."}, {Ino: 1, Type: unix.DT_DIR, Name: ".."},
		{Ino: 2, Type: unix.DT_REG, Name: "msg"}, {Ino: 3, Type: unix.DT_REG, Name: "sem"}, {Ino: 4, Type: unix.DT_REG, Name: "shm"}}
}

// readSysvipc reads /proc/sysvipc/name as the binder opens it; on a
// failure the file is empty (its header line is the host kernel's, so
// none is made up).
func readSysvipc(b *unixsock.Binder, name string) []byte {
	fd, err := b.OpenIPC(name)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), "sysvipc/"+name)
	defer f.Close()
	text, _ := io.ReadAll(f)
	return text
}
