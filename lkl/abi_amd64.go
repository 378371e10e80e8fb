package lkl

import "golang.org/x/sys/unix"

// ToHost converts LKL's asm-generic stat to x86_64's struct stat, field by
// field (the layouts differ in size, order and field widths).
func (s *Stat64) ToHost(out *unix.Stat_t) {
	*out = unix.Stat_t{
		Dev:     s.Dev,
		Ino:     s.Ino,
		Nlink:   uint64(s.Nlink),
		Mode:    s.Mode,
		Uid:     s.Uid,
		Gid:     s.Gid,
		Rdev:    s.Rdev,
		Size:    s.Size,
		Blksize: int64(s.Blksize),
		Blocks:  s.Blocks,
		Atim:    unix.Timespec{Sec: s.Atime, Nsec: int64(s.AtimeNsec)},
		Mtim:    unix.Timespec{Sec: s.Mtime, Nsec: int64(s.MtimeNsec)},
		Ctim:    unix.Timespec{Sec: s.Ctime, Nsec: int64(s.CtimeNsec)},
	}
}

// OpenFlagsToLKL converts host open flags to LKL's: x86_64 uses the
// asm-generic values already.
func OpenFlagsToLKL(f uint32) uint32 { return f }

// OpenFlagsFromLKL converts LKL open flags to the host's.
func OpenFlagsFromLKL(f uint32) uint32 { return f }
