// Package shadowfd mirrors regular files of the image into host memfds, so
// that a guest can read, mmap and dynamically load them natively.
//
// Read-only opens get a sealed point-in-time copy; a small cache keyed by
// inode, size and change time shares one copy between opens (each open still
// gets its own file description, so offsets are not shared). Writable opens
// get an unsealed copy that is written back to LKL when the guest closes it
// or exits. Files above MaxSize are not shadowed: the caller serves them
// through the supervisor instead (a virtual fd), so memory stays bounded.
package shadowfd

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// DefaultMaxSize is the largest file shadowed into memory.
const DefaultMaxSize = 64 << 20

const cacheSize = 64

type key struct {
	dev, ino      uint64
	size          int64
	ctime, ctimeN int64
}

// Writable is a writable shadow and the LKL file it writes back to.
type Writable struct {
	MemFd int
	LKLFd int
	Path  string
	// written is the memfd's change time at the last write-back: a shadow
	// unchanged since then is not written again, so a stale shadow never
	// overwrites a newer one of the same file.
	written unix.Timespec
	// rdwr shadows may be mapped shared and writable: sum and sumSize
	// describe the content at the last write-back (mapped.go).
	rdwr    bool
	sum     uint64
	sumSize int64
}

// Manager owns the shadows.
type Manager struct {
	MaxSize int64

	mu       sync.Mutex
	cache    map[key]int // sealed memfd per file version
	order    []key
	writable map[uint64]*Writable // by memfd inode
	// nwritable is len(writable), readable without the lock.
	nwritable atomic.Int32
	// inotify and watches serve close events (closewatch.go).
	inotify int
	watches map[int32]*Writable
	// writeBacks counts write-backs: each changes an LKL file.
	writeBacks atomic.Uint64
	// roPaths names the LKL file of each read-only copy, by the memfd's
	// inode, for Identity; memDev is the memfds' device (0: none yet).
	roPaths map[uint64]string
	roOrder []uint64
	memDev  uint64
}

// maxROPaths bounds roPaths: the oldest copies' names are forgotten first.
const maxROPaths = 4096

// New returns a Manager.
func New() *Manager {
	return &Manager{MaxSize: DefaultMaxSize, cache: map[key]int{}, writable: map[uint64]*Writable{}}
}

func keyOf(st *lkl.Stat64) key {
	return key{st.Dev, st.Ino, st.Size, st.Ctime, int64(st.CtimeNsec)}
}

// Fits reports whether a file of this size may be shadowed.
func (m *Manager) Fits(size int64) bool { return size <= m.MaxSize }

