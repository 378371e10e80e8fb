package shadowfd

import (
	"encoding/binary"
	"os"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Prompt write-back, for guests that watch files (inotify).
//
// Guests write and close shadows natively, so LKL hears of a write at its
// write-back and of a writer's last close when the flusher finds it gone
// (holders.go): both at the flusher's next round, up to flushEvery later.
// A guest's inotify watcher (tail -f, a build tool's watch mode) would wait
// that long for IN_MODIFY and IN_CLOSE_WRITE. Once a guest has an inotify
// fd (WatchWrites), kbox watches the content files of the nodes written
// since with a host inotify fd of its own: each write or close there makes
// the flusher run a round at once, at most one per promptGap (fewer
// when rounds are long: a round reads every written file through), and LKL
// reports the events a moment after the guest's own write or close.

// promptGap is the least time between two rounds a write or close asks
// for: a guest writing without pause makes one write-back per promptGap.
const promptGap = 2 * time.Millisecond

// promptSpacing times a round's length is the least time from its end to
// the next round a write or close asks for.
const promptSpacing = 4

// prompter is the host inotify fd that watches written content files.
type prompter struct {
	once sync.Once
	on   atomic.Bool
	mu   sync.Mutex       // what follows
	file *os.File         // nil: none (not asked, or the host refused one)
	fd   int              // file's number, for the watches
	wds  map[int32]*Node  // the node of each watch
	byN  map[*Node]int32  // the watch of each node
	asks map[*Node]uint32 // nodes written (IN_MODIFY) or closed since the last round
	lost bool             // events were lost since the last round (IN_Q_OVERFLOW)
}

// take returns the nodes asked for since the last round, or nil: none,
// or events were lost (a round of every hot node, then).
func (p *prompter) take() map[*Node]uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	asks, lost := p.asks, p.lost
	p.asks, p.lost = nil, false
	if lost {
		return nil
	}
	return asks
}

// WatchWrites makes writes and closes of shadows reach LKL promptly from
// now on (see above). Without a host inotify fd (the host's limit of
// instances reached) they reach it at the flusher's rounds, as before.
func (m *Manager) WatchWrites() {
	m.prompt.once.Do(func() {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
		if err != nil {
			return
		}
		m.prompt.mu.Lock()
		m.prompt.file, m.prompt.fd = os.NewFile(uintptr(fd), "kbox-writes"), fd
		m.prompt.mu.Unlock()
		m.prompt.on.Store(true)
		go m.promptLoop(m.prompt.file)
		for _, n := range m.hotNodes() {
			m.watchContent(n)
		}
	})
}

// watchContent watches n's content file for writes and closes. The caller
// may hold m.mu, not n.mu.
func (m *Manager) watchContent(n *Node) {
	if !m.prompt.on.Load() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.content < 0 {
		return
	}
	m.prompt.mu.Lock()
	defer m.prompt.mu.Unlock()
	if m.prompt.file == nil {
		return
	}
	// The watch goes with the content file's inode (IN_IGNORED); one per
	// inode, so a second is the first again.
	wd, err := unix.InotifyAddWatch(m.prompt.fd, "/proc/self/fd/"+strconv.Itoa(n.content), unix.IN_MODIFY|unix.IN_CLOSE_WRITE)
	if err == nil {
		if m.prompt.wds == nil {
			m.prompt.wds, m.prompt.byN = map[int32]*Node{}, map[*Node]int32{}
		}
		m.prompt.wds[int32(wd)] = n
		m.prompt.byN[n] = int32(wd)
	}
}

// unwatchContent ends the watch of n's content file, once n is not hot
// any more or is dropped: the host's watches (max_user_watches, shared by
// every process of kbox's uid) are held only while a file is written.
func (m *Manager) unwatchContent(n *Node) {
	if !m.prompt.on.Load() {
		return
	}
	m.prompt.mu.Lock()
	defer m.prompt.mu.Unlock()
	wd, ok := m.prompt.byN[n]
	if !ok {
		return
	}
	delete(m.prompt.byN, n)
	delete(m.prompt.wds, wd)
	if m.prompt.file != nil {
		unix.InotifyRmWatch(m.prompt.fd, uint32(wd))
	}
}

// promptLoop notes the nodes whose content files were written or closed
// and asks the flusher for a round, until the fd is closed (stopPrompt).
func (m *Manager) promptLoop(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 64*unix.SizeofInotifyEvent)
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf)
			return rerr != unix.EAGAIN
		}); err != nil {
			return
		}
		if rerr == unix.EINTR {
			continue
		}
		if rerr != nil {
			return
		}
		m.noteEvents(buf[:n])
		m.flusher.poke()
	}
}

