package shadowfd

import (
	"encoding/binary"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// event is one host inotify event of watch wd, with a name of l bytes.
func event(wd int32, mask uint32, l int) []byte {
	b := make([]byte, unix.SizeofInotifyEvent+l)
	binary.NativeEndian.PutUint32(b, uint32(wd))
	binary.NativeEndian.PutUint32(b[4:], mask)
	binary.NativeEndian.PutUint32(b[12:], uint32(l))
	return b
}

// TestNoteEvents: the host inotify's events name the nodes a round must
// write back (their masks or'ed), an IN_IGNORED forgets its watch, an
// overflow asks for a round of every hot node (no asks), and a cut event
// or an unknown watch is ignored.
func TestNoteEvents(t *testing.T) {
	a, b := &Node{}, &Node{}
	cat := func(evs ...[]byte) []byte {
		var out []byte
		for _, e := range evs {
			out = append(out, e...)
		}
		return out
	}
	for _, c := range []struct {
		name   string
		events []byte
		asks   map[*Node]uint32
		wds    int
	}{
		{"write", event(1, unix.IN_MODIFY, 0), map[*Node]uint32{a: unix.IN_MODIFY}, 2},
		{"write and close", cat(event(1, unix.IN_MODIFY, 0), event(1, unix.IN_CLOSE_WRITE, 0), event(2, unix.IN_MODIFY, 0)),
			map[*Node]uint32{a: unix.IN_MODIFY | unix.IN_CLOSE_WRITE, b: unix.IN_MODIFY}, 2},
		{"gone", cat(event(2, unix.IN_CLOSE_WRITE, 0), event(2, unix.IN_IGNORED, 0)), map[*Node]uint32{b: unix.IN_CLOSE_WRITE}, 1},
		{"unknown watch", event(7, unix.IN_MODIFY, 0), nil, 2},
		{"overflow", cat(event(1, unix.IN_MODIFY, 0), event(-1, unix.IN_Q_OVERFLOW, 0), event(2, unix.IN_MODIFY, 0)), nil, 2},
		{"a name, then a cut event", cat(event(1, unix.IN_MODIFY, 16), event(2, unix.IN_MODIFY, 0)[:10]), map[*Node]uint32{a: unix.IN_MODIFY}, 2},
	} {
		m := &Manager{}
		m.prompt.wds = map[int32]*Node{1: a, 2: b}
		m.prompt.byN = map[*Node]int32{a: 1, b: 2}
		m.noteEvents(c.events)
		got := m.prompt.take()
		if len(got) != len(c.asks) {
			t.Errorf("%s: asks %v, want %v", c.name, got, c.asks)
			continue
		}
		for n, mask := range c.asks {
			if got[n] != mask {
				t.Errorf("%s: mask %#x, want %#x", c.name, got[n], mask)
			}
		}
		if len(m.prompt.wds) != c.wds || len(m.prompt.byN) != c.wds {
			t.Errorf("%s: %d and %d watches left, want %d", c.name, len(m.prompt.wds), len(m.prompt.byN), c.wds)
		}
		if m.prompt.take() != nil {
			t.Errorf("%s: asks not taken", c.name)
		}
	}
}

// TestPromptStops: the host inotify fd WatchWrites makes notes a write to
// a watched content file, and is closed at once when the Manager stops
// it, its reader waiting for the next event (a session's Manager stops
// while kbox goes on).
func TestPromptStops(t *testing.T) {
	m := New()
	m.WatchWrites()
	if !m.prompt.on.Load() {
		t.Skip("SKIP: the host gave no inotify fd")
	}
	fd := m.prompt.fd
	// A written node's watch: the poller's read waits.
	f, err := os.Create(t.TempDir() + "/content")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := &Node{content: int(f.Fd())}
	m.watchContent(n)
	if _, ok := m.prompt.byN[n]; !ok {
		t.Fatal("no watch of the content file")
	}
	// An event read, and the reader waiting for the next.
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if asks := m.prompt.take(); asks[n]&unix.IN_MODIFY == 0 {
		t.Fatalf("the write was not noted: %v", asks)
	}
	m.stopPrompt()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != 0 && !isInotify(fd) {
			return // closed (or the number reused by another file)
		}
		if time.Now().After(deadline) {
			t.Fatalf("fd %d still open 2 s after stopPrompt", fd)
		}
	}
}

// isInotify reports whether fd is an inotify fd.
func isInotify(fd int) bool {
	l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	return err == nil && l == "anon_inode:inotify"
}
