package fdtable

import (
	"encoding/binary"
	"sync"

	"golang.org/x/sys/unix"
)

// Dirent is one entry of a generated directory.
type Dirent struct {
	Ino  uint64
	Type uint8 // DT_DIR, DT_REG, DT_LNK
	Name string
}

// Listing is a directory whose entries kbox generates rather than LKL or
// the host: the guest's /proc, /proc/PID/fd, ... (package procfs).
// Gen makes the entries when the directory is opened and again when it is
// rewound (lseek to 0), as a rewinddir shows what exists now. The position
// is an index into the entries; getdents64 gives each record the index of
// the next as its d_off, so telldir and seekdir work.
type Listing struct {
	Gen func() []Dirent

	mu   sync.Mutex
	ents []Dirent
	pos  int
}

// NewListing makes a listing whose entries gen makes at the first read
// (so that a listing of a process's fds shows the fd it is read through,
// as on Linux).
func NewListing(gen func() []Dirent) *Listing {
	return &Listing{Gen: gen}
}

// direntSize is the size of the linux_dirent64 record for a name.
func direntSize(name string) int { return (19 + len(name) + 1 + 7) &^ 7 }

// Read fills buf with linux_dirent64 records from the position on and
// returns the bytes used: 0 at the end, EINVAL when buf cannot hold the
// next record (as getdents64 answers).
func (l *Listing) Read(buf []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ents == nil && l.Gen != nil {
		l.ents = l.Gen()
	}
	n := 0
	for l.pos < len(l.ents) {
		d := l.ents[l.pos]
		size := direntSize(d.Name)
		if n+size > len(buf) {
			if n == 0 {
				return 0, unix.EINVAL
			}
			break
		}
		rec := buf[n : n+size]
		clear(rec)
		binary.NativeEndian.PutUint64(rec[0:], d.Ino)
		binary.NativeEndian.PutUint64(rec[8:], uint64(l.pos+1))
		binary.NativeEndian.PutUint16(rec[16:], uint16(size))
		rec[18] = d.Type
		copy(rec[19:], d.Name)
		n += size
		l.pos++
	}
	return n, nil
}

// Seek moves the position as lseek(2) on a directory: SEEK_SET to an
// offset a record gave (0 makes the entries again), SEEK_CUR by off.
func (l *Listing) Seek(off int64, whence int) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch whence {
	case unix.SEEK_SET:
	case unix.SEEK_CUR:
		off += int64(l.pos)
	default:
		return 0, unix.EINVAL
	}
	if off < 0 {
		return 0, unix.EINVAL
	}
	if off == 0 {
		l.ents = nil // made again at the next read
	}
	l.pos = int(min(off, 1<<20))
	return off, nil
}

// Unread moves the position back to pos (Pos before a Read) when the
// records read could not be given to the guest.
func (l *Listing) Unread(pos int64) {
	l.mu.Lock()
	l.pos = int(pos)
	l.mu.Unlock()
}

// Pos returns the position.
func (l *Listing) Pos() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.pos)
}
