package sysvipc

import (
	"sync"

	"golang.org/x/sys/unix"
)

// POSIX message queues live, like System V objects, natively in the
// guest's IPC namespace, where every guest process has kbox's host uid.
// Queues keeps each queue's guest owner, group and mode, recorded when
// the binder made it, and checks mq_open and mq_unlink against them, as
// Linux checks the queue's inode.

// MqBinder opens and removes queues in the guest's IPC namespace: the
// socket binder (*unixsock.Binder) in kbox, a fake in tests.
type MqBinder interface {
	MqOpen(name string, oflag uint32, attr []byte) (fd int, made bool, err error)
	MqUnlink(name string) error
}

// Queues holds the guest's message queues by name. The zero Queues is
// empty.
type Queues struct {
	mu sync.Mutex // held across the binder's calls: a name is made, opened or removed at a time
	qs map[string]Obj
}

// mayAccess is generic_permission for a queue: want's rwx bits (4, 2) of
// the owner's, the group's or the others' bits of o, by the caller's
// fsuid and groups; CAP_DAC_OVERRIDE passes both, CAP_DAC_READ_SEARCH
// reading.
func mayAccess(w *Who, o *Obj, want uint32) bool {
	granted := o.Mode
	switch {
	case w.FSUID == o.UID:
		granted >>= 6
	case InGroup(w, o.GID):
		granted >>= 3
	}
	if want&^granted&7 == 0 || w.has(capDacOverride) {
		return true
	}
	return want == 4 && w.has(capDacReadSearch)
}

// Open serves mq_open(name, oflag, mode) for the caller w, whose umask
// is umask: the binder opens or makes the queue; a queue it made gets w
// as its owner and mode less the umask, one that existed is checked for
// the access oflag asks (EACCES: the fd is closed). It returns the fd and
// whether the queue was made (Unmake undoes that).
func (q *Queues) Open(b MqBinder, w *Who, name string, oflag, mode, umask uint32, attr []byte) (int, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	fd, made, err := b.MqOpen(name, oflag, attr)
	if err != nil {
		return -1, false, err
	}
	if made {
		if q.qs == nil {
			q.qs = map[string]Obj{}
		}
		q.qs[name] = Obj{UID: w.FSUID, GID: w.FSGID, CUID: w.FSUID, CGID: w.FSGID, Mode: mode &^ umask & 0o777}
		return fd, true, nil
	}
	o, known := q.qs[name]
	want := [4]uint32{unix.O_RDONLY: 4, unix.O_WRONLY: 2, unix.O_RDWR: 6}[oflag&unix.O_ACCMODE]
	if known && !mayAccess(w, &o, want) {
		unix.Close(fd)
		return -1, false, unix.EACCES
	}
	return fd, false, nil
}

// Unmake removes queue name that Open made for a call that then failed
// (the guest had no fd free for it): Linux makes no queue then.
func (q *Queues) Unmake(b MqBinder, name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b.MqUnlink(name)
	delete(q.qs, name)
}

// Unlink serves mq_unlink(name) for the caller w: its owner, or a caller
// with CAP_FOWNER, may remove it (others get EACCES, as on Linux).
func (q *Queues) Unlink(b MqBinder, w *Who, name string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if o, known := q.qs[name]; known && w.FSUID != o.UID && !w.has(capFowner) {
		return unix.EACCES
	}
	if err := b.MqUnlink(name); err != nil {
		return err
	}
	delete(q.qs, name)
	return nil
}
