// Package fdtable maps a guest process's virtual file descriptors to LKL
// file descriptors, or to host fds kbox holds for the guest.
//
// Guest fds below Base are the guest's own host fds (stdio, pipes, shadow
// memfds) and never appear here; virtual fds are numbered from Base up, so
// the two ranges never collide. After fork each process has its own Table,
// whose entries share the underlying open LKL file, so a child closing an fd
// does not close the parent's.
package fdtable

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// File is an open LKL file, shared by every fd (in every process) that refers
// to it. Its LKL fd is closed when the last reference goes.
//
// A File can instead be a host file (Host): a copy of a guest's host fd
// that kbox holds in HostFd, for a dup the guest asked for in the virtual
// range (fcntl F_DUPFD with a minimum at or above Base). LKLFd is then -1,
// and HostFd is closed when the last reference goes.
//
// Or a generated directory (Listing): a directory of the guest's /proc
// whose entries kbox makes (package procfs). LKLFd is then -1 too.
//
// A host File may also carry a Node: a file of the guest's /proc whose
// writes kbox serves (procfs.Var); HostFd then holds its text.
type File struct {
	LKLFd   int
	Host    bool
	HostFd  int
	Listing *Listing
	Node    any
	Path    string // normalized guest path, for fchdir and *at() lookups
	Flags   int    // open flags
	// refs counts fds referring to the file; after fork they live in
	// several tables, so it is atomic rather than under one table's lock.
	refs atomic.Int32
	// Listed counts the entries a directory listing has added beyond the
	// directory's own (dispatch lists bind mount points missing from the
	// image); a seek back to 0 resets it.
	Listed atomic.Int32
	// Quiet is, plus one, the mount epoch in which dispatch found the
	// file a directory on a read-only mount, whose listing and close
	// change nothing a stat sees; 0 when not. Lazy is the same for a
	// writable mount, shifted left by 2 past the mount's kind (dispatch's
	// quietDir): its listings log the access time they give.
	Quiet, Lazy atomic.Uint64
}

// Closer closes an LKL fd when a File's last reference goes.
type Closer func(lklfd int)

// Entry is one virtual fd.
type Entry struct {
	File    *File
	Cloexec bool
}

// Table is one process's virtual fds.
type Table struct {
	mu      sync.Mutex
	base    int
	max     int
	entries map[int]Entry
	close   Closer
}

// ErrBadFd reports an fd that is not in the table.
var ErrBadFd = errors.New("bad virtual fd")

// New makes an empty table numbering fds from base; at most max entries.
func New(base, max int, close Closer) *Table {
	return &Table{base: base, max: max, entries: make(map[int]Entry), close: close}
}

// IsVirtual reports whether fd is in the virtual range of t.
func (t *Table) IsVirtual(fd int) bool { return fd >= t.base }

// Base returns the lowest virtual fd number.
func (t *Table) Base() int { return t.base }

// Open adds a new File for lklfd and returns its guest fd, or EMFILE.
func (t *Table) Open(lklfd int, path string, flags int, cloexec bool) (int, error) {
	f := &File{LKLFd: lklfd, Path: path, Flags: flags}
	fd, err := t.install(f, cloexec, t.base)
	if err != nil {
		t.close(lklfd)
	}
	return fd, err
}

// OpenListing adds a generated directory at guest path path and returns
// its fd, or EMFILE.
func (t *Table) OpenListing(l *Listing, path string, flags int, cloexec bool) (int, error) {
	f := &File{LKLFd: -1, HostFd: -1, Listing: l, Path: path, Flags: flags}
	return t.install(f, cloexec, t.base)
}

// OpenHost adds a host File holding hostfd (kbox's own fd, which the table
// now owns) at the lowest free fd at or above min, and returns it, or
// EMFILE.
func (t *Table) OpenHost(hostfd, min int, cloexec bool) (int, error) {
	f := &File{LKLFd: -1, Host: true, HostFd: hostfd}
	fd, err := t.install(f, cloexec, min)
	if err != nil {
		unix.Close(hostfd)
	}
	return fd, err
}

// OpenNode adds a host File holding hostfd (owned by the table now) with
// node, opened with flags at guest path path, and returns its fd, or
// EMFILE.
func (t *Table) OpenNode(hostfd int, node any, path string, flags int, cloexec bool) (int, error) {
	f := &File{LKLFd: -1, Host: true, HostFd: hostfd, Node: node, Path: path, Flags: flags}
	fd, err := t.install(f, cloexec, t.base)
	if err != nil {
		unix.Close(hostfd)
	}
	return fd, err
}

func (t *Table) install(f *File, cloexec bool, min int) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.entries) >= t.max {
		return -1, unix.EMFILE
	}
	if min < t.base {
		min = t.base
	}
	fd := min
	for {
		if _, used := t.entries[fd]; !used {
			break
		}
		fd++
	}
	f.refs.Add(1)
	t.entries[fd] = Entry{File: f, Cloexec: cloexec}
	return fd, nil
}

