//go:build lkl

package tests

import (
	"os"
	"testing"
)

// TestMqueuePermissions: POSIX message queue permission checks by the
// guest's credentials (LTP mq_unlink01). Guest root makes queues with
// given modes and umasks, as a group member too; children that dropped to
// nobody, to a user and to a member of the queue's group open and remove
// them; Linux's own errors (a bad access mode, a slash in the name, a
// name too long, an unreadable or bad mq_attr), the fd's flags and a
// create with no fd free (no queue made) follow, and root's write of
// /proc/sys/fs/mqueue/msg_default, which the next queue made takes.
// Every line must be Linux's (the same program run natively as root, in
// an IPC namespace of its own). Before, every guest process passed the
// host's check with kbox's host uid: nobody could open root's 0600 queue
// for writing and remove it.
func TestMqueuePermissions(t *testing.T) {
	img := imagePath(t)
	stdout, stderr, status := runKbox(t, "image", "--read-only", "-S", img, "--", "/opt/tests/mqperm")
	if status != 0 {
		t.Errorf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	wantLines(t, "mqperm", stdout, stderr,
		"nobody open root 644 read: ok",
		"nobody open root 644 write: EACCES",
		"nobody open root 644 O_CREAT|O_EXCL: EEXIST",
		"nobody open root 600 read: EACCES",
		"nobody unlink root 666: EACCES",
		"nobody receives root's message: ok hello prio 3",
		"user open group 060 read-write: EACCES",
		"user of group 4321 open group 060 read-write: ok",
		"user of group 4321 unlink group 060: EACCES",
		"root open nobody 600 read-write: ok",
		"nobody unlink own: ok",
		"nobody unlink own again: ENOENT",
		"open O_CREAT unreadable attr: EFAULT",
		"open unreadable attr, no O_CREAT: EFAULT",
		"close-on-exec without O_CLOEXEC: yes",
		"open O_CREAT with no fd free: EMFILE",
		"and the queue is not made: ENOENT",
		"mqperm done")
	if os.Geteuid() == 0 {
		// Without host root the namespace's sysctls are read-only.
		wantLines(t, "mqperm", stdout, stderr, "root writes msg_default 7: ok", "a queue made without attributes: maxmsg 7")
	}

	sameAsNativeIPC(t, "mqperm", stdout)
}
