package shadowfd

import (
	"bufio"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kbox-project/kbox/hostproc"
	"golang.org/x/sys/unix"
)

// Holders. Guests close, dup, fork, pass and map descriptions of content
// files natively, so kbox does not see the last one go. (inotify's close
// events cannot count them: the kernel merges an event into the one queued
// before it when they are alike, so two closes in a row come as one.)
// When it needs to know, kbox looks: it lists the fds of every guest
// process (and its own, where copies taken with pidfd_getfd live) and
// their shared mappings in /proc, and finds the content files among them,
// and whether a holder can write. That costs a few microseconds per guest
// fd, and is done only
//
//   - when the Manager holds maxNodes nodes and makes another (Trim): the
//     nodes no guest holds are written back and all but the keepNodes most
//     recently used dropped;
//   - when a file with a node loses its last name (Unlinked), so that its
//     blocks are freed as on Linux once nobody holds it;
//   - when times set with utimensat wait for a writer to go (TimesSet);
//   - every flushEvery while a writer may exist (the flusher), which
//     writes back what writers wrote and ends the hot state of nodes no
//     writer holds any more.

// holds is what a look found of a node: descriptions of it exist in guest
// processes (or in kbox's own virtual fd table), and one of them can write
// (a writable fd, or a shared writable mapping).
type holds struct{ held, writer bool }

// hostKey is a content file's host device and inode.
type hostKey struct{ dev, ino uint64 }

// scan looks at every holder. It returns nil when kbox cannot tell
// (Holders unset): every node then counts as held.
func (m *Manager) scan() map[*Node]holds { return m.scanFor(nil) }

// scanFor looks at the holders of node only, or of every node (nil).
func (m *Manager) scanFor(only *Node) map[*Node]holds {
	if m.Holders == nil {
		return nil
	}
	m.mu.Lock()
	var idx map[hostKey]*Node
	if only != nil {
		idx = map[hostKey]*Node{{only.hostDev, only.hostIno}: only}
	} else {
		idx = make(map[hostKey]*Node, len(m.nodes))
		for _, n := range m.nodes {
			idx[hostKey{n.hostDev, n.hostIno}] = n
		}
	}
	skip := slices.Clone(m.masters)
	m.mu.Unlock()
	out := make(map[*Node]holds, len(idx))
	self := os.Getpid()
	guestInSelf := false
	for _, pid := range m.Holders() {
		if pid == self {
			// An in-process tier: the guest's fds and mappings are kbox's.
			guestInSelf = true
			continue
		}
		scanFds(pid, idx, out)
		scanMaps(pid, idx, out)
	}
	scanOwnFds(skip, m.NoDescription, m.noDescriptionBelow(), idx, out)
	if guestInSelf {
		scanMaps(self, idx, out)
	}
	return out
}

// noDescriptionBelow is where the numbers NoDescription may report end.
func (m *Manager) noDescriptionBelow() int {
	if m.NoDescription == nil {
		return 0
	}
	return m.NoDescriptionBelow
}

// scanOwnFds marks the nodes whose content files kbox's own process has
// open (copies taken with pidfd_getfd, virtual fds, and in the in-process
// tiers the guest's fds), other than the masters (masters[fd]) and the
// numbers that hold nothing (none, below below). It asks each open number
// of the calling thread's fd table (ownFds) with fstat and F_GETFL.
func scanOwnFds(masters []bool, none func(int) bool, below int, idx map[hostKey]*Node, out map[*Node]holds) {
	ownFds(below, func(fd int) {
		if fd < len(masters) && masters[fd] || fd < below && none(fd) {
			return
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			return // not open
		}
		n := idx[hostKey{st.Dev, st.Ino}]
		if n == nil {
			return
		}
		h := out[n]
		h.held = true
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE != unix.O_RDONLY {
			h.writer = true
		}
		out[n] = h
	})
}

// ownFds calls f with the numbers of the calling thread's fd table that
// may be open: each number below below, where the in-process tiers'
// placeholders fill the table (the caller skips those without a system
// call), then the open ones listed by /proc/thread-self/fd from below on
// (its position is a number plus 2). The table has room for thousands
// (2048 in the seccomp tier) and holds a few dozen above the guest's
// range: a system call for each number it could hold cost 2 ms a look on
// a VM where each costs about 1 µs, at every utimensat of a file dpkg
// unpacks; listing the placeholders cost as much. Without /proc, every
// number below the table's size.
func ownFds(below int, f func(fd int)) {
	for fd := 0; fd < below; fd++ {
		f(fd)
	}
	dir, err := unix.Open("/proc/thread-self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		for fd, size := below, ownFdTableSize(); fd < size; fd++ {
			f(fd)
		}
		return
	}
	defer unix.Close(dir)
	if below > 0 {
		unix.Seek(dir, int64(below)+2, 0) // else the listing starts at 0
	}
	buf := make([]byte, 8192)
	var names []string
	for {
		k, err := unix.ReadDirent(dir, buf)
		if err != nil || k <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:k], -1, names[:0])
		for _, name := range names {
			if fd, err := strconv.Atoi(name); err == nil && fd >= below && fd != dir {
				f(fd)
			}
		}
	}
}

