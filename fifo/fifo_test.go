package fifo

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// opener is a guest open for the tests: its "guest fd" is a dup of the file
// it was given.
type opener struct {
	gone   atomic.Bool
	fd     int
	answer chan result
}

type result struct {
	fd int
	en unix.Errno
}

func newOpener() *opener { return &opener{fd: -1, answer: make(chan result, 2)} }

func (o *opener) later() Opener { return o }

func (o *opener) Pid() int { return -1 } // no such thread: no signal

func (o *opener) Valid() error {
	if o.gone.Load() {
		return unix.ENOENT
	}
	return nil
}

func (o *opener) AddFD(hostfd int, cloexec bool) (int, error) {
	fd, err := unix.FcntlInt(uintptr(hostfd), unix.F_DUPFD_CLOEXEC, 0)
	o.fd = fd
	return fd, err
}

func (o *opener) Reply(val int64) error { o.answer <- result{fd: int(val)}; return nil }

func (o *opener) ReplyErrno(en unix.Errno) error { o.answer <- result{fd: -1, en: en}; return nil }

// answered returns o's answer, failing the test if there is none.
func (o *opener) answered(t *testing.T) result {
	t.Helper()
	select {
	case r := <-o.answer:
		return r
	default:
		t.Fatal("open not answered")
	}
	return result{}
}

// unanswered checks that o has no answer.
func (o *opener) unanswered(t *testing.T) {
	t.Helper()
	select {
	case r := <-o.answer:
		t.Fatalf("open answered: %+v", r)
	default:
	}
}

func fds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// settled waits until cond holds, failing after a generous deadline.
func settled(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal(what)
}

func newSet(t *testing.T) *Set {
	t.Setenv("TMPDIR", t.TempDir())
	s := New()
	s.Poll = 5 * time.Millisecond
	return s
}

func noPark(t *testing.T) func() Opener {
	return func() Opener {
		t.Error("open parked")
		return newOpener()
	}
}

// mustOpen opens without parking.
func mustOpen(t *testing.T, s *Set, k Key, flags int) int {
	t.Helper()
	fd, parked, err := s.Open(k, flags, noPark(t))
	if err != nil || parked {
		t.Fatalf("Open(%#x): fd %d parked %v err %v", flags, fd, parked, err)
	}
	return fd
}

// park opens for o, which must be parked.
func park(t *testing.T, s *Set, k Key, flags int, o *opener) {
	t.Helper()
	fd, parked, err := s.Open(k, flags, o.later)
	if err != nil || !parked {
		t.Fatalf("Open(%#x): fd %d parked %v err %v, want parked", flags, fd, parked, err)
	}
}

func roundTrip(t *testing.T, w, r int) {
	t.Helper()
	var b [1]byte
	if n, err := unix.Write(w, []byte("x")); n != 1 {
		t.Fatalf("write: %v", err)
	}
	if n, err := unix.Read(r, b[:]); n != 1 || b[0] != 'x' {
		t.Fatalf("read: %d %v", n, err)
	}
}

func eof(t *testing.T, r int) {
	t.Helper()
	if n, err := unix.Read(r, make([]byte, 1)); n != 0 || err != nil {
		t.Errorf("no EOF: %d %v", n, err)
	}
}

func TestOpenWithoutWaiting(t *testing.T) {
	s := newSet(t)
	defer s.Close()
	k := Key{1, 2}
	r := mustOpen(t, s, k, unix.O_RDONLY|unix.O_NONBLOCK)
	eof(t, r) // no writer
	w := mustOpen(t, s, k, unix.O_WRONLY|unix.O_NONBLOCK)
	roundTrip(t, w, r)
	w2 := mustOpen(t, s, k, unix.O_WRONLY) // a reader is there
	if fl, _ := unix.FcntlInt(uintptr(w2), unix.F_GETFL, 0); fl&unix.O_NONBLOCK != 0 {
		t.Errorf("blocking writer has O_NONBLOCK")
	}
	roundTrip(t, w2, r)
	unix.Close(w)
	unix.Close(w2)
	eof(t, r)
	unix.Close(r)
	if _, _, err := s.Open(k, unix.O_WRONLY|unix.O_NONBLOCK, noPark(t)); err != unix.ENXIO {
		t.Errorf("O_NONBLOCK writer without a reader: %v, want ENXIO", err)
	}
	rw := mustOpen(t, s, k, unix.O_RDWR)
	roundTrip(t, rw, rw)
	unix.Close(rw)
	// Another image FIFO is another host FIFO.
	a := mustOpen(t, s, Key{1, 3}, unix.O_RDWR|unix.O_NONBLOCK)
	b := mustOpen(t, s, k, unix.O_RDWR|unix.O_NONBLOCK)
	unix.Write(a, []byte("a"))
	if n, _ := unix.Read(b, make([]byte, 1)); n > 0 {
		t.Errorf("data crossed between two FIFOs")
	}
	unix.Close(a)
	unix.Close(b)
	if s.Len() != 2 {
		t.Errorf("%d host FIFOs, want 2", s.Len())
	}
	// No host path names them.
	if ents, _ := os.ReadDir(os.TempDir()); len(ents) != 0 {
		t.Errorf("host names left in %s: %v", os.TempDir(), ents)
	}
}