// Get returns the entry of fd.
func (t *Table) Get(fd int) (Entry, bool) {
	t.mu.Lock()
	e, ok := t.entries[fd]
	t.mu.Unlock()
	return e, ok
}

// Close removes fd, closing its LKL file when no fd refers to it any more.
func (t *Table) Close(fd int) error {
	t.mu.Lock()
	e, ok := t.entries[fd]
	if ok {
		delete(t.entries, fd)
	}
	t.mu.Unlock()
	if !ok {
		return unix.EBADF
	}
	t.release(e.File)
	return nil
}

func (t *Table) release(f *File) {
	if f.refs.Add(-1) == 0 {
		switch {
		case f.Host:
			unix.Close(f.HostFd)
		case f.Listing != nil:
		default:
			t.close(f.LKLFd)
		}
	}
}

// Dup makes a new fd (the lowest free at or above min) sharing fd's file.
func (t *Table) Dup(fd, min int, cloexec bool) (int, error) {
	e, ok := t.Get(fd)
	if !ok {
		return -1, unix.EBADF
	}
	return t.install(e.File, cloexec, min)
}

// Dup2 makes newfd refer to fd's file, closing what newfd held.
func (t *Table) Dup2(fd, newfd int, cloexec bool) error {
	if newfd < t.base {
		return unix.EBADF
	}
	t.mu.Lock()
	e, ok := t.entries[fd]
	if !ok {
		t.mu.Unlock()
		return unix.EBADF
	}
	old, had := t.entries[newfd]
	e.File.refs.Add(1)
	t.entries[newfd] = Entry{File: e.File, Cloexec: cloexec}
	t.mu.Unlock()
	if had {
		t.release(old.File)
	}
	return nil
}

// SetCloexec sets or clears close-on-exec on fd.
func (t *Table) SetCloexec(fd int, on bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[fd]
	if !ok {
		return unix.EBADF
	}
	e.Cloexec = on
	t.entries[fd] = e
	return nil
}

// Fork returns a copy of t for a child process: same fds, shared files.
func (t *Table) Fork() *Table {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &Table{base: t.base, max: t.max, entries: make(map[int]Entry, len(t.entries)), close: t.close}
	for fd, e := range t.entries {
		e.File.refs.Add(1)
		c.entries[fd] = e
	}
	return c
}

// Exec drops the close-on-exec fds, as execve does.
func (t *Table) Exec() {
	t.mu.Lock()
	var drop []*File
	for fd, e := range t.entries {
		if e.Cloexec {
			delete(t.entries, fd)
			drop = append(drop, e.File)
		}
	}
	t.mu.Unlock()
	for _, f := range drop {
		t.release(f)
	}
}

// Closes reports whether an exec (exec: its close-on-exec fds, Exec) or
// the process's end (all its fds) closes a file for which keeps is false.
func (t *Table) Closes(exec bool, keeps func(*File) bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries {
		if (e.Cloexec || !exec) && !keeps(e.File) {
			return true
		}
	}
	return false
}

// CloseRange closes the fds in [lo, hi], or with cloexec only marks them
// close-on-exec, as close_range(2).
func (t *Table) CloseRange(lo, hi int, cloexec bool) {
	t.mu.Lock()
	var drop []*File
	for fd, e := range t.entries {
		if fd < lo || fd > hi {
			continue
		}
		if cloexec {
			e.Cloexec = true
			t.entries[fd] = e
		} else {
			delete(t.entries, fd)
			drop = append(drop, e.File)
		}
	}
	t.mu.Unlock()
	for _, f := range drop {
		t.release(f)
	}
}

// CloseAll drops every fd (process exit).
func (t *Table) CloseAll() { t.CloseRange(0, int(^uint(0)>>1), false) }

// Fds returns the open virtual fds in increasing order, with their entries.
func (t *Table) Fds() ([]int, []Entry) {
	t.mu.Lock()
	fds := make([]int, 0, len(t.entries))
	for fd := range t.entries {
		fds = append(fds, fd)
	}
	t.mu.Unlock()
	slices.Sort(fds)
	ents := make([]Entry, 0, len(fds))
	kept := fds[:0]
	for _, fd := range fds {
		if e, ok := t.Get(fd); ok {
			kept = append(kept, fd)
			ents = append(ents, e)
		}
	}
	return kept, ents
}

// Highest returns the highest open virtual fd, or -1 when none is open.
func (t *Table) Highest() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := -1
	for fd := range t.entries {
		h = max(h, fd)
	}
	return h
}

// Cap returns the most virtual fds the table holds (beyond it: EMFILE).
func (t *Table) Cap() int { return t.max }

// Len returns the number of open virtual fds.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
