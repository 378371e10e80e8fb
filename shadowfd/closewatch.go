package shadowfd

import (
	"encoding/binary"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Close events of writable shadows. A writable shadow is written back when
// the guest's last fd of it closes. Instead of seeing every close(2) (a
// notification round trip per close of any file), the Manager watches its
// writable memfds with inotify (IN_CLOSE_WRITE, queued while the closing
// task is still in close(2)) and writes back the closed ones before the
// supervisor serves the next syscall, which is before any guest can
// observe the file through kbox again.

// WatchCloses enables close events. Once it returns nil, the caller may let
// guests close host fds natively, provided it calls WriteBackClosed before
// serving each syscall.
func (m *Manager) WatchCloses() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inotify > 0 {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return err
	}
	m.inotify = fd
	m.watches = map[int32]*Writable{}
	return nil
}

// watch registers w for close events; the caller holds m.mu.
func (m *Manager) watch(w *Writable) error {
	if m.inotify <= 0 {
		return nil
	}
	wd, err := unix.InotifyAddWatch(m.inotify, "/proc/self/fd/"+strconv.Itoa(w.MemFd), unix.IN_CLOSE_WRITE)
	if err != nil {
		return err
	}
	m.watches[int32(wd)] = w
	return nil
}

// WriteBackClosed writes back every writable shadow whose guest fds were
// all closed since the last call. It costs one non-blocking read when any
// writable shadow exists, and nothing otherwise.
func (m *Manager) WriteBackClosed() {
	if m.nwritable.Load() == 0 || m.inotify <= 0 {
		return
	}
	var buf [4096]byte
	for {
		n, err := unix.Read(m.inotify, buf[:])
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
				m.report(m.WriteBackAll())
				continue
			}
			if mask&unix.IN_CLOSE_WRITE == 0 {
				continue
			}
			m.mu.Lock()
			w := m.watches[wd]
			m.mu.Unlock()
			if w != nil {
				m.report(m.WriteBack(w))
			}
		}
	}
}

func (m *Manager) report(err error) {
	if err != nil {
		os.Stderr.WriteString("kbox: " + err.Error() + "\n")
	}
}
