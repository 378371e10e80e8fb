package shadowfd

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Space. Guests write content files natively, so a write that the image
// could not hold must fail there, at the write, with ENOSPC, as on Linux:
// a write-back that fails later would lose data the guest was told was
// written. So the content files of each writable LKL filesystem live in a
// tmpfs of their own (store.go) whose size kbox keeps at
//
//	bound = Σ (LKL blocks of each node's file) + free space in LKL − margin
//
// A node's content takes about as much tmpfs as its LKL file takes blocks,
// so the tmpfs can grow by about what LKL can still take: a guest write
// beyond that fails natively with ENOSPC, and every byte a write reported
// fits in the image at write-back. The bound moves when a node comes or
// goes and when LKL's free space changes otherwise (kbox calls Rebalance
// after dispatching a syscall that may change it, while writers exist); a
// write-back moves blocks from "free" to "the node's file" and leaves it
// where it was. The margin covers the filesystem's own metadata for new
// blocks (extent tree blocks, about 0.4 % in the worst case). Without such
// a tmpfs (memfds), ENOSPC can only come at write-back, and is reported by
// the next fsync, msync, sync or syncfs.

// hysteresis is the width of the band the tmpfs size keeps to: between
// bound − 2·hysteresis and bound. kbox resizes it to bound − hysteresis
// only when it leaves the band (or the node being filled needs more
// room), since resizing costs a reconfiguration (and a round trip to the
// helper when there is one). A node made and dropped moves the bound by
// its blocks both ways, so a guest reading many files (git status) does
// not resize at every file; the price is that a guest filling the image
// may find it full up to 2·hysteresis early, besides the margin.
const hysteresis = 256 << 10

// fsState is one LKL filesystem that has nodes.
type fsState struct {
	dev     uint64
	ro      bool
	noatime bool
	// relatime: reads update an inode's access time only by Linux's
	// relatime rule (relatimeSkips).
	relatime bool
	hostfd   int // the host file behind a thin disk, or -1 (HostBacked)

	mu     sync.Mutex
	statfd int // an LKL O_PATH fd of a directory on it, for statfs
	dir    int // root of its tmpfs, or -1: memfds
	// names is where content files are made with names (create): dir,
	// or on a read-only filesystem (no bound to keep) the root of an
	// unbounded tmpfs when kbox may mount itself; or -1: memfds.
	names int
	id    int // the tmpfs's id for resize
	mnt   mounter
	alloc int64 // Σ LKL blocks (bytes) of its nodes' files
	size  int64 // the tmpfs's size now
	err   error // a failed write-back not yet reported by syncfs/sync
	// Blocks of unlinked files whose nodes went, which LKL frees a
	// clock tick after the close (its kernel threads defer the last
	// fput): free bytes before, how many, and until when to expect them.
	pendFree, pendBase int64
	pendUntil          time.Time
	// released: Release let the filesystem go (its fds are closed); a
	// node made meanwhile gets a new state.
	released bool
}