func fill(memfd, lklfd int, size int64) error {
	buf := make([]byte, 256<<10)
	var off int64
	for off < size {
		n, e := lkl.Syscall6(lkl.SysPread64, uintptr(lklfd), uintptr(ptr(buf)), uintptr(len(buf)), uintptr(off), 0, 0)
		if e != 0 {
			return e
		}
		if n == 0 {
			break
		}
		if _, err := unix.Pwrite(memfd, buf[:n], off); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// procFd is an fd of /proc/self/fd, opened once: reopening a memfd through
// it skips the lookup of /proc/self/fd on every open.
var procFd struct {
	once sync.Once
	fd   int
}

// reopen returns a new file description of memfd (its own offset, unlike a
// dup). It does not allocate.
func reopen(memfd, flags int) (int, error) {
	procFd.once.Do(func() {
		fd, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			fd = -1
		}
		procFd.fd = fd
	})
	if procFd.fd < 0 {
		return unix.Open("/proc/self/fd/"+strconv.Itoa(memfd), flags|unix.O_CLOEXEC, 0)
	}
	var name [24]byte
	b := strconv.AppendInt(name[:0], int64(memfd), 10)
	name[len(b)] = 0
	return openat(procFd.fd, &name[0], flags|unix.O_CLOEXEC)
}

// OpenCached returns a new host fd of the sealed copy of the file whose LKL
// stat is st, if the cache holds that version; ok is false otherwise. It
// lets a read-only open skip opening the file in LKL.
func (m *Manager) OpenCached(st *lkl.Stat64) (fd int, ok bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	memfd, ok := m.cache[keyOf(st)]
	if !ok {
		return -1, false, nil
	}
	fd, err = reopen(memfd, unix.O_RDONLY)
	return fd, true, err
}

// OpenReadOnly returns a new host fd holding a sealed copy of the LKL file
// lklfd (whose stat is st). The caller owns the returned fd.
func (m *Manager) OpenReadOnly(lklfd int, st *lkl.Stat64, name string) (int, error) {
	k := keyOf(st)
	m.mu.Lock()
	memfd, ok := m.cache[k]
	m.mu.Unlock()
	if !ok {
		var err error
		memfd, err = unix.MemfdCreate("kbox-ro:"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			return -1, err
		}
		if err := fill(memfd, lklfd, st.Size); err != nil {
			unix.Close(memfd)
			return -1, err
		}
		unix.FcntlInt(uintptr(memfd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
		var ms unix.Stat_t
		unix.Fstat(memfd, &ms)
		m.mu.Lock()
		m.rememberRO(&ms, name)
		if old, dup := m.cache[k]; dup {
			unix.Close(memfd)
			memfd = old
		} else {
			m.cache[k] = memfd
			m.order = append(m.order, k)
			if len(m.order) > cacheSize {
				ev := m.order[0]
				m.order = m.order[1:]
				unix.Close(m.cache[ev])
				delete(m.cache, ev)
			}
		}
		m.mu.Unlock()
	}
	return reopen(memfd, unix.O_RDONLY)
}

// Invalidate drops cached copies of an inode after a write.
func (m *Manager) Invalidate(dev, ino uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 0; i < len(m.order); i++ {
		k := m.order[i]
		if k.dev == dev && k.ino == ino {
			unix.Close(m.cache[k])
			delete(m.cache, k)
			m.order = append(m.order[:i], m.order[i+1:]...)
			i--
		}
	}
}

// OpenWritable returns a host fd of an unsealed copy of the LKL file lklfd,
// registered for write-back. The Manager keeps lklfd open for write-back.
func (m *Manager) OpenWritable(lklfd int, size int64, path string, flags int) (int, error) {
	memfd, err := unix.MemfdCreate("kbox-rw:"+path, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, err
	}
	if err := fill(memfd, lklfd, size); err != nil {
		unix.Close(memfd)
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(memfd, &st); err != nil {
		unix.Close(memfd)
		return -1, err
	}
	acc := unix.O_RDWR
	if flags&unix.O_ACCMODE == unix.O_WRONLY {
		acc = unix.O_WRONLY
	}
	fd, err := reopen(memfd, acc|flags&unix.O_APPEND)
	if err != nil {
		unix.Close(memfd)
		return -1, err
	}
	w := &Writable{MemFd: memfd, LKLFd: lklfd, Path: path, written: st.Ctim}
	if acc == unix.O_RDWR {
		w.rdwr, w.sumSize = true, size
		if w.sum, err = sumOf(memfd, size); err != nil {
			unix.Close(fd)
			unix.Close(memfd)
			return -1, err
		}
	}
	m.mu.Lock()
	m.writable[st.Ino] = w
	m.nwritable.Store(int32(len(m.writable)))
	err = m.watch(w)
	m.mu.Unlock()
	if err != nil {
		unix.Close(fd) // not served without its close events
		return -1, err
	}
	return fd, nil
}

// HasWritable reports whether any writable shadow exists (a cheap check
// before identifying a closed fd).
func (m *Manager) HasWritable() bool { return m.nwritable.Load() > 0 }

// Lookup returns the writable shadow with memfd inode ino.
func (m *Manager) Lookup(ino uint64) *Writable {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writable[ino]
}

func (m *Manager) rememberRO(ms *unix.Stat_t, name string) {
	if m.roPaths == nil {
		m.roPaths = map[uint64]string{}
	}
	m.memDev = ms.Dev
	if _, ok := m.roPaths[ms.Ino]; !ok {
		m.roOrder = append(m.roOrder, ms.Ino)
		if len(m.roOrder) > maxROPaths {
			delete(m.roPaths, m.roOrder[0])
			m.roOrder = m.roOrder[1:]
		}
	}
	m.roPaths[ms.Ino] = name
}

// Identity tells what LKL file fd of process pid shadows, so that fstat of
// a shadow reports the file's own identity (device, inode, mode, owner,
// times: cp checks that the file it opened is the one it stat'ed) rather
// than the memfd's. A writable shadow gives its LKL fd (lklfd >= 0), a
// read-only copy its LKL path; size is the shadow's own, which is what
// reads see. ok is false for any other fd.
func (m *Manager) Identity(pid, fd int) (lklfd int, path string, size int64, ok bool) {
	m.mu.Lock()
	dev := m.memDev
	m.mu.Unlock()
	if dev == 0 && m.nwritable.Load() == 0 {
		return -1, "", 0, false
	}
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), &st) != nil {
		return -1, "", 0, false
	}
	if w := m.writableOf(&st); w != nil {
		return w.LKLFd, w.Path, st.Size, true
	}
	if st.Dev != dev {
		return -1, "", 0, false
	}
	m.mu.Lock()
	p, ok := m.roPaths[st.Ino]
	m.mu.Unlock()
	return -1, p, st.Size, ok
}

// OfGuestFd returns the writable shadow that fd of process pid is, or nil
// when it is none (a pipe, a terminal, a read-only shadow, a host file).
// The memfd's device is compared too: inode numbers are only unique within
// one filesystem.
func (m *Manager) OfGuestFd(pid, fd int) *Writable {
	if m.nwritable.Load() == 0 {
		return nil
	}
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), &st) != nil {
		return nil
	}
	return m.writableOf(&st)
}

