// Package shadowfd gives guests host file descriptions of the image's
// regular files, so that read, write, mmap and the dynamic loader run
// natively on the host, without a round trip to kbox.
//
// Every image inode that guests have open has one node: a host content
// file (store.go: a file in a size-limited private tmpfs, or a memfd)
// holding the inode's data, and an LKL fd of the inode. Every guest open of
// the inode, by any guest process, is a new file description of that one
// content file (its own offset and status flags, as an open is), so guests
// see each other's writes as on Linux: O_APPEND appends atomically,
// MAP_SHARED mappings share pages, fstat reports the current size, a
// reader sees what a writer wrote. While a node lives its content file is
// the file's truth; LKL's copy is brought up to date (written back,
// sync.go) on fsync, fdatasync, msync, sync and syncfs, when a guest
// process exits, before anything reads the file through LKL (exec,
// statfs), every few seconds while writers exist, and at kbox's exit.
//
// A node lives while guests hold descriptions of it (holders.go tells),
// and a while after, cached, so that the next open of an unchanged file
// costs one stat. Files above MaxSize that have no node are not shadowed:
// the caller serves them through virtual fds, so memory stays bounded.
package shadowfd

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// DefaultMaxSize is the largest file shadowed when it is opened.
const DefaultMaxSize = 64 << 20

// The node cache: beyond maxNodes nodes, kbox finds which ones guests
// still hold (holders.go) and keeps at most keepNodes of the others, and
// keepBytes of their content, most recently used first. A command that
// reads a tree (git status, grep -r, Python's imports) finds it cached
// when it runs again only if its files fit, so the cache is as large as
// kbox's fds allow (nodeLimits).
const keepBytes = 256 << 20

// nodeLimits sizes the node cache from the hard limit on open files (the
// soft one may rise to it): each node holds a host fd, and in the
// in-process tiers kbox's fds share one table with the guest's, which
// keep the numbers below the guest's own limit (1024 by default;
// trap/fds.go). A quarter of the rest, between 256 and 4096 nodes, and
// half of that kept.
func nodeLimits(hard uint64) (maxN, keepN int64) {
	room := int64(min(hard, 1<<30)) - 1024
	maxN = min(max(room/4, 256), 4096)
	return maxN, maxN / 2
}

type nodeKey struct{ dev, ino uint64 }

// version is what a node last knew of its LKL inode: if LKL's size or
// change time differ, the inode changed outside the node.
type version struct {
	size          int64
	ctime, ctimeN int64
}

func versionOf(st *lkl.Stat64) version {
	return version{st.Size, st.Ctime, int64(st.CtimeNsec)}
}

// Node is one image inode shadowed on the host.
type Node struct {
	key     nodeKey
	fs      *fsState
	content int // kbox's own O_RDWR fd of the content file
	// cname is the content file's name in fs.names, NUL terminated, or
	// empty: a memfd (fsState.create).
	cname   [24]byte
	mgr     *Manager
	hostDev uint64
	hostIno uint64
	path    string // the guest path it was opened by, for messages

	// mu serialises write-backs and content changes made by kbox.
	mu    sync.Mutex
	lklfd int  // LKL fd of the inode
	lklfl int  // its file status flags (O_NOATIME among them: takeLKLFd)
	rw    bool // lklfd is open for writing (a writer came)
	lkl   version
	alloc int64 // LKL's allocated bytes at the last fill or write-back
	// synced is the content's change time at the last fill or write-back;
	// sums hash each chunk of the content as LKL holds it (sync.go).
	synced unix.Timespec
	atime  unix.Timespec // the content's access time last given to LKL
	// atimeDue says LKL's rule would give the inode a read's access time
	// (readsShow at the fill), until a read's time is given or the rule
	// skips it: a plain description's close then gives it (closedRead).
	// A hint: the next stat's overlay decides with LKL's own times.
	atimeDue atomic.Bool
	sums     []uint64
	// err is a failed write-back not yet reported to the guest.
	err error

	// wroteSince says a writable description was handed out since kbox
	// last found the node written back with no writer holding it:
	// stores through a shared mapping change no time stamp, so such a
	// node is hashed at write-back, not trusted; and stat corrects its
	// size. opens counts writable descriptions handed out. Both change
	// under Manager.mu and are read without it.
	wroteSince atomic.Bool
	opens      atomic.Uint64

	// Under Manager.mu.
	busy     int    // handouts in progress: not dropped meanwhile
	lastUse  uint64 // the Manager's use counter at its last handout
	timesSet bool   // utimensat while a writer held it (TimesSet)
	unlinked bool   // its file has no name left: it goes when unheld
	dropped  bool
	// spare is a clean read-only description of the content kept for the
	// next plain open (spare.go), or -1; sprev and snext link the nodes
	// with one, least recently returned first.
	spare        int
	sprev, snext *Node
	// parked are kbox's copies of the content kept open while the guest
	// held POSIX locks on it (SharedFiles).
	parked []int
}

