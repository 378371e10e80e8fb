package loopdev

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestDevice: the loop control device and the loop block devices are
// LKL's to open; every other device (LKL's virtio disks, a misc device
// beside loop-control, a character device with the loop major) is not.
func TestDevice(t *testing.T) {
	cases := []struct {
		name string
		mode uint32
		rdev uint64
		want bool
	}{
		{"loop-control", unix.S_IFCHR | 0o600, unix.Mkdev(10, 237), true},
		{"loop0", unix.S_IFBLK | 0o600, unix.Mkdev(7, 0), true},
		{"loop1000", unix.S_IFBLK | 0o600, unix.Mkdev(7, 1000), true},
		{"a virtio disk", unix.S_IFBLK | 0o600, unix.Mkdev(254, 0), false},
		{"another misc device", unix.S_IFCHR | 0o600, unix.Mkdev(10, 236), false},
		{"loop-control's number as a block device", unix.S_IFBLK | 0o600, unix.Mkdev(10, 237), false},
		{"a character device of the loop major", unix.S_IFCHR | 0o600, unix.Mkdev(7, 0), false},
		{"a regular file", unix.S_IFREG | 0o600, unix.Mkdev(7, 0), false},
	}
	for _, c := range cases {
		if got := Device(c.mode, c.rdev); got != c.want {
			t.Errorf("%s: Device = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLookup: each command on its kind of device, with the bytes copied
// in or out and the fd it carries; a command unknown there gets the
// driver's answer (ENOSYS on loop-control, EINVAL on a loop device).
func TestLookup(t *testing.T) {
	cases := []struct {
		name string
		cmd  uint32
		ctl  bool
		want Cmd
		en   unix.Errno
	}{
		{"LOOP_SET_FD", SetFd, false, Cmd{Fd: true}, 0},
		{"LOOP_CHANGE_FD", ChangeFd, false, Cmd{Fd: true}, 0},
		{"LOOP_CLR_FD", ClrFd, false, Cmd{}, 0},
		{"LOOP_SET_STATUS64", setStatus64, false, Cmd{In: 232}, 0},
		{"LOOP_GET_STATUS64", GetStatus64, false, Cmd{Out: 232}, 0},
		{"LOOP_SET_STATUS", setStatus, false, Cmd{In: oldLoopInfo.size, Old: true}, 0},
		{"LOOP_GET_STATUS", GetStatus, false, Cmd{Out: 232, Old: true}, 0},
		{"LOOP_CONFIGURE", Configure, false, Cmd{In: 304}, 0},
		{"BLKGETSIZE64", unix.BLKGETSIZE64, false, Cmd{Out: 8}, 0},
		{"BLKROSET", unix.BLKROSET, false, Cmd{In: 4}, 0},
		{"BLKDISCARD", unix.BLKDISCARD, false, Cmd{In: 16}, 0},
		{"BLKSECTGET", unix.BLKSECTGET, false, Cmd{Out: 2}, 0},
		{"BLKGETDISKSEQ", 0x80081280, false, Cmd{Out: 8}, 0},
		{"LOOP_CTL_ADD", CtlAdd, true, Cmd{Ctl: true}, 0},
		{"LOOP_CTL_REMOVE", CtlRemove, true, Cmd{Ctl: true}, 0},
		{"LOOP_CTL_GET_FREE", CtlGetFree, true, Cmd{Ctl: true}, 0},
		{"LOOP_CTL_ADD on a loop device", CtlAdd, false, Cmd{}, unix.EINVAL},
		{"LOOP_SET_FD on loop-control", SetFd, true, Cmd{}, unix.ENOSYS},
		{"BLKGETSIZE64 on loop-control", unix.BLKGETSIZE64, true, Cmd{}, unix.ENOSYS},
		{"BLKPG (points further)", unix.BLKPG, false, Cmd{}, unix.EINVAL},
		{"TCGETS on a loop device", unix.TCGETS, false, Cmd{}, unix.EINVAL},
		{"an unknown command on loop-control", 0x4C8F, true, Cmd{}, unix.ENOSYS},
	}
	for _, c := range cases {
		got, en := Lookup(c.cmd, c.ctl)
		if got != c.want || en != c.en {
			t.Errorf("%s: Lookup = %+v %v, want %+v %v", c.name, got, en, c.want, c.en)
		}
	}
}

// TestLKLCmd: the old status commands go to LKL as their 64-bit forms;
// every other command as it is.
func TestLKLCmd(t *testing.T) {
	for cmd, want := range map[uint32]uint32{setStatus: setStatus64, GetStatus: GetStatus64,
		setStatus64: setStatus64, GetStatus64: GetStatus64, SetFd: SetFd, unix.BLKGETSIZE64: unix.BLKGETSIZE64} {
		if got := LKLCmd(cmd); got != want {
			t.Errorf("LKLCmd(%#x) = %#x, want %#x", cmd, got, want)
		}
	}
}

// TestFromOldOut: what the guest's struct loop_info carries lands in
// loop_info64's fields, the offset sign-extended, the rest 0.
func TestFromOldOut(t *testing.T) {
	l := oldLoopInfo
	old := make([]byte, l.size)
	for i := range old {
		old[i] = 0xaa // fields not carried must not leak
	}
	put := func(off, size int, v uint64) {
		for i := 0; i < size; i++ {
			old[off+i] = byte(v >> (8 * i))
		}
	}
	put(0, 4, 5)
	put(l.device, l.devSize, 0x803)
	put(l.inode, 8, 12)
	put(l.rdevice, l.devSize, 0x700)
	put(l.offset, 4, 0xfffffe00) // -512
	put(l.flags, 4, 0x0c)
	copy(old[l.name:l.name+loNameSize], append([]byte("/tmp/disk.img"), make([]byte, loNameSize)...))
	b := FromOld(old)
	get := func(off, size int) uint64 {
		var v uint64
		for i := 0; i < size; i++ {
			v |= uint64(b[off+i]) << (8 * i)
		}
		return v
	}
	for _, f := range []struct {
		name      string
		off, size int
		want      uint64
	}{
		{"lo_number", li64Number, 4, 5}, {"lo_device", li64Device, 8, 0x803}, {"lo_inode", li64Inode, 8, 12},
		{"lo_rdevice", li64Rdevice, 8, 0x700}, {"lo_offset", li64Offset, 8, ^uint64(511)}, {"lo_flags", li64Flags, 4, 0x0c},
		{"lo_sizelimit", 32, 8, 0}, {"lo_encrypt_type", 44, 4, 0}, {"lo_encrypt_key_size", 48, 4, 0},
	} {
		if got := get(f.off, f.size); got != f.want {
			t.Errorf("%s = %#x, want %#x", f.name, got, f.want)
		}
	}
	if name := string(b[li64FileName : li64FileName+13]); name != "/tmp/disk.img" || b[li64FileName+13] != 0 {
		t.Errorf("lo_file_name %q", b[li64FileName:li64FileName+loNameSize])
	}
	for i := li64FileName + loNameSize; i < len(b); i++ {
		if b[i] != 0 {
			t.Fatalf("byte %d of loop_info64 is %#x, want 0", i, b[i])
		}
	}
}

// TestGlueDecisions: the loop_config's fd, the commands that bind a
// backing file, /dev/loopN, and the mount sources that may be devices.
func TestGlueDecisions(t *testing.T) {
	cfg := make([]byte, sizeLoopConfig)
	SetConfigFd(cfg, 0x01020304)
	if ConfigFd(cfg) != 0x01020304 || cfg[0] != 4 || cfg[3] != 1 {
		t.Errorf("loop_config fd: % x, ConfigFd %#x", cfg[:4], ConfigFd(cfg))
	}
	for cmd, want := range map[uint32]bool{SetFd: true, Configure: true, ChangeFd: true, ClrFd: false, CtlAdd: false, setStatus64: false} {
		if Binds(cmd) != want {
			t.Errorf("Binds(%#x) = %v", cmd, !want)
		}
	}
	if p, rdev, ok := Node(3); !ok || p != "/dev/loop3" || rdev != unix.Mkdev(7, 3) {
		t.Errorf("Node(3) = %q %d:%d %v", p, unix.Major(rdev), unix.Minor(rdev), ok)
	}
	for _, n := range []int{-1, 1 << 20} {
		if _, _, ok := Node(n); ok {
			t.Errorf("Node(%d) ok", n)
		}
	}
	for _, c := range []struct {
		src   string
		flags uintptr
		want  bool
	}{
		{"/dev/loop0", 0, true},
		{"img/../dev/loop0", unix.MS_RDONLY, true},
		{"none", 0, false},
		{"tmpfs", 0, false},
		{"", 0, false},
		{"/dev/loop0", unix.MS_BIND, false},
		{"/dev/loop0", unix.MS_MOVE, false},
		{"/dev/loop0", unix.MS_REMOUNT, false},
	} {
		if MaySourceDevice(c.src, c.flags) != c.want {
			t.Errorf("MaySourceDevice(%q, %#x) = %v", c.src, c.flags, !c.want)
		}
	}
}