// noteEvents notes the nodes inotify events b name (no names: each watch
// is of a file).
func (m *Manager) noteEvents(b []byte) {
	m.prompt.mu.Lock()
	defer m.prompt.mu.Unlock()
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b))
		mask := binary.NativeEndian.Uint32(b[4:])
		l := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:]))
		b = b[min(l, len(b)):]
		n := m.prompt.wds[wd]
		switch {
		case mask&unix.IN_IGNORED != 0:
			delete(m.prompt.wds, wd) // the content file is gone
			if n != nil && m.prompt.byN[n] == wd {
				delete(m.prompt.byN, n)
			}
		case n != nil:
			if m.prompt.asks == nil {
				m.prompt.asks = map[*Node]uint32{}
			}
			m.prompt.asks[n] |= mask
		case mask&unix.IN_Q_OVERFLOW != 0:
			m.prompt.lost = true
		}
	}
}

// flushAsked is the flusher's round for the nodes written or closed since
// the last round (asks): each is written back, and one whose writer
// closed it ends its hot state if no writer holds it any more.
func (m *Manager) flushAsked(asks map[*Node]uint32) {
	m.rounds.Lock()
	defer m.rounds.Unlock()
	nodes := make([]*Node, 0, len(asks))
	closed := 0
	m.mu.Lock()
	for n, mask := range asks {
		if !n.dropped && n.wroteSince.Load() {
			nodes = append(nodes, n)
			if mask&unix.IN_CLOSE_WRITE != 0 {
				closed++
			}
		}
	}
	m.mu.Unlock()
	counts := make([]uint64, len(nodes))
	for i, n := range nodes {
		counts[i] = n.opens.Load()
	}
	var hs map[*Node]holds
	switch {
	case closed == 1 && len(nodes) == 1:
		hs = m.scanFor(nodes[0])
	case closed > 0:
		hs = m.scan()
	}
	for i, n := range nodes {
		h := hs
		if asks[n]&unix.IN_CLOSE_WRITE == 0 {
			h = nil // written to: still held by its writer
		}
		m.round(n, counts[i], h, true)
	}
}

// stopPrompt closes the host inotify fd, which ends promptLoop.
func (m *Manager) stopPrompt() {
	m.prompt.on.Store(false)
	m.prompt.mu.Lock()
	defer m.prompt.mu.Unlock()
	if m.prompt.file != nil {
		m.prompt.file.Close()
		m.prompt.file = nil
	}
}

// Quiet writes n back before a guest watches its file, and ends its hot
// state if no writer holds it any more, without WritersGone: the writes
// and the close that came before the watch are not the watcher's events
// (Linux reported them to the watches there were). A writer still
// holding it is reported as usual.
func (m *Manager) Quiet(n *Node) {
	if !n.wroteSince.Load() {
		return
	}
	m.rounds.Lock()
	defer m.rounds.Unlock()
	m.quiet(n)
}

// quiet is Quiet with m.rounds held.
func (m *Manager) quiet(n *Node) {
	opens := n.opens.Load()
	m.round(n, opens, m.scanFor(n), false)
}

// QuietIn is Quiet for each hot node opened by a name in directory dir (a
// clean absolute guest path), before a guest watches dir: a directory's
// watch reports its files' writes and closes. One look for holders serves
// them all. A node renamed out of dir since is left to the flusher.
func (m *Manager) QuietIn(dir string) {
	if m.hot.Load() == 0 {
		return
	}
	m.rounds.Lock()
	defer m.rounds.Unlock()
	var in []*Node
	for _, n := range m.hotNodes() {
		if path.Dir(n.path) == dir {
			in = append(in, n)
		}
	}
	m.quietNodes(in)
}

// QuietAll is Quiet for every hot node, when the guest has no watch (its
// first inotify fd): what was written and closed before can be no
// watch's event.
func (m *Manager) QuietAll() {
	if m.hot.Load() == 0 {
		return
	}
	m.rounds.Lock()
	defer m.rounds.Unlock()
	m.quietNodes(m.hotNodes())
}

// quietNodes is quiet for nodes, with one look for holders. The caller
// holds m.rounds.
func (m *Manager) quietNodes(nodes []*Node) {
	switch len(nodes) {
	case 0:
		return
	case 1:
		m.quiet(nodes[0])
		return
	}
	counts := make([]uint64, len(nodes))
	for i, n := range nodes {
		counts[i] = n.opens.Load()
	}
	hs := m.scan()
	for i, n := range nodes {
		m.round(n, counts[i], hs, false)
	}
}