func TestReaderWaitsForWriter(t *testing.T) {
	s := newSet(t)
	defer s.Close()
	k := Key{1, 2}
	o := newOpener()
	park(t, s, k, unix.O_RDONLY, o)
	o.unanswered(t)
	// The parked reader counts: a non-blocking writer opens.
	w := mustOpen(t, s, k, unix.O_WRONLY|unix.O_NONBLOCK)
	if res := o.answered(t); res.en != 0 || res.fd != o.fd {
		t.Fatalf("answer %+v", res)
	}
	if fl, _ := unix.FcntlInt(uintptr(o.fd), unix.F_GETFL, 0); fl&(unix.O_ACCMODE|unix.O_NONBLOCK) != unix.O_RDONLY {
		t.Errorf("reader's flags %#x", fl)
	}
	roundTrip(t, w, o.fd)
	unix.Close(w)
	eof(t, o.fd)
	unix.Close(o.fd)
}

func TestWriterWaitsForReader(t *testing.T) {
	s := newSet(t)
	defer s.Close()
	k := Key{1, 2}
	o := newOpener()
	park(t, s, k, unix.O_WRONLY|unix.O_APPEND, o)
	o.unanswered(t)
	r := mustOpen(t, s, k, unix.O_RDONLY|unix.O_NONBLOCK)
	if res := o.answered(t); res.en != 0 {
		t.Fatalf("answer %+v", res)
	}
	fl, _ := unix.FcntlInt(uintptr(o.fd), unix.F_GETFL, 0)
	if fl&(unix.O_ACCMODE|unix.O_NONBLOCK|unix.O_APPEND) != unix.O_WRONLY|unix.O_APPEND {
		t.Errorf("writer's flags %#x", fl)
	}
	roundTrip(t, o.fd, r)
	unix.Close(o.fd)
	unix.Close(r)
}

// A blocking reader releases the parked writers and opens itself, as on
// Linux a reader and a writer waiting for each other both return.
func TestBlockingPairs(t *testing.T) {
	s := newSet(t)
	defer s.Close()
	k := Key{1, 2}
	o := newOpener()
	park(t, s, k, unix.O_WRONLY, o)
	r := mustOpen(t, s, k, unix.O_RDONLY)
	if res := o.answered(t); res.en != 0 {
		t.Fatalf("answer %+v", res)
	}
	roundTrip(t, o.fd, r)
	unix.Close(o.fd)
	eof(t, r)
	unix.Close(r)
}

// Whether a blocking reader waits depends on the writers there are,
// opened earlier and held by guests.
func TestReaderSeesWriters(t *testing.T) {
	s := newSet(t)
	defer s.Close()
	k := Key{1, 2}
	r := mustOpen(t, s, k, unix.O_RDONLY|unix.O_NONBLOCK)
	w := mustOpen(t, s, k, unix.O_WRONLY)
	unix.Close(r)
	r = mustOpen(t, s, k, unix.O_RDONLY) // w is there
	roundTrip(t, w, r)
	unix.Close(w) // gone again: the next reader waits
	o := newOpener()
	park(t, s, k, unix.O_RDONLY, o)
	o.unanswered(t)
	unix.Close(r)
	w = mustOpen(t, s, k, unix.O_WRONLY)
	if res := o.answered(t); res.en != 0 {
		t.Fatalf("answer %+v", res)
	}
	unix.Close(w)
	unix.Close(o.fd)
}

// Guests that wait at once are released at once, each with a file of its
// own.
func TestWaitersReleasedTogether(t *testing.T) {
	s := newSet(t)
	defer s.Close()
	k := Key{1, 2}
	var ops []*opener
	for i := 0; i < 3; i++ {
		o := newOpener()
		park(t, s, k, unix.O_RDONLY, o)
		ops = append(ops, o)
	}
	if n := s.Parked(); n != 3 {
		t.Errorf("%d parked, want 3", n)
	}
	w := mustOpen(t, s, k, unix.O_RDWR)
	for _, o := range ops {
		if res := o.answered(t); res.en != 0 {
			t.Fatalf("answer %+v", res)
		}
	}
	if n := s.Parked(); n != 0 {
		t.Errorf("%d parked, want 0", n)
	}
	unix.Close(w)
	for _, o := range ops {
		eof(t, o.fd)
		unix.Close(o.fd)
	}
}

