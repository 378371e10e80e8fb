package shadowfd

import (
	"hash/maphash"

	"golang.org/x/sys/unix"
)

// Stores through a MAP_SHARED mapping of a memfd change neither its mtime
// nor its ctime, so a shadow opened read-write (the only kind that can be
// mapped writable and shared) keeps a hash of its content as of its last
// write-back: WriteBack compares it when the change time says nothing
// changed, so mapped stores are written back (on msync, close, exit)
// while an unchanged, possibly stale, shadow still never overwrites a
// newer version of its file.

var sumSeed = maphash.MakeSeed()

func newSum() *maphash.Hash {
	var h maphash.Hash
	h.SetSeed(sumSeed)
	return &h
}

// sumOf hashes the first size bytes of fd.
func sumOf(fd int, size int64) (uint64, error) {
	h := newSum()
	buf := make([]byte, 256<<10)
	for off := int64(0); off < size; {
		n, err := unix.Pread(fd, buf, off)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			break
		}
		h.Write(buf[:n])
		off += int64(n)
	}
	return h.Sum64(), nil
}

// mappedClean reports that a read-write shadow whose change time is
// unchanged also has the content of its last write-back.
func (w *Writable) mappedClean(size int64) bool {
	if !w.rdwr {
		return true
	}
	s, err := sumOf(w.MemFd, size)
	return err == nil && s == w.sum && size == w.sumSize
}
