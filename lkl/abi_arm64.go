package lkl

import "golang.org/x/sys/unix"

// ToHost converts LKL's stat to arm64's struct stat. Both are the
// asm-generic layout; the copy is still field by field so that a change on
// either side fails to compile rather than corrupting data.
func (s *Stat64) ToHost(out *unix.Stat_t) {
	*out = unix.Stat_t{
		Dev:     s.Dev,
		Ino:     s.Ino,
		Nlink:   s.Nlink,
		Mode:    s.Mode,
		Uid:     s.Uid,
		Gid:     s.Gid,
		Rdev:    s.Rdev,
		Size:    s.Size,
		Blksize: s.Blksize,
		Blocks:  s.Blocks,
		Atim:    unix.Timespec{Sec: s.Atime, Nsec: int64(s.AtimeNsec)},
		Mtim:    unix.Timespec{Sec: s.Mtime, Nsec: int64(s.MtimeNsec)},
		Ctim:    unix.Timespec{Sec: s.Ctime, Nsec: int64(s.CtimeNsec)},
	}
}

// OpenFlagsToLKL converts arm64 open flags to LKL's asm-generic values.
func OpenFlagsToLKL(f uint32) uint32 { return OpenFlagsArm64ToLKL(f) }

// OpenFlagsFromLKL converts LKL open flags to arm64's.
func OpenFlagsFromLKL(f uint32) uint32 { return OpenFlagsLKLToArm64(f) }