// Path is the guest path the node was first opened by.
func (n *Node) Path() string { return n.path }

// LKLFd is the node's LKL fd.
func (n *Node) LKLFd() int { return n.lklfd }

// Manager owns the nodes.
type Manager struct {
	MaxSize int64
	// Holders lists the host pids of the guest processes, which may hold
	// descriptions of content files (holders.go). Nil: nodes are kept
	// until exit.
	Holders func() []int
	// WritersGone, when set, is told the LKL fd of a node once the
	// flusher found that no writer holds it any more (after its last
	// write-back): the guests' writable descriptions of it are closed.
	// It must not keep the fd.
	WritersGone func(lklfd int)
	// SharedFiles says the guest shares kbox's fd table (the in-process
	// tiers): closing any description of a file there releases the
	// guest's POSIX locks on it, so kbox parks its copies of a content
	// file the guest holds such locks on instead of closing them
	// (spare.go, closeCopyLocked).
	SharedFiles bool
	// NoDescription, when set, reports numbers of kbox's own fd table
	// that hold nothing a guest could use (the in-process tiers'
	// placeholders of free guest fds, a thousand or more): a look for
	// holders skips them.
	NoDescription func(fd int) bool
	// NoDescriptionBelow bounds the numbers NoDescription may report:
	// the guest's range (a look lists the open numbers above it).
	NoDescriptionBelow int
	// CopyFile, when set, fills content files from the image's blocks
	// where it can (rootfs.Root.CopyFile; copied in sync.go).
	CopyFile func(lfd int, st *lkl.Stat64, dst int) bool

	maxNodes, keepNodes int64 // nodeLimits

	mu    sync.Mutex
	nodes map[nodeKey]*Node
	// byHost finds nodes by their content files' device and inode: the
	// stores of two LKL filesystems (the image, /tmp) are two tmpfs
	// mounts whose inode numbers coincide.
	byHost map[hostKey]*Node
	// masters[fd]: fd is a node's content fd (kbox's own).
	masters []bool
	// spares counts the nodes' spares (spare.go), listed from spareHead
	// (returned longest ago) to spareTail.
	spares               int
	spareHead, spareTail *Node
	fss                  map[uint64]*fsState
	// backing maps LKL filesystems on thin host files to those files
	// (HostBacked).
	backing map[uint64]int
	// quotas bound the growth of LKL filesystems (Quota), under qmu.
	quotas map[uint64]growthQuota
	qmu    sync.Mutex
	uses   uint64
	stores stores
	// hot counts nodes whose content may differ from LKL's (wroteSince):
	// stat corrects sizes, and space is rebalanced, only while it is not
	// zero.
	hot     atomic.Int32
	count   atomic.Int32
	flusher flusher
	prompt  prompter // prompt.go
	// rounds is held by each batch of rounds (flushHot, flushAsked,
	// Quiet, QuietIn, QuietAll), taken before mu: a node whose hot state
	// one batch ends quietly is not told gone by another meanwhile.
	rounds sync.Mutex
	closed atomic.Bool
	// noLeases: the kernel refused a lease (heldCheck).
	noLeases atomic.Bool
	// writeBacks counts write-backs and access times given: each may
	// change an LKL file. atimes tells the two apart (atime.go).
	writeBacks atomic.Uint64
	atimes     atimeLog
	buf        []byte // write-back and fill buffer, under bufMu
	bufMu      sync.Mutex
	// warming holds the nodes Warm is making (under mu), warmN counts
	// them: opens of their inodes wait (warm.go).
	warming map[nodeKey]chan struct{}
	warmN   atomic.Int32
}

