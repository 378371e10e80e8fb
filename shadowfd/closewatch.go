package shadowfd

import (
	"encoding/binary"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Close events. A node lives while guests hold descriptions of its content
// file; when the last one is released, the node is written back and
// becomes idle. Instead of seeing every close(2) (a notification round trip
// per close of any file), kbox watches each content file with inotify:
// IN_CLOSE_WRITE and IN_CLOSE_NOWRITE come when a description of it is
// released (its last fd closed, its last mapping gone), and tell whether it
// could write. Every description is made by kbox (Open, OpenCached), so
// counting them against the events tells when none is left.
//
// The engine reads the events (ReleaseClosed) before it serves a syscall
// that could see what a release changes (a path stat's access time, a
// statfs's free space, an unlink's freed blocks, an exec, a sync): what a
// guest closed before such a syscall is written back before it looks. It
// costs one non-blocking read while any node exists. Other syscalls leave
// the events queued, so a loop of opens and closes handles its closes in
// batches (and writes a node back once per batch, not per close); the
// Manager also reads them every handoutBatch descriptions, well before
// the kernel's queue (16384 events by default) could overflow, and before
// it makes a new node.
//
// If the kernel's event queue overflows, the counts are no longer known:
// every node then stays live (written back on fsync and at exit) until kbox
// exits.

type closeWatch struct {
	once sync.Once
	fd   int // inotify fd (non-blocking), or -1
	mu   sync.Mutex
	wds  map[int32]*Node
}

// start makes the inotify fd, once.
func (w *closeWatch) start() bool {
	w.once.Do(func() {
		w.fd = -1
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
		if err != nil {
			return
		}
		w.fd, w.wds = fd, map[int32]*Node{}
	})
	return w.fd >= 0
}

// add starts watching n's content file; it returns the watch descriptor,
// or -1 when close events are not available.
func (w *closeWatch) add(n *Node) int32 {
	if !w.start() {
		return -1
	}
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(n.content), unix.IN_CLOSE_WRITE|unix.IN_CLOSE_NOWRITE)
	if err != nil {
		return -1
	}
	w.mu.Lock()
	w.wds[int32(wd)] = n
	w.mu.Unlock()
	return int32(wd)
}

// remove stops watching a dropped node.
func (w *closeWatch) remove(wd int32) {
	if wd < 0 || w.fd < 0 {
		return
	}
	w.mu.Lock()
	delete(w.wds, wd)
	w.mu.Unlock()
	unix.InotifyRmWatch(w.fd, uint32(wd))
}

// Watching reports whether close events are served (the tier may then let
// guests close host fds natively).
func (m *Manager) Watching() bool { return m.watchers.start() }

// ReleaseClosed handles the close events queued since the last call:
// nodes whose last description was released are written back and become
// idle.
func (m *Manager) ReleaseClosed() {
	w := &m.watchers
	if m.count.Load() == 0 || w.fd < 0 {
		return
	}
	var buf [16 << 10]byte
	for {
		n, err := unix.Read(w.fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
			if mask&unix.IN_Q_OVERFLOW != 0 {
				m.lostCounts()
				continue
			}
			if mask&(unix.IN_CLOSE_WRITE|unix.IN_CLOSE_NOWRITE) == 0 {
				continue
			}
			w.mu.Lock()
			node := w.wds[wd]
			w.mu.Unlock()
			if node != nil {
				m.release(node, mask&unix.IN_CLOSE_WRITE != 0)
			}
		}
		if n < len(buf)/2 {
			return // the queue was drained: no second read to learn that
		}
	}
}

// handoutBatch is how many descriptions the Manager hands out between two
// readings of the close events.
const handoutBatch = 256

// handedOut counts a description handed out, and reads the close events
// every handoutBatch of them.
func (m *Manager) handedOut() {
	if m.handouts.Add(1)%handoutBatch == 0 {
		m.ReleaseClosed()
	}
}

// close releases the inotify fd.
func (w *closeWatch) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// lostCounts marks every node as held: after a queue overflow no count can
// be trusted.
func (m *Manager) lostCounts() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.nodes {
		n.lost = true
		m.unidle(n)
	}
}
