package dispatch

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/kbox-project/kbox/fifo"
	"golang.org/x/sys/unix"
)

// waitPending is a Pending whose guest takes a signal when signal is set
// (Signalled, as the in-process tiers tell it) and leaves when gone is.
type waitPending struct {
	signal, gone atomic.Bool
}

func (p *waitPending) Valid() error {
	if p.gone.Load() {
		return unix.ENOENT
	}
	return nil
}
func (p *waitPending) Pid() int                                    { return 0 }
func (p *waitPending) AddFD(hostfd int, cloexec bool) (int, error) { return -1, unix.ENOSYS }
func (p *waitPending) Reply(val int64) error                       { return nil }
func (p *waitPending) ReplyErrno(en unix.Errno) error              { return nil }
func (p *waitPending) Write(addr uint64, b []byte) error           { return nil }
func (p *waitPending) Signalled() bool                             { return p.signal.Load() }

// after sets f in d.
func after(d time.Duration, f *atomic.Bool) { time.AfterFunc(d, func() { f.Store(true) }) }

// later runs f after d, and the test's cleanup waits for it to end (or
// stops it), so f never touches a descriptor number that a later test has
// been given again.
func later(t *testing.T, d time.Duration, f func()) {
	done := make(chan struct{})
	tm := time.AfterFunc(d, func() { defer close(done); f() })
	t.Cleanup(func() {
		if !tm.Stop() {
			<-done
		}
	})
}

// fullPair is a unix stream socketpair whose first end cannot send: its
// peer's queue is full.
func fullPair(t *testing.T) [2]int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
	b := make([]byte, 512)
	for {
		if _, err := unix.SendmsgN(fds[0], b, nil, nil, unix.MSG_DONTWAIT); err != nil {
			break
		}
	}
	return fds
}