// New returns a Manager.
func New() *Manager {
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	maxN, keepN := nodeLimits(lim.Max)
	return &Manager{
		maxNodes:  maxN,
		keepNodes: keepN,
		MaxSize:   DefaultMaxSize,
		nodes:     map[nodeKey]*Node{},
		byHost:    map[hostKey]*Node{},
		fss:       map[uint64]*fsState{},
	}
}

// Fits reports whether a file of this size may be shadowed when it has no
// node yet.
func (m *Manager) Fits(size int64) bool { return size <= m.MaxSize }

// Shadowable reports whether an open of the regular LKL file st gets a
// shadow: one that fits, or one whose node guests hold (every open of an
// inode must share its node, whatever its size). A node of a file that
// grew beyond MaxSize and that no guest holds is dropped: the open becomes
// a virtual fd.
func (m *Manager) Shadowable(st *lkl.Stat64) bool {
	if m.Fits(st.Size) {
		return true
	}
	n := m.OfInode(st.Dev, st.Ino)
	if n == nil {
		return false
	}
	hs := m.scan()
	if hs == nil || hs[n].held {
		return true
	}
	if _, err := m.flush(n); err != nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n.dropped || n.busy > 0 {
		return !n.dropped
	}
	m.dropLocked(n)
	return false
}

// procFd is an fd of /proc/self/fd, opened once: reopening a content file
// through it skips the lookup of /proc/self/fd on every open.
var procFd struct {
	once sync.Once
	fd   int
}

// reopen returns a new file description of the content file fd (its own
// offset and status flags, unlike a dup). It does not allocate.
func reopen(fd, flags int) (int, error) {
	procFd.once.Do(func() {
		pfd, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			pfd = -1
		}
		procFd.fd = pfd
	})
	if procFd.fd < 0 {
		return unix.Open("/proc/self/fd/"+strconv.Itoa(fd), flags|unix.O_CLOEXEC, 0)
	}
	var name [24]byte
	b := strconv.AppendInt(name[:0], int64(fd), 10)
	name[len(b)] = 0
	return openat(procFd.fd, &name[0], flags|unix.O_CLOEXEC)
}

// reopen opens a new description of n's content file with flags: by its
// name in its tmpfs, else through /proc/self/fd. n is held (busy): its
// filesystem's mount stays open meanwhile (Release closes it only when
// no node is left).
func (n *Node) reopen(flags int) (int, error) {
	if n.cname[0] != 0 {
		return openat(n.fs.names, &n.cname[0], flags|unix.O_CLOEXEC)
	}
	return reopen(n.content, flags)
}

// hostFlags are the status flags a guest's description of a content file
// keeps: access mode, O_APPEND, O_NONBLOCK, O_NOATIME. (O_SYNC and O_DSYNC
// would be no-ops on the content file; durability comes with fsync.)
func hostFlags(flags int) int {
	return flags & (unix.O_ACCMODE | unix.O_APPEND | unix.O_NONBLOCK | unix.O_NOATIME)
}

func writable(flags int) bool { return flags&unix.O_ACCMODE != unix.O_RDONLY }

// NotShadowedError is Open's error when the file cannot become a shadow
// because the disk failed to read it (EIO): the caller keeps the LKL fd
// and serves the file through LKL, whose reads report the error.
type NotShadowedError struct{ Err error }

