package sysvipc

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestDSSizes: the *id64_ds sizes and offsets kbox copies are the C
// library's (struct shmid_ds and ipc_perm of the 64-bit ABIs).
func TestDSSizes(t *testing.T) {
	if got := int(unsafe.Sizeof(unix.SysvShmDesc{})); got != DSSize(Shm) {
		t.Errorf("shmid_ds: %d bytes, kbox copies %d", got, DSSize(Shm))
	}
	if off := int(unsafe.Offsetof(unix.SysvShmDesc{}.Cpid)); off != shmCpidAt {
		t.Errorf("shm_cpid at %d, kbox writes %d", off, shmCpidAt)
	}
	p := unix.SysvIpcPerm{}
	for _, c := range []struct {
		name      string
		off, kbox int
	}{
		{"uid", int(unsafe.Offsetof(p.Uid)), permUID},
		{"gid", int(unsafe.Offsetof(p.Gid)), permGID},
		{"cuid", int(unsafe.Offsetof(p.Cuid)), permCUID},
		{"cgid", int(unsafe.Offsetof(p.Cgid)), permCGID},
		{"mode", int(unsafe.Offsetof(p.Mode)), permMode},
	} {
		if c.off != c.kbox {
			t.Errorf("%s at %d, kbox writes %d", c.name, c.off, c.kbox)
		}
	}
}

// TestShowIn: the guest's view lands in shmid_ds's fields as the C
// library reads them; the mode's bits above 0777 (SHM_DEST, ...) and the
// other fields stay the kernel's; a queue's or a set's ds has no cpid.
func TestShowIn(t *testing.T) {
	var d unix.SysvShmDesc
	d.Perm.Key, d.Perm.Mode, d.Segsz, d.Cpid, d.Nattch = 77, 0o1777, 4096, 5, 2
	ds := unsafe.Slice((*byte)(unsafe.Pointer(&d)), unsafe.Sizeof(d))
	o := Obj{UID: 10, GID: 20, CUID: 11, CGID: 21, Mode: 0o640, Cpid: 42}
	o.showIn(Shm, ds)
	want := unix.SysvShmDesc{Segsz: 4096, Cpid: 42, Nattch: 2}
	want.Perm = unix.SysvIpcPerm{Key: 77, Uid: 10, Gid: 20, Cuid: 11, Cgid: 21, Mode: 0o1640}
	if d != want {
		t.Errorf("shmid_ds %+v, want %+v", d, want)
	}
	for _, kind := range []Kind{Msg, Sem} {
		ds := make([]byte, DSSize(kind))
		binary.NativeEndian.PutUint32(ds[shmCpidAt:], 5)
		o.showIn(kind, ds)
		if got := binary.NativeEndian.Uint32(ds[shmCpidAt:]); got != 5 {
			t.Errorf("kind %d: word at %d changed to %d", kind, shmCpidAt, got)
		}
	}
}