// A guest that dies while it waits leaves nothing behind: no reader (its
// token), no goroutine, no fd, and it is never answered.
func TestDeadWaiterDropped(t *testing.T) {
	s := newSet(t)
	defer s.Close()
	k := Key{1, 2}
	// Make the node and the tee pipe.
	w := mustOpen(t, s, k, unix.O_RDWR)
	unix.Close(mustOpen(t, s, k, unix.O_RDONLY))
	unix.Close(w)
	g0, f0 := runtime.NumGoroutine(), fds(t)
	for _, flags := range []int{unix.O_RDONLY, unix.O_WRONLY} {
		o := newOpener()
		park(t, s, k, flags, o)
		o.gone.Store(true)
		settled(t, "parked open not dropped", func() bool { return s.Parked() == 0 })
		if flags == unix.O_RDONLY {
			if _, _, err := s.Open(k, unix.O_WRONLY|unix.O_NONBLOCK, noPark(t)); err != unix.ENXIO {
				t.Errorf("writer after a dead reader: %v, want ENXIO", err)
			}
		} else {
			unix.Close(mustOpen(t, s, k, unix.O_RDONLY|unix.O_NONBLOCK))
		}
		o.unanswered(t)
	}
	settled(t, "goroutines left", func() bool { return runtime.NumGoroutine() <= g0 })
	if f := fds(t); f != f0 {
		t.Errorf("%d fds, want %d", f, f0)
	}
}

// Close fails parked opens and leaves no goroutine and no fd.
func TestClose(t *testing.T) {
	g0, f0 := runtime.NumGoroutine(), fds(t)
	s := newSet(t)
	var ops []*opener
	for i, flags := range []int{unix.O_RDONLY, unix.O_WRONLY, unix.O_RDONLY} {
		o := newOpener()
		park(t, s, Key{1, uint64(i)}, flags, o)
		ops = append(ops, o)
	}
	s.Close()
	for _, o := range ops {
		if res := o.answered(t); res.en != unix.EINTR {
			t.Errorf("answer %+v, want EINTR", res)
		}
	}
	if _, _, err := s.Open(Key{1, 0}, unix.O_RDWR, noPark(t)); err == nil {
		t.Errorf("Open after Close succeeded")
	}
	s.Close()
	settled(t, "goroutines left", func() bool { return runtime.NumGoroutine() <= g0 })
	if f := fds(t); f != f0 {
		t.Errorf("%d fds after Close, want %d", f, f0)
	}
}

func TestInterrupts(t *testing.T) {
	bit := func(sig unix.Signal) uint64 { return 1 << (sig - 1) }
	chld, alrm, term, tstp := bit(unix.SIGCHLD), bit(unix.SIGALRM), bit(unix.SIGTERM), bit(unix.SIGTSTP)
	for _, c := range []struct {
		name                    string
		pnd, shd, blk, ign, cgt uint64
		want                    bool
	}{
		{"nothing pending", 0, 0, 0, 0, alrm, false},
		{"SIGCHLD handled, pending for the process", 0, chld, 0, 0, chld, true},
		{"SIGALRM handled, pending for the thread", alrm, 0, 0, 0, alrm, true},
		{"handled but blocked", alrm, 0, alrm, 0, alrm, false},
		{"not handled: fatal, the kernel ends the wait itself", term, 0, 0, 0, 0, false},
		{"ignored", 0, chld, 0, chld, 0, false},
		{"SIGTSTP, default action: stop", 0, tstp, 0, 0, 0, true},
		{"SIGTSTP ignored", 0, tstp, 0, tstp, 0, false},
	} {
		st := fmt.Sprintf("Name:\tcat\nSigQ:\t1/63419\nSigPnd:\t%016x\nShdPnd:\t%016x\nSigBlk:\t%016x\nSigIgn:\t%016x\nSigCgt:\t%016x\nCapInh:\t0000000000000000\n",
			c.pnd, c.shd, c.blk, c.ign, c.cgt)
		if got := interrupts(st); got != c.want {
			t.Errorf("%s: %v, want %v\n%s", c.name, got, c.want, st)
		}
	}
}