func (e *NotShadowedError) Error() string {
	return "cannot read the file into a shadow: " + e.Err.Error()
}
func (e *NotShadowedError) Unwrap() error { return e.Err }

// Open returns a new host description, for a guest, of the regular LKL file
// open at lklfd (which Open takes over, except on a NotShadowedError) whose
// stat is st. The caller has
// opened it in LKL with the guest's flags, so permissions, O_CREAT, O_EXCL
// and O_TRUNC were the kernel's; a writable open must have lklfd open
// O_RDWR without O_APPEND.
func (m *Manager) Open(lklfd int, st *lkl.Stat64, path string, flags int) (int, error) {
	fd, _, err := m.OpenLend(lklfd, st, path, flags)
	return fd, err
}

// OpenLend is Open that also returns the description's node, to give it
// back to or close it through (OpenCached's n).
func (m *Manager) OpenLend(lklfd int, st *lkl.Stat64, path string, flags int) (int, *Node, error) {
	k := nodeKey{st.Dev, st.Ino}
	m.waitWarm(k)
	m.mu.Lock()
	n := m.nodes[k]
	if n != nil {
		n.busy++
	}
	m.mu.Unlock()
	// Filling and truncating the node is kbox's own work: as root, whatever
	// guest the thread serves (the guest's open was checked in LKL).
	var err error
	if n == nil {
		lkl.AsRoot(func() { n, err = m.newNode(k, lklfd, st, path) })
		var ns *NotShadowedError
		if errors.As(err, &ns) {
			return -1, nil, err // lklfd stays the caller's
		}
		if err != nil {
			lkl.Close(lklfd)
			return -1, nil, err
		}
	} else if lkl.AsRoot(func() { err = m.adopt(n, lklfd, flags) }); err != nil {
		m.done(n)
		return -1, nil, err
	}
	fd, err := m.handOut(n, flags)
	if err != nil {
		return fd, nil, err
	}
	return fd, n, nil
}

// OpenWriter hands out a new description of the node of the inode whose
// LKL stat is st when a node holds it with an LKL fd open for writing,
// closing lklfd, which the caller opened with flags: an append-only file's
// O_APPEND open, whose own LKL fd could not write back at offsets. ok is
// false (lklfd stays the caller's) when no such node exists.
func (m *Manager) OpenWriter(lklfd int, st *lkl.Stat64, flags int) (fd int, n *Node, ok bool, err error) {
	n = m.hold(st)
	if n == nil {
		return -1, nil, false, nil
	}
	n.mu.Lock()
	rw := n.rw
	n.mu.Unlock()
	if !rw {
		m.done(n)
		return -1, nil, false, nil
	}
	if lkl.AsRoot(func() { err = m.adopt(n, lklfd, flags) }); err != nil {
		m.done(n)
		return -1, nil, true, err
	}
	fd, err = m.handOut(n, flags)
	if err != nil {
		return fd, nil, true, err
	}
	return fd, n, true, nil
}

// hold returns the node of the inode whose LKL stat is st, held busy (not
// dropped until done), or nil when there is none.
func (m *Manager) hold(st *lkl.Stat64) *Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.nodes[nodeKey{st.Dev, st.Ino}]
	if n != nil {
		n.busy++
	}
	return n
}

