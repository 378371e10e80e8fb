package sysvipc

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kbox-project/kbox/unixsock"
	"golang.org/x/sys/unix"
)

// fakeBinder is an IPC namespace with one kind of object, by key, and
// the *id64_ds its STAT commands give.
type fakeBinder struct {
	keys   map[int64]int64 // key → id
	next   int64
	ds     []byte  // what IPC_STAT and *_STAT give
	index  int64   // the id *_STAT finds at an index
	set    []byte  // the last IPC_SET's buffer
	msgmnb int32   // IPC_INFO's msgmnb
	gets   []int64 // the flags of each get
	proc   string  // /proc/sysvipc's text
	t      *testing.T
}

func (f *fakeBinder) IPC(call unixsock.IPCCall, a [3]int64, at int, buf []byte) (int64, error) {
	switch call {
	case unixsock.IPCMsgget, unixsock.IPCSemget, unixsock.IPCShmget:
		key, flg := a[0], a[2]
		if call == unixsock.IPCMsgget {
			flg = a[1]
		}
		f.gets = append(f.gets, flg)
		id, exists := f.keys[key]
		switch {
		case key == 0 || !exists && flg&ipcCreat != 0:
			f.next++
			if key != 0 {
				f.keys[key] = f.next
			}
			return f.next, nil
		case exists && flg&(ipcCreat|ipcExcl) == ipcCreat|ipcExcl:
			return 0, unix.EEXIST
		case !exists:
			return 0, unix.ENOENT
		}
		return id, nil
	}
	cmd := a[1]
	if at == 3 {
		cmd = a[2]
	}
	switch {
	case cmd == ipcInfo:
		binary.NativeEndian.PutUint32(buf[msgmnbAt:], uint32(f.msgmnb))
	case cmd == IPCSet:
		f.set = slices.Clone(buf)
	case cmd == ipcStat:
		copy(buf, f.ds)
	default: // *_STAT
		copy(buf, f.ds)
		return f.index, nil
	}
	return 0, nil
}