// ownFdTableSize is the size of kbox's fd table (FDSize in
// /proc/self/status): no fd is at or above it.
func ownFdTableSize() int {
	b, err := hostproc.Read("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "FDSize:"); ok {
				if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
					return n
				}
			}
		}
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur < 1<<20 {
		return int(lim.Cur)
	}
	return 1 << 16
}

// scanFds marks the nodes whose content files process pid (a guest
// process, not kbox) has open.
func scanFds(pid int, idx map[hostKey]*Node, out map[*Node]holds) {
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return // gone
	}
	defer unix.Close(dir)
	buf := make([]byte, 8192)
	for {
		k, err := unix.ReadDirent(dir, buf)
		if err != nil || k <= 0 {
			return
		}
		_, _, names := unix.ParseDirent(buf[:k], -1, nil)
		for _, name := range names {
			var st unix.Stat_t
			if unix.Fstatat(dir, name, &st, 0) != nil {
				continue
			}
			n := idx[hostKey{st.Dev, st.Ino}]
			if n == nil {
				continue
			}
			h := out[n]
			h.held = true
			// The link's own mode is the description's access mode.
			var lt unix.Stat_t
			if unix.Fstatat(dir, name, &lt, unix.AT_SYMLINK_NOFOLLOW) != nil || lt.Mode&0o200 != 0 {
				h.writer = true
			}
			out[n] = h
		}
	}
}

// scanMaps marks the nodes whose content files process pid has mapped: a
// mapping holds its description after the fd is closed.
func scanMaps(pid int, idx map[hostKey]*Node, out map[*Node]holds) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset major:minor inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[4] == "0" {
			continue
		}
		maj, mnr, ok := strings.Cut(fields[3], ":")
		ma, err1 := strconv.ParseUint(maj, 16, 32)
		mi, err2 := strconv.ParseUint(mnr, 16, 32)
		ino, err3 := strconv.ParseUint(fields[4], 10, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		n := idx[hostKey{unix.Mkdev(uint32(ma), uint32(mi)), ino}]
		if n == nil {
			continue
		}
		h := out[n]
		h.held = true
		if strings.Contains(fields[1], "w") && strings.Contains(fields[1], "s") {
			h.writer = true
		}
		out[n] = h
	}
}

// heldCheck returns how to tell whether a guest holds a node, for a
// caller that needs nothing else of the look: a write lease on its content
// file (leaseHeld) while the kernel grants them, else a scan of every
// holder (of only, unless nil). Nil: kbox cannot tell. The returned
// function is called with m.mu held.
func (m *Manager) heldCheck(only *Node) func(*Node) bool {
	if m.Holders == nil {
		return nil
	}
	if !m.noLeases.Load() {
		return m.leaseHeld
	}
	hs := m.scanFor(only)
	return func(n *Node) bool { return hs[n].held }
}

// leaseHeld tells whether a description of n's content file other than
// its master exists: a guest's fd, a mapping, kbox's copy of one, one in
// flight in a unix socket. The kernel grants a write lease only to a file
// that no other description has open, for reading or writing, or maps for
// execution (fs/locks.c, check_conflicting_open); it is let go at once.
// No description can be opened meanwhile: every reopen of a node is a
// handout, which the caller's m.mu and n.busy == 0 keep out. Where leases
// are refused (fs.leases-enable = 0), it counts n as held and later looks
// scan instead. n's spare (kbox's own) is closed first: it would count.
// Copies parked for the guest's POSIX locks mean it holds the file (a
// lock goes with the process's first close of any fd of the file).
func (m *Manager) leaseHeld(n *Node) bool {
	if n.content < 0 {
		return false
	}
	m.dropSpareLocked(n)
	if m.unparkLocked(n) {
		return true
	}
	_, err := unix.FcntlInt(uintptr(n.content), unix.F_SETLEASE, unix.F_WRLCK)
	switch err {
	case nil:
		unix.FcntlInt(uintptr(n.content), unix.F_SETLEASE, unix.F_UNLCK)
		return false
	case unix.EAGAIN, unix.EBUSY:
		return true
	}
	m.noLeases.Store(true)
	return true
}