// handOut makes a new description of n's content for a guest, ending the
// caller's busy hold on n.
func (m *Manager) handOut(n *Node, flags int) (int, error) {
	n.mu.Lock()
	pending := n.timesSet
	n.mu.Unlock()
	if pending {
		m.settleTimes(n, 1)
	}
	fd := -1
	if Plain(flags) {
		fd = m.takeSpare(n)
	}
	var err error
	if fd < 0 {
		fd, err = n.reopen(hostFlags(flags))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n.busy--
	m.uses++
	n.lastUse = m.uses
	if err == nil && writable(flags) {
		n.opens.Add(1)
		if n.wroteSince.CompareAndSwap(false, true) {
			m.hot.Add(1)
			m.flusher.start(m)
			m.watchContent(n)
		}
	}
	return fd, err
}

// done ends a busy hold on n that handed nothing out.
func (m *Manager) done(n *Node) {
	m.mu.Lock()
	n.busy--
	m.mu.Unlock()
}

// adopt brings an existing node up to date for a new open whose LKL fd
// the node takes or closes. What LKL holds is read again under n.mu: a
// write-back may have been running since the caller's open.
func (m *Manager) adopt(n *Node, lklfd int, flags int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if writable(flags) && !n.rw {
		lkl.Close(n.lklfd)
		n.lklfd = lklfd
		n.lklfl, n.rw = takeLKLFd(lklfd)
	} else {
		lkl.Close(lklfd)
	}
	if flags&unix.O_TRUNC != 0 && writable(flags) {
		// LKL truncated the file (again now: a write-back running
		// meanwhile may have written old content after the open's
		// truncation). So is the content, for every description of it,
		// as on Linux.
		return m.truncated(n, 0)
	}
	st, err := lkl.Fstat(n.lklfd)
	if err != nil {
		return err
	}
	if versionOf(&st) != n.lkl && !m.mayBeDirty(n) {
		// Changed in LKL behind the node (a virtual fd of the same
		// inode): reload.
		return m.fill(n, &st)
	}
	return nil
}

// OpenCached returns a new read-only host description of the file whose
// LKL stat is st when a node holds it and is current: a read-only open
// then skips opening the file in LKL. ok is false when the caller must
// open the file in LKL and call Open. n is the description's node: a
// Plain open's description may become n's spare once the guest's fd of
// it closes, through n.Return (spare.go); a caller that cannot tell when
// that is gives kbox's copy to n.CloseCopy.
func (m *Manager) OpenCached(st *lkl.Stat64, flags int) (fd int, n *Node, ok bool, err error) {
	m.waitWarm(nodeKey{st.Dev, st.Ino})
	if m.count.Load() == 0 {
		return -1, nil, false, nil
	}
	n = m.hold(st)
	if n == nil {
		return -1, nil, false, nil
	}
	// LKL's inode is as the node last left it (a node's own newer content
	// is not in LKL yet, which is what the node is for); otherwise it
	// changed behind the node, and the general path reloads it.
	n.mu.Lock()
	current := versionOf(st) == n.lkl
	n.mu.Unlock()
	if !current {
		m.done(n)
		return -1, nil, false, nil
	}
	fd, err = m.handOut(n, flags)
	if err != nil {
		return fd, nil, true, err
	}
	return fd, n, true, nil
}

// newNode makes the node of inode k, filled from lklfd, held busy for the
// caller. On an error lklfd stays the caller's.
func (m *Manager) newNode(k nodeKey, lklfd int, st *lkl.Stat64, path string) (*Node, error) {
	if int64(m.count.Load()) >= m.maxNodes {
		m.Trim()
	}
	fs, err := m.fsOf(st.Dev, lklfd, path)
	if err != nil {
		return nil, err
	}
	n := &Node{key: k, fs: fs, mgr: m, lklfd: lklfd, path: path, content: -1, spare: -1}
	n.lklfl, n.rw = takeLKLFd(lklfd)
	n.alloc = st.Blocks * 512
	fs.reserve(m, n.alloc)
	if n.content, err = fs.create(path, &n.cname); err != nil {
		fs.unreserve(m, n.alloc)
		return nil, err
	}
	var hs unix.Stat_t
	if err := unix.Fstat(n.content, &hs); err != nil {
		n.lklfd = -1
		m.closeNode(n)
		return nil, err
	}
	n.hostDev, n.hostIno = hs.Dev, hs.Ino
	n.mu.Lock()
	err = m.fill(n, st)
	n.mu.Unlock()
	if errors.Is(err, unix.EIO) {
		// The disk failed a read of the file: no node, and the LKL fd
		// stays the caller's, to serve the file through LKL, where the
		// guest's reads get the error as on Linux, from offset 0 (the
		// fill's SEEK_DATA/SEEK_HOLE moved it).
		lkl.Syscall6(lkl.SysLseek, uintptr(lklfd), 0, unix.SEEK_SET, 0, 0, 0)
		n.lklfd = -1
		m.closeNode(n)
		return nil, &NotShadowedError{err}
	}
	if err != nil {
		n.lklfd = -1
		m.closeNode(n)
		return nil, err
	}
	m.mu.Lock()
	if fs.released {
		// Release let the filesystem go meanwhile: make the node again
		// with a new state (the LKL fd stays the caller's to give).
		m.mu.Unlock()
		n.lklfd = -1
		m.closeNode(n)
		return m.newNode(k, lklfd, st, path)
	}
	if old := m.nodes[k]; old != nil {
		// Another thread made it meanwhile: use that one.
		old.busy++
		m.mu.Unlock()
		m.closeNode(n)
		return old, nil
	}
	n.busy = 1
	m.nodes[k] = n
	m.byHost[hostKey{n.hostDev, n.hostIno}] = n
	if n.content >= len(m.masters) {
		m.masters = append(m.masters, make([]bool, n.content+1-len(m.masters))...)
	}
	m.masters[n.content] = true
	m.count.Add(1)
	m.mu.Unlock()
	return n, nil
}

// takeLKLFd makes LKL fd fd a node's: its reads (fills) must not change
// the inode's access time, which follows the guests' own reads
// (propagateAtime). It returns fd's flags now, and whether it was opened
// for writing.
func takeLKLFd(fd int) (flags int, writable bool) {
	fl, e := lkl.Syscall6(lkl.SysFcntl, uintptr(fd), unix.F_GETFL, 0, 0, 0, 0)
	if e != 0 {
		return 0, false
	}
	lkl.Syscall6(lkl.SysFcntl, uintptr(fd), unix.F_SETFL, fl|unix.O_NOATIME, 0, 0, 0)
	return int(fl) | unix.O_NOATIME, int(fl)&unix.O_ACCMODE != unix.O_RDONLY
}

// dropLocked forgets n and closes its files; n is written back. The
// caller holds m.mu (and not n.mu: the order is Manager.mu, then Node.mu,
// then the fs's).
func (m *Manager) dropLocked(n *Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m.forgetLocked(n)
	m.closeNode(n)
}

// forgetLocked takes n out of the Manager. The caller holds m.mu and n.mu.
func (m *Manager) forgetLocked(n *Node) {
	n.dropped = true
	m.dropSpareLocked(n)
	// Unheld, or kbox's end: the guest has no fd of the file, so no
	// POSIX lock on it.
	for _, fd := range n.parked {
		m.markMasterLocked(fd, false)
		closeRaw(fd)
	}
	n.parked = nil
	if m.nodes[n.key] == n {
		delete(m.nodes, n.key)
	}
	if hk := (hostKey{n.hostDev, n.hostIno}); m.byHost[hk] == n {
		delete(m.byHost, hk)
	}
	if n.content >= 0 && n.content < len(m.masters) {
		m.masters[n.content] = false
	}
	if n.wroteSince.CompareAndSwap(true, false) {
		m.hot.Add(-1)
	}
	m.unwatchContent(n)
	m.count.Add(-1)
	if n.unlinked {
		n.fs.freeing(n.alloc)
	}
}

// closeNode closes n's files and gives back its space (after the LKL fd:
// the last close of an unlinked file frees its blocks).
func (m *Manager) closeNode(n *Node) {
	n.fs.unlink(&n.cname)
	closeFiles(n)
	n.fs.unreserve(m, n.alloc)
}

// closeFiles closes n's content file and LKL fd.
func closeFiles(n *Node) {
	if n.content >= 0 {
		unix.Close(n.content)
		n.content = -1
	}
	if n.lklfd >= 0 {
		lkl.Close(n.lklfd)
		n.lklfd = -1
	}
}

// Any reports whether any node exists.
func (m *Manager) Any() bool { return m.count.Load() > 0 }

// Unlinked tells that a name of n's file was removed: if it was its last,
// the node goes as soon as no guest holds it (now, if none does), so that
// LKL frees the file's blocks (a node would keep the inode).
func (m *Manager) Unlinked(n *Node) {
	m.mu.Lock()
	gone := n.dropped || !lklUnlinked(n.lklfd)
	if !gone {
		n.unlinked = true
	}
	last := n.lastUse
	m.mu.Unlock()
	if gone {
		return
	}
	// Nothing to write back: the file has no name. The other nodes
	// wait for a Trim.
	held := m.heldCheck(n)
	if held == nil {
		return
	}
	m.mu.Lock()
	// Not handed out since the last use was taken (else it may be held).
	if !n.dropped && n.busy == 0 && n.lastUse == last && !held(n) {
		m.dropLocked(n)
	}
	m.mu.Unlock()
}

// lklUnlinked reports whether LKL's inode open at fd has no name left.
func lklUnlinked(fd int) bool {
	st, err := lkl.Fstat(fd)
	return err == nil && st.Nlink == 0
}

// WriteBacks returns how many write-backs have started: a change means LKL
// files may have changed (the dispatch stat cache compares it).
func (m *Manager) WriteBacks() uint64 { return m.writeBacks.Load() }

// report prints a write-back error that no guest call has reported yet.
func report(n *Node, err error) {
	os.Stderr.WriteString("kbox: write back " + n.path + ": " + err.Error() + "\n")
}

// Close writes back and releases every node (kbox exit). It returns the
// first write-back error no guest call reported. Calls after the first do
// nothing.
func (m *Manager) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	m.waitWarms()
	m.stopPrompt()
	m.flusher.stop()
	m.mu.Lock()
	nodes := make([]*Node, 0, len(m.nodes))
	for _, n := range m.nodes {
		nodes = append(nodes, n)
	}
	m.mu.Unlock()
	var first error
	for _, n := range nodes {
		if _, err := m.flush(n); err != nil {
			report(n, err)
			if first == nil {
				first = err
			}
		}
		n.mu.Lock()
		if n.timesSet {
			m.mirrorTimes(n)
		}
		n.mu.Unlock()
	}
	m.mu.Lock()
	for _, n := range nodes {
		n.mu.Lock()
		if !n.dropped {
			m.forgetLocked(n)
			// The content file's name and space go with its tmpfs,
			// when fs.close closes the last fd of it.
			closeFiles(n)
		}
		n.mu.Unlock()
	}
	for _, fs := range m.fss {
		fs.close()
	}
	m.fss = map[uint64]*fsState{}
	m.mu.Unlock()
	m.stores.close()
	return first
}

// Leave is Close for a run whose writes to LKL are all discarded and whose
// kernel is left to the process's exit (rootfs.Root.Leave): nothing is
// written back, and the nodes' files stay open until the exit closes them.
func (m *Manager) Leave() {
	if m.closed.Swap(true) {
		return
	}
	m.waitWarms()
	m.stopPrompt()
	m.flusher.stop()
	m.stores.close()
}

// EachNode calls fn for every node: the guest path that opened it, its LKL
// fd and its content file's host device and inode (the debug mirror,
// package gdbmirror, matches guest fds to nodes by the last two).
func (m *Manager) EachNode(fn func(path string, lklfd int, hostDev, hostIno uint64)) {
	m.mu.Lock()
	nodes := make([]*Node, 0, len(m.nodes))
	for _, n := range m.nodes {
		nodes = append(nodes, n)
	}
	m.mu.Unlock()
	for _, n := range nodes {
		n.mu.Lock()
		lklfd := n.lklfd
		n.mu.Unlock()
		fn(n.path, lklfd, n.hostDev, n.hostIno)
	}
}
