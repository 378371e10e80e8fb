package sessiondir

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// SparseCopy copies src to a new file at dst: a reflink (FICLONE) where
// the filesystem shares blocks, else the data extents only (SEEK_DATA /
// SEEK_HOLE with copy_file_range), so holes stay holes.
func SparseCopy(src *os.File, dst string) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	if unix.IoctlFileClone(int(out.Fd()), int(src.Fd())) == nil {
		return nil
	}
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if err := out.Truncate(size); err != nil {
		return err
	}
	sfd, dfd := int(src.Fd()), int(out.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(sfd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // only a hole is left
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(sfd, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		for p := data; p < hole; {
			in, o := p, p
			n, err := unix.CopyFileRange(sfd, &in, dfd, &o, int(min(hole-p, 1<<30)), 0)
			if err != nil {
				return err
			}
			if n == 0 {
				return io.ErrUnexpectedEOF
			}
			p += int64(n)
		}
		off = hole
	}
	return out.Sync()
}

// CopyRanges copies each [off, end) of src to dst at the same offset.
func CopyRanges(src, dst *os.File, ranges [][2]int64) error {
	for _, r := range ranges {
		for p := r[0]; p < r[1]; {
			in, o := p, p
			n, err := unix.CopyFileRange(int(src.Fd()), &in, int(dst.Fd()), &o, int(min(r[1]-p, 1<<30)), 0)
			if err != nil {
				return err
			}
			if n == 0 {
				return io.ErrUnexpectedEOF
			}
			p += int64(n)
		}
	}
	return nil
}