// writableOf returns the writable shadow whose memfd st describes.
func (m *Manager) writableOf(st *unix.Stat_t) *Writable {
	var ms unix.Stat_t
	w := m.Lookup(st.Ino)
	if w == nil || unix.Fstat(w.MemFd, &ms) != nil || ms.Dev != st.Dev || ms.Ino != st.Ino {
		return nil
	}
	return w
}

// WriteBacks returns how many write-backs have run: a change means LKL
// files changed (the dispatch stat cache compares it).
func (m *Manager) WriteBacks() uint64 { return m.writeBacks.Load() }

// WriteBack copies a writable shadow's content to its LKL file.
func (m *Manager) WriteBack(w *Writable) error {
	m.writeBacks.Add(1)
	var st unix.Stat_t
	if err := unix.Fstat(w.MemFd, &st); err != nil {
		return err
	}
	if st.Ctim == w.written && w.mappedClean(st.Size) {
		return nil
	}
	w.written = st.Ctim
	if _, e := lkl.Syscall6(lkl.SysFtruncate, uintptr(w.LKLFd), uintptr(st.Size), 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("write back %s: truncate: %w", w.Path, e)
	}
	buf := make([]byte, 256<<10)
	var off int64
	h := newSum()
	for off < st.Size {
		n, err := unix.Pread(w.MemFd, buf, off)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if _, e := lkl.Syscall6(lkl.SysPwrite64, uintptr(w.LKLFd), uintptr(ptr(buf)), uintptr(n), uintptr(off), 0, 0); e != 0 {
			return fmt.Errorf("write back %s: %w", w.Path, e)
		}
		h.Write(buf[:n])
		off += int64(n)
	}
	// The hash of what was written: a store racing this write-back is
	// written next time.
	w.sum, w.sumSize = h.Sum64(), st.Size
	// Read-only copies keyed by the old change time may survive a
	// write-back in the same clock tick: drop them.
	if lst, err := lkl.Fstat(w.LKLFd); err == nil {
		m.Invalidate(lst.Dev, lst.Ino)
	}
	return nil
}

// WriteBackAll writes every writable shadow back (kbox exit).
func (m *Manager) WriteBackAll() error {
	m.mu.Lock()
	ws := make([]*Writable, 0, len(m.writable))
	for _, w := range m.writable {
		ws = append(ws, w)
	}
	m.mu.Unlock()
	var first error
	for _, w := range ws {
		if err := m.WriteBack(w); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close releases every shadow and its LKL fd.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, fd := range m.cache {
		unix.Close(fd)
		delete(m.cache, k)
	}
	m.order = nil
	for ino, w := range m.writable {
		unix.Close(w.MemFd)
		lkl.Close(w.LKLFd)
		delete(m.writable, ino)
	}
	m.nwritable.Store(0)
	if m.inotify > 0 {
		unix.Close(m.inotify)
		m.inotify, m.watches = 0, nil
	}
}
