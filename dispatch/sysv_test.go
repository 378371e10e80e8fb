package dispatch

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestIPCAllowed: Linux's ipcperms for the owner, the creator, a member of
// the group (fsgid or supplementary), others, and CAP_IPC_OWNER.
func TestIPCAllowed(t *testing.T) {
	obj := ipcObj{uid: 10, gid: 20, cuid: 0, cgid: 0, mode: 0o640}
	cases := []struct {
		name string
		c    Cred
		flag uint32
		want bool
	}{
		{"owner reads", UserCred(10, 99, nil), 0o444, true},
		{"owner writes", UserCred(10, 99, nil), 0o222, true},
		{"owner with group bits only", UserCred(10, 20, nil), 0o111, false},
		{"creator uses the owner's bits", Cred{EUID: 0, FSGID: 5}, 0o222, true},
		{"group reads", UserCred(30, 20, nil), 0o444, true},
		{"group cannot write", UserCred(30, 20, nil), 0o222, false},
		{"supplementary group reads", UserCred(30, 31, []uint32{20}), 0o444, true},
		{"others cannot read", UserCred(30, 31, nil), 0o444, false},
		{"others ask nothing", UserCred(30, 31, nil), 0, true},
		{"get's flags count their mode bits only", UserCred(30, 31, nil), ipcCreat | 0o600, false},
		{"CAP_IPC_OWNER passes", Cred{EUID: 30, Eff: 1 << capIPCOwner}, 0o666, true},
	}
	for _, c := range cases {
		if got := ipcAllowed(&c.c, &obj, c.flag); got != c.want {
			t.Errorf("%s: ipcAllowed = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSysvipcShown: the guest's owners, mode and creator pid replace the
// kernel's in /proc/sysvipc/shm, right-aligned as the kernel prints them;
// objects kbox does not know stay as they are.
func TestSysvipcShown(t *testing.T) {
	e := &Engine{}
	e.sysv.put(ipcShm, 5, ipcObj{uid: 65534, gid: 65534, cuid: 0, cgid: 0, mode: 0o640, cpid: 1234})
	in := "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n" +
		"         0          5  1700                  4096    77     0      0     0     0     0     0          0          0 1700000000                     0                     0\n" +
		"         0          6  1700                  4096    77     0      0     0     0     0     0          0          0 1700000000                     0                     0\n"
	want := "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n" +
		"         0          5  1640                  4096  1234     0      0 65534 65534     0     0          0          0 1700000000                     0                     0\n" +
		"         0          6  1700                  4096    77     0      0     0     0     0     0          0          0 1700000000                     0                     0\n"
	if got := string(e.sysvipcShown("shm", []byte(in))); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestIPCDSSizes: the *id64_ds sizes kbox copies are the C library's
// (struct msqid_ds, semid_ds, shmid_ds of the 64-bit ABIs).
func TestIPCDSSizes(t *testing.T) {
	if got := int(unsafe.Sizeof(unix.SysvShmDesc{})); got != ipcDSSize[ipcShm] {
		t.Errorf("shmid_ds: %d bytes, kbox copies %d", got, ipcDSSize[ipcShm])
	}
	if off := int(unsafe.Offsetof(unix.SysvShmDesc{}.Cpid)); off != shmCpidAt {
		t.Errorf("shm_cpid at %d, kbox writes %d", off, shmCpidAt)
	}
	if off := int(unsafe.Offsetof(unix.SysvIpcPerm{}.Mode)); off != ipcPermMode {
		t.Errorf("mode at %d, kbox writes %d", off, ipcPermMode)
	}
}