// Trim writes back the nodes no guest holds and drops those whose file has
// no name left and, least recently used first, all but keepNodes (and
// keepBytes of content) of the others.
func (m *Manager) Trim() {
	// Each node's last use is taken before the scan for holders: a node
	// handed out after it (by another thread of an in-process tier) has
	// a later one, and is not dropped even if the scan missed its holder.
	m.mu.Lock()
	uses := make(map[*Node]uint64, len(m.nodes))
	for _, n := range m.nodes {
		uses[n] = n.lastUse
	}
	m.mu.Unlock()
	held := m.heldCheck(nil)
	if held == nil {
		return
	}
	m.mu.Lock()
	type cand struct {
		n       *Node
		lastUse uint64
	}
	var free []cand
	for _, n := range m.nodes {
		if last, seen := uses[n]; seen && n.busy == 0 && !held(n) {
			free = append(free, cand{n, last})
		}
	}
	m.mu.Unlock()
	sort.Slice(free, func(i, j int) bool { return free[i].lastUse > free[j].lastUse })
	kept, keptBytes := int64(0), int64(0)
	for _, c := range free {
		n := c.n
		size, err := m.flush(n)
		if err != nil {
			report(n, err)
			continue // kept, with its error, until a sync reports it or exit
		}
		m.settled(n, holds{})
		m.mu.Lock()
		if n.unlinked || kept >= m.keepNodes || keptBytes+size > keepBytes || size > m.MaxSize {
			// Not handed out since the look (else it may be held).
			if !n.dropped && n.busy == 0 && n.lastUse == c.lastUse {
				m.dropLocked(n)
			}
		} else {
			kept++
			keptBytes += size
		}
		m.mu.Unlock()
	}
}

// Release lets go of LKL filesystem dev, before a guest unmounts it or
// remounts it (read-only): the nodes of its files that no guest holds are
// written back and dropped, and, once none is left, the fs state with its
// LKL fd of a directory there. Otherwise kbox's own LKL fds would keep the
// filesystem busy (EBUSY) after the guest closed all its files, where
// Linux would let it go. Nodes guests still hold stay, as their open
// files would keep it busy on Linux. It reports whether it closed any LKL
// fd: LKL's kernel threads release a closed file a clock tick later, so
// the caller may have to wait for EBUSY to go.
func (m *Manager) Release(dev uint64) bool {
	m.mu.Lock()
	var cands []*Node
	for _, n := range m.nodes {
		if n.key.dev == dev {
			cands = append(cands, n)
		}
	}
	fs := m.fss[dev]
	m.mu.Unlock()
	if fs == nil {
		return false // no node has been made there
	}
	closed := false
	if len(cands) > 0 {
		// Last uses before the scan, as in Trim.
		uses := make([]uint64, len(cands))
		m.mu.Lock()
		for i, n := range cands {
			uses[i] = n.lastUse
		}
		m.mu.Unlock()
		hs := m.scan()
		if hs == nil {
			return false // kbox cannot tell who holds them
		}
		for i, n := range cands {
			m.mu.Lock()
			idle := !n.dropped && n.busy == 0 && !hs[n].held
			last := uses[i]
			m.mu.Unlock()
			if !idle {
				continue
			}
			if _, err := m.flush(n); err != nil {
				report(n, err)
				continue // kept, with its error, as Trim keeps it
			}
			m.settled(n, holds{})
			m.mu.Lock()
			// Not handed out since the look (else it may be held).
			if !n.dropped && n.busy == 0 && n.lastUse == last {
				m.dropLocked(n)
				closed = true
			}
			m.mu.Unlock()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.nodes {
		if n.key.dev == dev {
			return closed
		}
	}
	if m.fss[dev] == fs {
		delete(m.fss, dev)
		fs.mu.Lock()
		fs.released = true
		if fs.statfd >= 0 {
			closed = true
		}
		fs.close()
		fs.mu.Unlock()
	}
	return closed
}

// settled applies what a look found of a node that is written back: no
// writer holds it any more (its hot state ends, unless a writable
// description was handed out since opens), and times set meanwhile
// (TimesSet) can be mirrored.
func (m *Manager) settled(n *Node, h holds) {
	if h.writer {
		return
	}
	n.mu.Lock()
	if n.timesSet {
		m.mirrorTimes(n)
	}
	n.mu.Unlock()
}

// flushEvery is how often the flusher writes back what writers wrote: the
// most a kbox killed by SIGKILL loses of data not fsynced (Linux keeps it
// in its page cache; LKL's is in kbox).
const flushEvery = 2 * time.Second

// flusher writes nodes back in the background while writers may exist:
// every flushEvery, and soon when a write or close asks (poke, prompt.go;
// such rounds spaced by promptGap at least).
type flusher struct {
	mu      sync.Mutex
	running bool
	quit    chan struct{}
	done    chan struct{}
	pokes   chan struct{}
}

// start runs the flusher unless it runs. The caller holds m.mu.
func (f *flusher) start(m *Manager) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		return
	}
	f.running = true
	f.quit, f.done, f.pokes = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	go f.run(m, f.quit, f.done, f.pokes)
}

