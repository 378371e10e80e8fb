//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSysVIPCPermissions: System V IPC permission checks by the guest's
// credentials (LTP msgget02, msgctl04, msgrcv02, msgsnd02, semctl02,
// semctl04, semget02, semop02, shmat02, shmctl02, shmget04). Guest root
// makes queues, semaphore sets and segments; children that dropped to
// nobody, to a user of the objects' group or to a user of none try them;
// IPC_STAT shows the guest's owners and modes; IPC_SET changes them. Every
// line must be Linux's (the same program run natively as root, in an IPC
// namespace of its own). Before, every guest process passed the host's
// check with kbox's host uid: nobody could read and remove root's objects.
func TestSysVIPCPermissions(t *testing.T) {
	img := imagePath(t)
	stdout, stderr, status := runKbox(t, "image", "--read-only", "-S", img, "--", "/opt/tests/ipcperm")
	if status != 0 {
		t.Errorf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	wantLines(t, "ipcperm", stdout, stderr,
		"nobody msgsnd root 600: EACCES",
		"nobody msgsnd root 600 type 0: EINVAL",
		"nobody msgrcv root 600: EACCES",
		"nobody msgctl IPC_STAT root 600: EACCES",
		"nobody msgctl IPC_STAT root 600 bad buffer: EACCES",
		"nobody msgctl MSG_STAT_ANY root 600: ok",
		"nobody msgctl MSG_STAT root 600: EACCES",
		"nobody msgctl IPC_SET root 600: EPERM",
		"nobody msgctl IPC_RMID root 600: EPERM",
		"nobody msgget root key 600: EACCES",
		"nobody msgget root key 0: ok",
		"nobody msgget root key excl: EEXIST",
		"nobody semop root 600: EACCES",
		"nobody semop root 600 beyond the set: EFBIG",
		"nobody semctl IPC_STAT root 600: EACCES",
		"nobody semctl GETVAL root 600: EACCES",
		"nobody semctl SETVAL root 600: EACCES",
		"nobody semctl SETVAL root 600 beyond the set: EINVAL",
		"nobody semctl IPC_RMID root 600: EPERM",
		"nobody shmat root 600: EACCES",
		"nobody shmat root 600 read-only: EACCES",
		"nobody shmat root 600 misaligned: EINVAL",
		"nobody shmctl IPC_STAT root 600: EACCES",
		"nobody shmctl SHM_LOCK root 600: EPERM",
		"nobody shmctl IPC_RMID root 600: EPERM",
		"nobody msgsnd given queue: ok",
		"nobody's queue stat: uid 65534 gid 65534 cuid 65534 cgid 65534 mode 600",
		"nobody raises own queue beyond msgmnb: EPERM",
		"nobody msgrcv own queue, mode 200: EACCES",
		"nobody sets own queue's owner to -1: EINVAL",
		"root sees nobody's given queue stat: uid 1000 gid 65534 cuid 65534 cgid 65534 mode 000",
		"group queue stat: uid 0 gid 4321 cuid 0 cgid 0 mode 060",
		"given queue stat: uid 65534 gid 0 cuid 0 cgid 0 mode 600",
		"segment creator is the caller: yes",
		"user of group 4321 msgsnd group queue: ok",
		"user with group 4321 among its groups msgrcv group queue: ok",
		"user not of group 4321 msgsnd group queue: EACCES",
		"root msgsnd group queue mode 060: ok",
		"msgmnb file is IPC_INFO's: yes",
		"shmmax file is IPC_INFO's: yes",
		"nobody writes msgmnb: EACCES",
		"ipcperm done")
	if os.Geteuid() == 0 {
		// Without host root the namespace's sysctls are read-only:
		// it belongs to a user namespace where kbox's uid is not 0.
		wantLines(t, "ipcperm", stdout, stderr, "root writes msgmnb 12345: ok", "IPC_INFO's msgmnb after: 12345, file 12345")
	}

	sameAsNativeIPC(t, "ipcperm", stdout)
}

// sameAsNativeIPC runs guest program name natively as root, in an IPC
// namespace of its own (its objects and its sysctl writes stay out of
// the host's), and fails t unless its output is kbox's stdout. Without
// musl-gcc, root or unshare there is nothing to compare with.
func sameAsNativeIPC(t *testing.T, name, stdout string) {
	t.Helper()
	native := nativeGuest(t, name)
	if native == "" {
		return
	}
	if os.Geteuid() != 0 {
		t.Log("not root: no native run to compare with")
		return
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Log("no unshare: no native run to compare with")
		return
	}
	nout, err := exec.Command("unshare", "--ipc", native).CombinedOutput()
	if err != nil {
		t.Fatalf("native %s: %v\n%s", name, err, nout)
	}
	if strings.TrimSpace(stdout) != strings.TrimSpace(string(nout)) {
		t.Errorf("kbox and Linux differ\nkbox:\n%s\nnative:\n%s", stdout, nout)
	}
}
