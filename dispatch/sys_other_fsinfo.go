// The other family's obsolete filesystem queries, sysfs(2) and ustat(2)
// (x86_64 only; FamOther in table.go): answered from the guest's kernel,
// LKL, whose filesystem types and mounts the guest has, never the host's.

package dispatch

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// fsTypes lists LKL's filesystem types in its registration order, as its
// /proc/filesystems does and sysfs(2) numbers them.
func (e *Engine) fsTypes() ([]string, unix.Errno) {
	if !e.Opt.HasKernelProc {
		return nil, unix.ENOSYS
	}
	b, err := lkl.ReadFileAt(e.Opt.KernelProc, "filesystems")
	if err != nil {
		return nil, unix.ENOSYS
	}
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[len(f)-1])
		}
	}
	return names, 0
}

// sysSysfs serves sysfs(2), the filesystem type index.
func sysSysfs(e *Engine, r *Request) Result {
	// Option 1 gives a type's index, 2 the name of an index, 3 the number of
	// types; anything else is EINVAL.
	if r.Args[0] < 1 || r.Args[0] > 3 {
		return errno(unix.EINVAL, Emulated)
	}
	names, en := e.fsTypes()
	if en != 0 {
		return errno(en, Emulated)
	}
	switch r.Args[0] {
	case 1:
		name, en := readPath(r, r.Args[1])
		if en != 0 {
			return errno(en, Emulated)
		}
		for i, n := range names {
			if n == name {
				return ok(int64(i), Emulated)
			}
		}
		return errno(unix.EINVAL, Emulated)
	case 2:
		i := r.Args[1]
		if i >= uint64(len(names)) {
			return errno(unix.EINVAL, Emulated)
		}
		if r.G.Write(r.Args[2], cpath(names[i])) != nil {
			return errno(unix.EFAULT, Emulated)
		}
		return ok(0, Emulated)
	}
	return ok(int64(len(names)), Emulated)
}

// sysUstat serves ustat(2) from the LKL mount of the device.
func sysUstat(e *Engine, r *Request) Result {
	// The free blocks and inodes of the device's LKL mount (struct ustat,
	// its names empty); a device mounted nowhere the guest can see is
	// EINVAL.
	if !e.Opt.HasKernelProc {
		return errno(unix.ENOSYS, Emulated)
	}
	dev := uint32(r.Args[0]) // the kernel's new_decode_dev
	want := strconv.Itoa(int((dev&0xfff00)>>8)) + ":" + strconv.Itoa(int((dev&0xff)|((dev>>12)&0xfff00)))
	b, err := lkl.ReadFileAt(e.Opt.KernelProc, "self/mountinfo")
	if err != nil {
		return errno(unix.EINVAL, Emulated)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || f[2] != want {
			continue
		}
		var sf unix.Statfs_t
		if _, le := lklPath(lkl.SysStatfs, 0, unmangle(f[4]), [6]uintptr{0, lkl.PtrOf(&sf)}); le != 0 {
			return errno(le, LKL)
		}
		// struct ustat: int f_tfree, unsigned long f_tinode, char
		// f_fname[6], f_fpack[6], padded to 32 bytes.
		var u [32]byte
		binary.NativeEndian.PutUint32(u[0:], uint32(sf.Bfree))
		binary.NativeEndian.PutUint64(u[8:], sf.Ffree)
		if r.G.Write(r.Args[1], u[:]) != nil {
			return errno(unix.EFAULT, Emulated)
		}
		return ok(0, Emulated)
	}
	return errno(unix.EINVAL, Emulated)
}

// unmangle undoes mountinfo's octal escapes (\040 for a space, ...).
func unmangle(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