// poke asks a running flusher for a round now.
func (f *flusher) poke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		select {
		case f.pokes <- struct{}{}:
		default:
		}
	}
}

func (f *flusher) run(m *Manager, quit, done, pokes chan struct{}) {
	defer close(done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	var last time.Time
	var took time.Duration
	for {
		poked := false
		select {
		case <-quit:
			return
		case <-t.C:
		case <-pokes:
			poked = true
			// A round reads each file it writes back through: rounds
			// writers ask for are spaced by promptSpacing times the
			// last one's length (a fifth of a CPU at most), by
			// promptGap at least.
			if wait := max(promptGap, promptSpacing*took) - time.Since(last); wait > 0 {
				select {
				case <-quit:
					return
				case <-time.After(wait):
				}
			}
		}
		t0 := time.Now()
		if asked := m.prompt.take(); poked && asked != nil {
			m.flushAsked(asked)
		} else {
			m.flushHot()
		}
		last = time.Now()
		took = last.Sub(t0)
		f.mu.Lock()
		if m.hot.Load() == 0 {
			f.running = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
	}
}

func (f *flusher) stop() {
	f.mu.Lock()
	if !f.running {
		f.mu.Unlock()
		return
	}
	f.running = false
	quit, done := f.quit, f.done
	f.mu.Unlock()
	close(quit)
	<-done
}

// flushHot writes back every node a writer may have written, and ends the
// hot state of those no writer holds any more. It returns the nodes it
// wrote back, with each one's error.
func (m *Manager) flushHot() map[*Node]error {
	m.rounds.Lock()
	defer m.rounds.Unlock()
	// The writable opens of each node are counted before the scan for
	// writers: a description handed out after it changes the count, so
	// the node stays hot even though the scan did not see its writer.
	nodes := m.hotNodes()
	if len(nodes) == 0 {
		return nil
	}
	counts := make([]uint64, len(nodes))
	for i, n := range nodes {
		counts[i] = n.opens.Load()
	}
	hs := m.scan()
	done := make(map[*Node]error, len(nodes))
	for i, n := range nodes {
		done[n] = m.round(n, counts[i], hs, true)
	}
	return done
}

// round writes n back, and ends its hot state if hs (a look for holders
// taken after n's writable opens were counted as opens; nil: none) finds
// no writer holding it, telling LKL of the writers' close (WritersGone)
// when tell.
func (m *Manager) round(n *Node, opens uint64, hs map[*Node]holds, tell bool) error {
	if _, err := m.flush(n); err != nil {
		return err
	}
	if hs == nil || hs[n].writer {
		return nil
	}
	m.settled(n, hs[n])
	m.mu.Lock()
	ended := n.opens.Load() == opens && n.wroteSince.CompareAndSwap(true, false)
	if ended {
		m.hot.Add(-1)
	}
	m.mu.Unlock()
	if ended {
		m.unwatchContent(n)
	}
	if ended && tell && m.WritersGone != nil {
		n.mu.Lock()
		if n.lklfd >= 0 {
			m.WritersGone(n.lklfd)
		}
		n.mu.Unlock()
	}
	return nil
}

func (m *Manager) hotNodes() []*Node {
	if m.hot.Load() == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Node
	for _, n := range m.nodes {
		if n.wroteSince.Load() {
			out = append(out, n)
		}
	}
	return out
}

// FlushDirty writes back the nodes whose content changed since their last
// write-back (a guest process exits; statfs is asked): cheap when nothing
// was written.
func (m *Manager) FlushDirty() {
	for _, n := range m.hotNodes() {
		var hs unix.Stat_t
		n.mu.Lock()
		changed := n.content >= 0 && unix.Fstat(n.content, &hs) == nil && (hs.Ctim != n.synced || recent(n.synced))
		n.mu.Unlock()
		if changed {
			m.flush(n)
		}
	}
}
