package scratchfs

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// DefaultMax caps the default size.
	DefaultMax = 8 << 30
	// DefaultMin is the smallest default size, whatever the free space.
	DefaultMin = 64 << 20
)

// Dirs lists the host directories tried for the backing file, in order:
// $TMPDIR alone when it is set (the user chose it), else /var/tmp, then
// /tmp.
func Dirs() []string {
	if d := os.Getenv("TMPDIR"); d != "" {
		return []string{d}
	}
	return []string{"/var/tmp", "/tmp"}
}

// DefaultSize is the size used when none is given: half of the free space
// of the host filesystem (avail bytes), at most DefaultMax and at least
// DefaultMin, in whole blocks.
func DefaultSize(avail uint64) int64 {
	s := int64(min(avail/2, DefaultMax))
	s = max(s, DefaultMin)
	return s &^ (BlockSize - 1)
}

// Backing is a formatted scratch filesystem in an unnamed host file.
type Backing struct {
	File *os.File
	// Dir is the host directory whose filesystem holds the file.
	Dir string
	// Size is the file's length; Geometry says how much of it the
	// filesystem uses.
	Size     int64
	Geometry Geometry
	// Unlinked says the file was made by name and unlinked at once,
	// because the filesystem lacks O_TMPFILE.
	Unlinked bool
	// Avail is the free space of the host filesystem holding the file
	// when it was made. If Size is larger, writes to the disk can fail
	// once the host filesystem is full.
	Avail int64
}

// Close closes the backing file; the host frees its blocks then.
func (b *Backing) Close() error {
	if b == nil || b.File == nil {
		return nil
	}
	err := b.File.Close()
	b.File = nil
	return err
}

// Create makes and formats a backing file of size bytes (0: DefaultSize of
// the directory's filesystem) in the first of dirs that takes one. The
// file never has a name that outlives this call, so nothing is left on the
// host when kbox exits, even by SIGKILL.
func Create(dirs []string, size int64) (*Backing, error) {
	if size != 0 {
		if _, err := NewGeometry(size); err != nil {
			return nil, err
		}
	}
	var errs []string
	for _, dir := range dirs {
		b, err := createIn(dir, size)
		if err == nil {
			return b, nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", dir, err))
	}
	if len(errs) == 0 {
		return nil, errors.New("scratchfs: no directory for the backing file")
	}
	return nil, fmt.Errorf("cannot make a backing file in %s", strings.Join(errs, "; "))
}

func createIn(dir string, size int64) (*Backing, error) {
	f, unlinked, err := openUnnamed(dir)
	if err != nil {
		return nil, err
	}
	b := &Backing{File: f, Dir: dir, Unlinked: unlinked}
	if err := b.format(size); err != nil {
		f.Close()
		return nil, err
	}
	return b, nil
}

func (b *Backing) format(size int64) error {
	fd := int(b.File.Fd())
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return fmt.Errorf("statfs: %w", err)
	}
	b.Avail = int64(min(st.Bavail*uint64(st.Bsize), 1<<62))
	if size == 0 {
		size = DefaultSize(uint64(b.Avail))
	}
	g, err := NewGeometry(size)
	if err != nil {
		return err
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		return fmt.Errorf("set length %d: %w", size, err)
	}
	var p Params
	p.Now = Now()
	p.Label = "kbox-scratch"
	rand.Read(p.UUID[:])
	rand.Read(p.HashSeed[:])
	p.UUID[6] = p.UUID[6]&0x0F | 0x40 // version 4 (random)
	p.UUID[8] = p.UUID[8]&0x3F | 0x80 // RFC 4122 variant
	if err := Format(b.File, g, p); err != nil {
		return err
	}
	b.Size, b.Geometry = size, g
	return nil
}

// openUnnamed opens a new, empty file in dir that has no name: with
// O_TMPFILE, or where the filesystem lacks it, created under a random name
// and unlinked at once.
func openUnnamed(dir string) (*os.File, bool, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), filepath.Join(dir, "(kbox scratch)")), false, nil
	}
	// EOPNOTSUPP: the filesystem has no O_TMPFILE; EISDIR or EINVAL: the
	// kernel does not know the flag.
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return nil, false, err
	}
	return openUnlinked(dir)
}

// openUnlinked creates a file under a fresh random name in dir and unlinks
// it at once. Only a SIGKILL between the two calls could leave it behind.
func openUnlinked(dir string) (*os.File, bool, error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	name := filepath.Join(dir, fmt.Sprintf(".kbox-scratch-%d-%x", os.Getpid(), rnd))
	fd, err := unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := unix.Unlink(name); err != nil {
		unix.Close(fd)
		return nil, false, fmt.Errorf("unlink %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name+" (deleted)"), true, nil
}