func dup(t *testing.T, fd int) int {
	t.Helper()
	n, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSendTicks: a send that waits for room ends as Linux's blocking send
// does: when room comes, with the count; at the socket's SO_SNDTIMEO with
// EAGAIN; when the guest takes a signal, with ERESTARTSYS (EINTR when the
// socket has a timeout), nothing sent; not at all when the guest left.
func TestSendTicks(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
		drain   bool // the receiver reads after 150 ms
		signal  bool // the guest takes a signal after 150 ms
		gone    bool
		n       int
		en      unix.Errno
		answer  bool
	}{
		{"room comes", 0, true, false, false, 100, 0, true},
		{"timeout", 200 * time.Millisecond, false, false, false, 0, unix.EAGAIN, true},
		{"signal", 0, false, true, false, 0, fifo.RestartSys, true},
		{"signal with a timeout", 5 * time.Second, false, true, false, 0, unix.EINTR, true},
		{"guest gone", 0, false, false, true, 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fds := fullPair(t)
			var p waitPending
			if c.timeout > 0 {
				tv := unix.NsecToTimeval(c.timeout.Nanoseconds())
				unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
			}
			if c.drain {
				later(t, 150*time.Millisecond, func() {
					b := make([]byte, 1<<16)
					for {
						if _, _, _, _, err := unix.Recvmsg(fds[1], b, nil, unix.MSG_DONTWAIT); err != nil {
							return
						}
					}
				})
			}
			if c.signal {
				after(150*time.Millisecond, &p.signal)
			}
			if c.gone {
				after(150*time.Millisecond, &p.gone)
			}
			j := &sendJob{s: sock{fd: dup(t, fds[0]), typ: unix.SOCK_STREAM}, data: make([]byte, 100)}
			defer j.close()
			start := time.Now()
			n, en, answer := sendTicks(&p, j, sndTimeout(fds[0]))
			if n != c.n || en != c.en || answer != c.answer {
				t.Errorf("sendTicks: %d, %v, %v; want %d, %v, %v", n, en, answer, c.n, c.en, c.answer)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestSendTicksPartial: a stream send that moved part of its data when
// the signal comes returns that count, as Linux's does.
func TestSendTicksPartial(t *testing.T) {
	fds := fullPair(t)
	var p waitPending
	later(t, 150*time.Millisecond, func() {
		b := make([]byte, 8192)
		unix.Read(fds[1], b)
		p.signal.Store(true)
	})
	j := &sendJob{s: sock{fd: dup(t, fds[0]), typ: unix.SOCK_STREAM}, data: make([]byte, 1<<20)}
	defer j.close()
	n, en, answer := sendTicks(&p, j, 0)
	if n <= 0 || n >= 1<<20 || en != 0 || !answer {
		t.Errorf("sendTicks: %d, %v, %v; want part of %d, 0, true", n, en, answer, 1<<20)
	}
}

// TestConnectTicks: a unix connect waiting for room in a listener's
// backlog ends as Linux's: connected when the listener accepts; EAGAIN at
// the socket's SO_SNDTIMEO; ERESTARTSYS when the guest takes a signal
// (EINTR with a timeout), the socket left unconnected. The socket's
// SO_SNDTIMEO, which the wait sets for its tries, is the guest's again
// after it.
func TestConnectTicks(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		timeout time.Duration
		accept  bool
		signal  bool
		en      unix.Errno
	}{
		{"accepted", 0, true, false, 0},
		{"timeout", 200 * time.Millisecond, false, false, unix.EAGAIN},
		{"signal", 0, false, true, fifo.RestartSys},
		{"signal with a timeout", 5 * time.Second, false, true, unix.EINTR},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := dir + "/l"
			unix.Unlink(path)
			l, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(l)
			if err := unix.Bind(l, &unix.SockaddrUnix{Name: path}); err != nil {
				t.Fatal(err)
			}
			unix.Listen(l, 0)
			// Backlog 0 takes one connection: the next waits.
			first, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
			defer unix.Close(first)
			unix.Connect(first, &unix.SockaddrUnix{Name: path})
			s, _ := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			defer unix.Close(s)
			guestTv := unix.Timeval{}
			if c.timeout > 0 {
				guestTv = unix.NsecToTimeval(c.timeout.Nanoseconds())
			}
			unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &guestTv)
			var p waitPending
			if c.accept {
				later(t, 150*time.Millisecond, func() {
					if nfd, _, err := unix.Accept(l); err == nil {
						unix.Close(nfd)
					}
				})
			}
			if c.signal {
				after(150*time.Millisecond, &p.signal)
			}
			raw := append([]byte{byte(unix.AF_UNIX), 0}, path...)
			en, answer := connectTicks(&p, s, append(raw, 0), sndTimeout(s))
			if en != c.en || !answer {
				t.Errorf("connectTicks: %v, %v; want %v, true", en, answer, c.en)
			}
			_, perr := unix.Getpeername(s)
			if connected := perr == nil; connected != (c.en == 0) {
				t.Errorf("connected %v after %v", connected, en)
			}
			if tv, _ := unix.GetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_SNDTIMEO); *tv != guestTv {
				t.Errorf("SO_SNDTIMEO %v after the wait, the guest's was %v", *tv, guestTv)
			}
		})
	}
}

// TestRecvTicks: a stream receive that waits for data ends as Linux's:
// with the data; with what MSG_WAITALL gathered when a signal comes, or
// ERESTARTSYS when none came (EINTR with SO_RCVTIMEO); EAGAIN at the
// timeout.
func TestRecvTicks(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
		send    int // bytes sent after 150 ms
		flags   int
		signal  bool
		n       int
		en      unix.Errno
	}{
		{"data", 0, 5, 0, false, 5, 0},
		{"waitall gathers", 0, 5, unix.MSG_WAITALL, true, 5, 0},
		{"signal", 0, 0, 0, true, 0, fifo.RestartSys},
		{"signal with a timeout", 5 * time.Second, 0, 0, true, 0, unix.EINTR},
		{"timeout", 200 * time.Millisecond, 0, 0, false, 0, unix.EAGAIN},
	} {
		t.Run(c.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fds[0])
			defer unix.Close(fds[1])
			var p waitPending
			if c.send > 0 {
				later(t, 150*time.Millisecond, func() { unix.Write(fds[1], make([]byte, c.send)) })
			}
			if c.signal {
				after(300*time.Millisecond, &p.signal)
			}
			if c.timeout > 0 {
				tv := unix.NsecToTimeval(c.timeout.Nanoseconds())
				unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
			}
			n, en, answer := recvTicks(&p, fds[0], make([]byte, 64), c.flags, rcvTimeout(fds[0]))
			if n != c.n || en != c.en || !answer {
				t.Errorf("recvTicks: %d, %v, %v; want %d, %v, true", n, en, answer, c.n, c.en)
			}
		})
	}
}