func (f *fakeBinder) OpenIPC(name string) (int, error) {
	p := filepath.Join(f.t.TempDir(), name)
	if err := os.WriteFile(p, []byte(f.proc), 0o600); err != nil {
		return -1, err
	}
	return unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

func newFake(t *testing.T) *fakeBinder { return &fakeBinder{keys: map[int64]int64{}, t: t} }

// TestGet: a new object is the caller's, with the requested mode; an
// existing one is found only by those its mode lets in; the kernel's
// errors come first, as Linux orders them.
func TestGet(t *testing.T) {
	owner, other := user(10, 20), user(30, 31)
	cases := []struct {
		name    string
		kind    Kind
		who     *Who
		key     int32
		flg     uint32
		exists  bool // the key's object exists, owned by owner, 0640
		wantErr error
		wantNew bool
	}{
		{"new private queue", Msg, &owner, 0, 0o640, false, nil, true},
		{"new keyed segment", Shm, &owner, 7, ipcCreat | 0o600, false, nil, true},
		{"missing without IPC_CREAT", Sem, &owner, 7, 0o600, false, unix.ENOENT, false},
		{"found by its owner", Sem, &owner, 7, 0o600, true, nil, false},
		{"found by another: EACCES", Msg, &other, 7, 0o600, true, unix.EACCES, false},
		{"found by another asking nothing", Msg, &other, 7, 0, true, nil, false},
		{"IPC_CREAT finds it too", Shm, &other, 7, ipcCreat | 0o400, true, unix.EACCES, false},
		{"IPC_EXCL's EEXIST before EACCES", Shm, &other, 7, ipcCreat | ipcExcl | 0o600, true, unix.EEXIST, false},
		{"SHM_HUGETLB private: EINVAL", Shm, &owner, 0, shmHugetlb | 0o600, false, unix.EINVAL, false},
		{"SHM_HUGETLB new: EINVAL", Shm, &owner, 7, ipcCreat | shmHugetlb | 0o600, false, unix.EINVAL, false},
		{"SHM_HUGETLB exclusive: EEXIST", Shm, &owner, 7, ipcCreat | ipcExcl | shmHugetlb | 0o600, true, unix.EEXIST, false},
	}
	for _, c := range cases {
		var s State
		b := newFake(t)
		if c.exists {
			id, err := s.Get(b, &owner, 1, c.kind, c.key, 1, ipcCreat|0o640)
			if err != nil || id != 1 {
				t.Fatalf("%s: making the object: %d %v", c.name, id, err)
			}
		}
		id, err := s.Get(b, c.who, 99, c.kind, c.key, 3, c.flg)
		if err != c.wantErr {
			t.Errorf("%s: err %v, want %v", c.name, err, c.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if wantID := map[bool]int64{true: b.next, false: 1}[c.wantNew]; id != wantID {
			t.Errorf("%s: id %d, want %d", c.name, id, wantID)
		}
		o, found := s.Lookup(c.kind, int32(id))
		if !found {
			t.Errorf("%s: no record of %d", c.name, id)
			continue
		}
		if c.wantNew {
			want := Obj{UID: c.who.EUID, GID: c.who.EGID, CUID: c.who.EUID, CGID: c.who.EGID, Mode: c.flg & 0o777, Cpid: 99}
			if c.kind == Sem {
				want.Nsems = 3
			}
			if o != want {
				t.Errorf("%s: record %+v, want %+v", c.name, o, want)
			}
		}
	}
}

// TestGetNativeMode: natively a new object's owner bits are rwx, so that
// kbox's host uid passes the kernel's check; the guest's mode is kbox's.
func TestGetNativeMode(t *testing.T) {
	var s State
	b := newFake(t)
	w := user(10, 20)
	if _, err := s.Get(b, &w, 1, Msg, 5, 0, ipcCreat|0o040); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(b, &w, 1, Sem, 0, 1, 0o000); err != nil {
		t.Fatal(err)
	}
	want := []int64{ipcCreat | ipcExcl | 0o700, 0o700}
	if !slices.Equal(b.gets, want) {
		t.Errorf("the binder's flags %#o, want %#o", b.gets, want)
	}
}

// TestShmPrune: past the threshold, a new segment drops the records of
// those /proc/sysvipc/shm no longer lists.
func TestShmPrune(t *testing.T) {
	var s State
	b := newFake(t)
	s.put(Shm, 5, Obj{})
	s.put(Shm, 6, Obj{})
	s.shmPrune = 1
	b.next = 6
	b.proc = "       key      shmid perms\n         0          5  1700\n         0          7  1700\n"
	w := user(0, 0)
	if _, err := s.Get(b, &w, 1, Shm, 0, 4096, 0o600); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int32]bool{5: true, 6: false, 7: true} {
		if _, found := s.Lookup(Shm, id); found != want {
			t.Errorf("segment %d recorded: %v, want %v", id, found, want)
		}
	}
	if s.shmPrune != 1024 {
		t.Errorf("threshold %d, want 1024", s.shmPrune)
	}
}

// TestCtl: a removed queue or set is forgotten, a removed segment is not
// (it lives until its last detach); an unknown object is the kernel's.
func TestCtl(t *testing.T) {
	owner, other := user(10, 20), user(30, 31)
	for _, kind := range []Kind{Msg, Sem, Shm} {
		var s State
		s.put(kind, 1, Obj{UID: 10, GID: 20, CUID: 10, CGID: 20, Mode: 0o600})
		if en := s.Ctl(&other, kind, 1, 0, ipcRmid, 0); en != unix.EPERM {
			t.Errorf("kind %d: another's IPC_RMID: %v, want EPERM", kind, en)
		}
		if en := s.Ctl(&other, kind, 2, 0, ipcRmid, 0); en != 0 {
			t.Errorf("kind %d: an unknown object's IPC_RMID: %v, want the kernel's", kind, en)
		}
		if en := s.Ctl(&owner, kind, 1, 0, ipcRmid, 0); en != 0 {
			t.Errorf("kind %d: the owner's IPC_RMID: %v", kind, en)
		}
		if _, found := s.Lookup(kind, 1); found != (kind == Shm) {
			t.Errorf("kind %d: recorded after IPC_RMID: %v", kind, found)
		}
	}
}

// TestStat: IPC_STAT and *_STAT check read permission (but *_STAT_ANY)
// and show the guest's view; an unknown object's IPC_STAT is the kernel's.
func TestStat(t *testing.T) {
	owner, other := user(10, 20), user(30, 31)
	priv := Obj{UID: 10, GID: 20, CUID: 11, CGID: 21, Mode: 0o600, Cpid: 42}
	cases := []struct {
		name    string
		who     *Who
		id, cmd int32
		wantErr error
		wantDS  bool
	}{
		{"IPC_STAT by the owner", &owner, 3, ipcStat, nil, true},
		{"IPC_STAT by another", &other, 3, ipcStat, unix.EACCES, false},
		{"IPC_STAT of an unknown id", &other, 4, ipcStat, nil, false},
		{"SHM_STAT by the owner", &owner, 0, shmStat, nil, true},
		{"SHM_STAT by another", &other, 0, shmStat, unix.EACCES, false},
		{"SHM_STAT_ANY by another", &other, 0, shmStatAny, nil, true},
	}
	for _, c := range cases {
		var s State
		s.put(Shm, 3, priv)
		b := newFake(t)
		b.ds = make([]byte, DSSize(Shm))
		binary.NativeEndian.PutUint32(b.ds[permMode:], 0o1700)
		b.index = 3
		ret, ds, err := s.Stat(b, c.who, Shm, c.id, c.cmd)
		if err != c.wantErr || (ds != nil) != c.wantDS {
			t.Errorf("%s: ds %v err %v, want ds %v err %v", c.name, ds != nil, err, c.wantDS, c.wantErr)
			continue
		}
		if ds == nil {
			continue
		}
		if c.cmd != ipcStat && ret != 3 {
			t.Errorf("%s: returned %d, want the id 3", c.name, ret)
		}
		ne := binary.NativeEndian
		got := Obj{UID: ne.Uint32(ds[permUID:]), GID: ne.Uint32(ds[permGID:]), CUID: ne.Uint32(ds[permCUID:]),
			CGID: ne.Uint32(ds[permCGID:]), Mode: ne.Uint32(ds[permMode:]), Cpid: int32(ne.Uint32(ds[shmCpidAt:]))}
		if want := (Obj{UID: 10, GID: 20, CUID: 11, CGID: 21, Mode: 0o1600, Cpid: 42}); got != want {
			t.Errorf("%s: shows %+v, want %+v", c.name, got, want)
		}
	}
}

// TestSetPerm: IPC_SET by the owner, the creator or CAP_SYS_ADMIN records
// the guest's owner, group and mode, while the binder's object keeps its
// host owner and rwx owner bits; a queue's size beyond msgmnb needs
// CAP_SYS_RESOURCE; -1 is no owner.
func TestSetPerm(t *testing.T) {
	owner, other := user(10, 20), user(30, 31)
	cases := []struct {
		name       string
		who        Who
		kind       Kind
		id         int32
		uid, gid   uint32
		mode       uint32
		qbytes     uint64
		wantErr    error
		wantRecord bool
	}{
		{"owner gives it away", owner, Sem, 1, 65534, 65534, 0o644, 0, nil, true},
		{"creator changes the mode", user(11, 1), Shm, 1, 10, 20, 0o400, 0, nil, true},
		{"CAP_SYS_ADMIN", Who{EUID: 30, Caps: 1 << capSysAdmin}, Sem, 1, 1, 1, 0o600, 0, nil, true},
		{"another: EPERM", other, Sem, 1, 30, 31, 0o666, 0, unix.EPERM, false},
		{"unknown object: the kernel's", other, Sem, 2, 30, 31, 0o666, 0, nil, false},
		{"uid -1: EINVAL", owner, Shm, 1, noID, 20, 0o600, 0, unix.EINVAL, false},
		{"gid -1: EINVAL", owner, Shm, 1, 10, noID, 0o600, 0, unix.EINVAL, false},
		{"queue within msgmnb", owner, Msg, 1, 10, 20, 0o600, 100, nil, true},
		{"queue beyond msgmnb: EPERM", owner, Msg, 1, 10, 20, 0o600, 101, unix.EPERM, false},
		{"beyond msgmnb with CAP_SYS_RESOURCE", Who{EUID: 10, Caps: 1 << capSysResource}, Msg, 1, 10, 20, 0o600, 101, nil, true},
	}
	for _, c := range cases {
		var s State
		orig := Obj{UID: 10, GID: 20, CUID: 11, CGID: 21, Mode: 0o600, Nsems: 2}
		s.put(c.kind, 1, orig)
		b := newFake(t)
		b.msgmnb = 100
		b.ds = make([]byte, DSSize(c.kind))
		ne := binary.NativeEndian
		ne.PutUint32(b.ds[permUID:], 1000) // the host's owner and group
		ne.PutUint32(b.ds[permGID:], 1001)
		in := make([]byte, DSSize(c.kind))
		ne.PutUint32(in[permUID:], c.uid)
		ne.PutUint32(in[permGID:], c.gid)
		ne.PutUint32(in[permMode:], c.mode)
		if c.kind == Msg {
			ne.PutUint64(in[msgQbytesAt:], c.qbytes)
		}
		done, err := s.SetPerm(b, &c.who, c.kind, c.id, in)
		if err != c.wantErr || done != c.wantRecord {
			t.Errorf("%s: done %v err %v, want %v %v", c.name, done, err, c.wantRecord, c.wantErr)
			continue
		}
		o, _ := s.Lookup(c.kind, 1)
		if !done {
			if o != orig || b.set != nil {
				t.Errorf("%s: changed %+v, binder's IPC_SET %v", c.name, o, b.set != nil)
			}
			continue
		}
		if want := (Obj{UID: c.uid, GID: c.gid, CUID: 11, CGID: 21, Mode: c.mode, Nsems: 2}); o != want {
			t.Errorf("%s: record %+v, want %+v", c.name, o, want)
		}
		if u, g, m := ne.Uint32(b.set[permUID:]), ne.Uint32(b.set[permGID:]), ne.Uint32(b.set[permMode:]); u != 1000 || g != 1001 || m != c.mode|0o700 {
			t.Errorf("%s: the binder's IPC_SET has %d %d %#o, want 1000 1001 %#o", c.name, u, g, m, c.mode|0o700)
		}
		if c.kind == Msg && msgQbytes(b.set) != c.qbytes {
			t.Errorf("%s: the binder's msg_qbytes %d, want %d", c.name, msgQbytes(b.set), c.qbytes)
		}
	}
}

// TestLimit: IPC_INFO's fields, by the binder.
func TestLimit(t *testing.T) {
	b := newFake(t)
	b.msgmnb = 16384
	if v, ok := Limit(b, Msg, msgmnbAt); !ok || v != 16384 {
		t.Errorf("msgmnb %d %v, want 16384", v, ok)
	}
}
