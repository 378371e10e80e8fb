// Package sysvipc keeps the guest's view of its System V IPC objects and
// checks the guest's credentials against it, as Linux's ipcperms and
// ipcctl_obtain_check do; and the owners and modes of its POSIX message
// queues, checked as Linux checks a queue's inode (Queues, mqueue.go).
//
// The guest's objects live natively in its own IPC namespace, where every
// guest process has kbox's host uid: the kernel's permission checks cannot
// tell one guest user from another. So kbox keeps each object's guest
// ipc_perm (owner, group, creator, mode) in a State, and package dispatch's
// handlers ask it before a call runs natively:
//
//   - msgget, semget and shmget are made by the socket binder, which shares
//     the guest's IPC namespace (State.Get): it tells kbox whether the
//     object is new, and kbox records the caller's euid and egid as owner
//     and creator and the requested mode. Natively the object's owner bits
//     are rwx, so the host uid (every guest process's) always passes the
//     kernel's own check.
//   - msgsnd, msgrcv, semop, semtimedop, shmat and the semctl value
//     commands are checked (Allowed, State.Ctl) and then run natively;
//     Linux's errors that come before EACCES stay the kernel's (the
//     handler continues the call for those).
//   - IPC_STAT, *_STAT and IPC_SET run in the binder (State.Stat,
//     State.SetPerm): the guest sees its owner, group, creator, mode (and a
//     segment's creator pid), and kbox keeps what IPC_SET changes;
//     IPC_RMID, SHM_LOCK and SHM_UNLOCK are checked and run natively.
//   - /proc/sysvipc/* is the binder's, with the guest's view of each
//     object written into its columns (State.Shown).
//
// An object kbox has no record of (none should exist) is left to the
// kernel's checks. Nothing here touches LKL or the guest's memory: the
// handlers read and write that, and pass the caller's credentials as a Who.
package sysvipc