// fsOf returns the state of LKL filesystem dev, lklfd being an fd on it of
// the file at guest path path.
func (m *Manager) fsOf(dev uint64, lklfd int, path string) (*fsState, error) {
	m.mu.Lock()
	fs := m.fss[dev]
	m.mu.Unlock()
	if fs != nil {
		return fs, nil
	}
	fs = &fsState{dev: dev, dir: -1, names: -1, statfd: -1, hostfd: -1}
	m.mu.Lock()
	if fd, ok := m.backing[dev]; ok {
		fs.hostfd = fd
	}
	m.mu.Unlock()
	// statfs needs an fd on the filesystem that holds no file's blocks:
	// the file's directory (a file's own fd would keep it after unlink).
	if d, err := lkl.Open(parentDir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		if st, err := lkl.Fstat(d); err == nil && st.Dev == dev {
			fs.statfd = d
		} else {
			lkl.Close(d)
		}
	}
	var sf unix.Statfs_t
	if lklStatfs(lklfd, &sf) == nil {
		fs.ro = sf.Flags&unix.ST_RDONLY != 0
		fs.noatime = sf.Flags&unix.ST_NOATIME != 0
		fs.relatime = sf.Flags&stRelatime != 0
	}
	// A filesystem that counts no blocks (ramfs) has no bound to keep.
	if !fs.ro && sf.Blocks > 0 && fs.statfd >= 0 {
		if mnt, err := m.stores.get(); err == nil {
			size := m.bound(fs, &sf)
			if dir, id, err := mnt.mount(size); err == nil {
				fs.dir, fs.id, fs.mnt, fs.size = dir, id, mnt, size
				fs.names = dir
			}
		}
	} else if fs.ro {
		// Never written: the tmpfs only gives content files names (no
		// helper process is started for it). Its root's fd keeps it.
		if d := m.stores.direct(); d != nil {
			if dir, id, err := d.mount(unbounded); err == nil {
				d.drop(id)
				fs.names = dir
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.fss[dev]; old != nil {
		fs.close()
		return old, nil
	}
	m.fss[dev] = fs
	return fs, nil
}

// Bounded reports whether writes to files of LKL filesystem dev fail at
// the write when the filesystem is full (false: at write-back).
func (m *Manager) Bounded(dev uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	fs := m.fss[dev]
	return fs != nil && fs.dir >= 0
}

// stRelatime is statfs's flag of a relatime mount (ST_RELATIME).
const stRelatime = 0x1000

// contentNames numbers the content files made in private tmpfs mounts.
var contentNames atomic.Uint64

// create makes an empty content file, and its name in fs.dir (NUL
// terminated), if it has one. kbox's own reads of it (write-backs) must
// not change its access time, which tells guests' reads (O_NOATIME).
//
// In a private tmpfs (fs.names) the file has a name, which no path outside
// kbox's fd of the mount's root reaches: a guest's open of the node reopens it by
// that name (Node.reopen), one tmpfs component, where /proc/self/fd/N
// (all a memfd has) walks procfs and its magic link. The node unlinks it
// when it goes (closeNode).
func (fs *fsState) create(name string, cname *[24]byte) (int, error) {
	if fs.names >= 0 {
		for {
			b := strconv.AppendUint(cname[:0], contentNames.Add(1), 10)
			cname[len(b)] = 0
			fd, err := unix.Openat(fs.names, string(b), unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOATIME, 0o600)
			if err != unix.EEXIST {
				if err != nil {
					cname[0] = 0
				}
				return fd, err
			}
		}
	}
	fd, err := unix.MemfdCreate("kbox:"+name, unix.MFD_CLOEXEC)
	if err == nil {
		fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_NOATIME)
	}
	return fd, err
}

// unlink removes the name of a content file that create made, unless the
// mount is gone already (Release, Close).
func (fs *fsState) unlink(cname *[24]byte) {
	if cname[0] == 0 {
		return
	}
	n := 0
	for n < len(cname) && cname[n] != 0 {
		n++
	}
	fs.mu.Lock()
	if fs.names >= 0 {
		unix.Unlinkat(fs.names, string(cname[:n]), 0)
	}
	fs.mu.Unlock()
	cname[0] = 0
}

// avail is the free space a guest may fill: what statfs calls available,
// without the blocks ext4 keeps for root (kbox's write-backs could use
// them, but how many of them root may use is not in statfs; a root guest
// finds the image full about 5 % early). A thin disk (the /tmp scratch
// disk, a sparse host file) has no more than its host filesystem can
// still give it.
func (m *Manager) avail(fs *fsState, sf *unix.Statfs_t) int64 {
	a := int64(sf.Bavail) * int64(sf.Bsize)
	var hs unix.Statfs_t
	if fs.hostfd >= 0 && unix.Fstatfs(fs.hostfd, &hs) == nil {
		a = min(a, int64(hs.Bavail)*int64(hs.Bsize))
	}
	return a
}

// HostBacked tells that LKL filesystem dev lives on the thin host file
// open at hostfd (it grows as LKL writes): guests may write no more than
// the host can give it, so that a full host disk is ENOSPC at the guest's
// write, not an I/O error of LKL's later.
func (m *Manager) HostBacked(dev uint64, hostfd int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.backing == nil {
		m.backing = map[uint64]int{}
	}
	m.backing[dev] = hostfd
	if fs := m.fss[dev]; fs != nil {
		fs.hostfd = hostfd
	}
}

// margin keeps room for the metadata of new blocks.
func margin(avail int64) int64 { return 1<<20 + avail/256 }

// bound is the tmpfs size that lets guests write what LKL can hold, and
// no more than a growth quota (Quota) still allows.
func (m *Manager) bound(fs *fsState, sf *unix.Statfs_t) int64 {
	a := m.avail(fs, sf)
	room := a - margin(a)
	if q, ok := m.quotaOf(fs.dev); ok {
		room = min(room, q.remaining(sf))
	}
	return fs.alloc + room
}

// growthQuota bounds how much an LKL filesystem's used space may grow
// (limits.image_writes): from the free bytes it had when set.
type growthQuota struct {
	limit    int64
	baseFree int64
}

// remaining is what the filesystem may still grow by, given its statfs.
func (q growthQuota) remaining(sf *unix.Statfs_t) int64 {
	return max(q.limit-(q.baseFree-freeBytes(sf)), 0)
}

// Quota bounds the growth of LKL filesystem dev, open at lklfd (a
// directory), to limit bytes from now on: guests' writes to content
// files beyond it fail natively with ENOSPC (a store-backed filesystem;
// with memfds they fail at write-back). Remaining reports what is left.
func (m *Manager) Quota(dev uint64, lklfd int, limit int64) error {
	var sf unix.Statfs_t
	if err := lklStatfs(lklfd, &sf); err != nil {
		return err
	}
	m.qmu.Lock()
	if m.quotas == nil {
		m.quotas = map[uint64]growthQuota{}
	}
	m.quotas[dev] = growthQuota{limit: limit, baseFree: freeBytes(&sf)}
	m.qmu.Unlock()
	return nil
}

func (m *Manager) quotaOf(dev uint64) (growthQuota, bool) {
	m.qmu.Lock() // not m.mu: bound runs with it held
	defer m.qmu.Unlock()
	q, ok := m.quotas[dev]
	return q, ok
}

// Remaining returns how much LKL filesystem dev, open at lklfd, may
// still grow under its quota, and whether it has one.
func (m *Manager) Remaining(dev uint64, lklfd int) (int64, bool) {
	q, ok := m.quotaOf(dev)
	if !ok {
		return 0, false
	}
	var sf unix.Statfs_t
	if lklStatfs(lklfd, &sf) != nil {
		return 0, true
	}
	return q.remaining(&sf), true
}

// resize keeps the tmpfs size in its band below what bound allows, and at
// least room bytes above what it holds. The caller holds fs.mu.
func (m *Manager) resize(fs *fsState, sf *unix.Statfs_t, room int64) {
	if fs.dir < 0 {
		return
	}
	hi := m.bound(fs, sf)
	need := room
	var ts unix.Statfs_t
	if unix.Fstatfs(fs.dir, &ts) == nil {
		// Never below what it holds (the kernel refuses); a node being
		// filled gets the room it needs even if guests then find the
		// filesystem full a little early.
		need += int64(ts.Blocks-ts.Bfree) * int64(ts.Bsize)
	}
	if fs.size <= hi && fs.size >= hi-2*hysteresis && fs.size >= need {
		return
	}
	target := max(hi-hysteresis, need, 0)
	target = (target + pageSize - 1) / pageSize * pageSize
	if target != fs.size && fs.mnt.resize(fs.id, target) == nil {
		fs.size = target
	}
}

// reserve accounts a new node's LKL blocks and makes room for its content.
// A guest that has just removed files expects their space: frees that LKL
// has not done yet are waited for (a clock tick), unless no more than
// pendSlack bytes were removed since the last new node: a compiler that
// removes its temporary file and makes the next one, or sqlite removing
// its journal at every commit, would wait a tick each time. A guest
// filling the image may then find it full that much early, as the
// hysteresis band allows too.
func (fs *fsState) reserve(m *Manager, alloc int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.alloc += alloc
	if fs.dir >= 0 {
		switch pendingFrees(fs.pendFree, time.Now(), fs.pendUntil) {
		case freesDone, freesForgiven:
			// Forgotten, not left to add up with later removals: a
			// sum kept over many (sqlite's journal, removed at every
			// commit) would be measured from a stale free count.
			fs.pendFree = 0
		case freesAwait:
			for time.Now().Before(fs.pendUntil) {
				var sf unix.Statfs_t
				if lklStatfs(fs.statfd, &sf) != nil || freeBytes(&sf) >= fs.pendBase+fs.pendFree*7/8 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			fs.pendFree = 0
		}
	}
	fs.rebalance(m, alloc+pageSize)
}

// pendSlack is how many bytes of removed files' blocks a new node does not
// wait for LKL to free.
const pendSlack = 2 * hysteresis

// What reserve does about removed files' blocks LKL may not have freed yet.
const (
	freesNone     = iota // none pending
	freesForgiven        // few enough not to wait for: forgotten
	freesDone            // their tick has passed: LKL has freed them
	freesAwait           // wait for them (at most until the tick has passed)
)

// pendingFrees decides what reserve does about pend bytes of removed
// files' blocks expected freed by until.
func pendingFrees(pend int64, now, until time.Time) int {
	switch {
	case pend <= 0:
		return freesNone
	case !now.Before(until):
		return freesDone
	case pend > pendSlack:
		return freesAwait
	}
	return freesForgiven
}

// freeing notes that an unlinked file of alloc bytes is being closed.
func (fs *fsState) freeing(alloc int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var sf unix.Statfs_t
	if fs.dir < 0 || lklStatfs(fs.statfd, &sf) != nil {
		return
	}
	if fs.pendFree == 0 {
		fs.pendBase = freeBytes(&sf)
	}
	fs.pendFree += alloc
	fs.pendUntil = time.Now().Add(60 * time.Millisecond)
}

func freeBytes(sf *unix.Statfs_t) int64 { return int64(sf.Bfree) * int64(sf.Bsize) }

// rebalance resizes the tmpfs from LKL's free space now. The caller holds
// fs.mu.
func (fs *fsState) rebalance(m *Manager, room int64) {
	var sf unix.Statfs_t
	if fs.dir >= 0 && lklStatfs(fs.statfd, &sf) == nil {
		m.resize(fs, &sf, room)
	}
}

// adjust accounts a change of a node's LKL blocks (a write-back moved
// blocks from free to the file: the bound stays).
func (fs *fsState) adjust(m *Manager, delta int64) {
	fs.mu.Lock()
	fs.alloc += delta
	fs.mu.Unlock()
}

// unreserve accounts a node gone; its blocks count as LKL's free space (or
// its file's, which no node holds now).
func (fs *fsState) unreserve(m *Manager, alloc int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.alloc -= alloc
	fs.rebalance(m, 0)
}

// failed keeps a write-back error for the next syncfs or sync.
func (fs *fsState) failed(err error) {
	fs.mu.Lock()
	if fs.err == nil {
		fs.err = err
	}
	fs.mu.Unlock()
}

func (fs *fsState) takeErr() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	err := fs.err
	fs.err = nil
	return err
}

func (fs *fsState) close() {
	if fs.names >= 0 && fs.names != fs.dir {
		unix.Close(fs.names)
	}
	fs.names = -1
	if fs.dir >= 0 {
		unix.Close(fs.dir)
		fs.dir = -1
	}
	if fs.statfd >= 0 {
		lkl.Close(fs.statfd)
		fs.statfd = -1
	}
}

// parentDir is the directory of guest path p.
func parentDir(p string) string {
	i := len(p) - 1
	for i > 0 && p[i] != '/' {
		i--
	}
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// Rebalance brings every tmpfs size in line with LKL's free space; the
// engine calls it after a dispatched syscall that may have changed it, and
// it costs nothing unless a node may be written.
func (m *Manager) Rebalance() {
	if m.hot.Load() == 0 {
		return
	}
	m.mu.Lock()
	fss := make([]*fsState, 0, len(m.fss))
	for _, fs := range m.fss {
		if fs.dir >= 0 {
			fss = append(fss, fs)
		}
	}
	m.mu.Unlock()
	for _, fs := range fss {
		fs.mu.Lock()
		fs.rebalance(m, 0)
		fs.mu.Unlock()
	}
}

// lklStatfs is fstatfs of an LKL fd (LKL's struct statfs has the 64-bit
// generic layout, which is unix.Statfs_t's on amd64 and arm64).
func lklStatfs(fd int, sf *unix.Statfs_t) error {
	if _, le := lkl.Syscall6(lkl.SysFstatfs, uintptr(fd), lkl.PtrOf(sf), 0, 0, 0, 0); le != 0 {
		return le
	}
	return nil
}
