package shadowfd

import (
	"os"
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
// the flusher run a round at once, at most one per promptGap, and LKL
// reports the events a moment after the guest's own write or close.

// promptGap is the least time between two rounds a write or close asks
// for: a guest writing without pause makes one write-back per promptGap.
const promptGap = 10 * time.Millisecond

// prompter is the host inotify fd that watches written content files.
type prompter struct {
	once sync.Once
	on   atomic.Bool
	mu   sync.Mutex // file, and watches made with its fd
	file *os.File   // nil: none (not asked, or the host refused one)
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
		m.prompt.file = os.NewFile(uintptr(fd), "kbox-writes")
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
	// The watch goes with the content file's inode (IN_IGNORED, read and
	// dropped below); one per inode, so a second is the first again.
	unix.InotifyAddWatch(int(m.prompt.file.Fd()), "/proc/self/fd/"+strconv.Itoa(n.content), unix.IN_MODIFY|unix.IN_CLOSE_WRITE)
}

// promptLoop asks the flusher for a round at each batch of events, until
// the fd is closed (stopPrompt).
func (m *Manager) promptLoop(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 64*unix.SizeofInotifyEvent)
	for {
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			_, rerr = unix.Read(int(fd), buf)
			return rerr != unix.EAGAIN
		}); err != nil {
			return
		}
		if rerr != nil && rerr != unix.EINTR {
			return
		}
		m.flusher.poke()
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
	opens := n.opens.Load()
	hs := m.scanFor(n)
	if _, err := m.flush(n); err != nil || hs == nil || hs[n].writer {
		return
	}
	m.settled(n, hs[n])
	m.mu.Lock()
	if n.opens.Load() == opens && n.wroteSince.CompareAndSwap(true, false) {
		m.hot.Add(-1)
	}
	m.mu.Unlock()
}
