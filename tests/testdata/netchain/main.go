//go:build lkl

// netchain is the floor under BenchmarkNet's net_conns and net_rtt rows
// with no supervisor: one process boots LKL with kbox's network device
// and user-mode network (lkl.AddNetDev, usernet.New, configured as kbox
// --net configures them), and one thread runs inet's conns and rtt
// workloads through LKL's own sockets with blocking lkl_syscall calls,
// to 10.0.2.2:PORT (the host's 127.0.0.1:PORT); then the same on host
// sockets to 127.0.0.1:PORT, in the same run. It is the chain a guest
// connection crosses (LKL's TCP, the device, gVisor's TCP, the host
// dial, the host's TCP) without what kbox adds around it: no guest
// process, no seccomp notification, no socket pair and no pumps.
//
//	netchain PORT CONNS ROUNDS
//
// It prints "native conns N /s", "chain conns N /s", "spin conns N /s",
// "pair conns N /s", then the same for "rtt N us" (each side twice,
// alternating; the best of each). "chain" waits in LKL (blocking
// sockets: LKL parks the thread and wakes it, as a guest's blocking call
// in LKL would); "spin" never waits in LKL: its sockets are non-blocking
// and it asks again, yielding the CPU between tries, as soon as it can,
// which no supervisor can afford to do for every socket, but which bounds
// what learning of readiness sooner could gain. "pair" is the least a
// supervisor adds whose guest holds a host fd for each internet socket,
// so that poll and epoll see it (kbox's design: docs/networking.md): the
// client reads and writes one end of a host socketpair, and two
// goroutines a connection relay between the other end and LKL's
// blocking socket, each waiting in a blocking call; the client closes
// its end and goes on, as a guest does, and the relay ends the LKL
// socket behind it. No notification, no guest process.
package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/usernet"
	"golang.org/x/sys/unix"
)

const memMB = 128 // kbox's kernel with --net (cmd/kbox/net.go)

func fail(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "netchain: "+f+"\n", a...)
	os.Exit(1)
}

// side is one way of making a socket and calling it: LKL's or the host's.
type side struct {
	name    string
	spin    bool // non-blocking; EAGAIN is asked again after a yield
	addr    [4]byte
	syscall func(nr, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, unix.Errno)
	nr      struct{ socket, connect, write, read, close, setsockopt uintptr }
}

func hostCall(nr, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, unix.Errno) {
	r, _, e := unix.Syscall6(nr, a1, a2, a3, a4, a5, a6)
	return r, e
}

func (s *side) dial(port uint16, nodelay bool) int {
	typ := uintptr(unix.SOCK_STREAM | unix.SOCK_CLOEXEC)
	if s.spin {
		typ |= unix.SOCK_NONBLOCK
	}
	fd, e := s.syscall(s.nr.socket, unix.AF_INET, typ, 0, 0, 0, 0)
	if e != 0 {
		fail("%s socket: %v", s.name, e)
	}
	if nodelay {
		one := buf(4)
		binary.NativeEndian.PutUint32(one, 1)
		s.call(s.nr.setsockopt, fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, ptr(one), 4, 0)
		runtime.KeepAlive(one)
	}
	sa := buf(16) // struct sockaddr_in
	binary.NativeEndian.PutUint16(sa, unix.AF_INET)
	binary.BigEndian.PutUint16(sa[2:], port)
	copy(sa[4:], s.addr[:])
	if _, e := s.syscall(s.nr.connect, fd, ptr(sa), 16, 0, 0, 0); e != 0 && !(s.spin && e == unix.EINPROGRESS) {
		fail("%s connect: %v", s.name, e)
	}
	runtime.KeepAlive(sa)
	if s.spin {
		// Connected when writable: LKL's ppoll with a zero timeout.
		pfd := buf(8) // struct pollfd
		binary.NativeEndian.PutUint32(pfd, uint32(fd))
		binary.NativeEndian.PutUint16(pfd[4:], unix.POLLOUT)
		ts := buf(16) // struct timespec 0
		for {
			if n, _ := s.syscall(lkl.SysPpoll, ptr(pfd), 1, ptr(ts), 0, 8, 0); n == 1 {
				break
			}
			yield()
		}
		runtime.KeepAlive(pfd)
		runtime.KeepAlive(ts)
	}
	return int(fd)
}

func yield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

func (s *side) call(nr, a1, a2, a3, a4, a5, a6 uintptr) uintptr {
	for {
		r, e := s.syscall(nr, a1, a2, a3, a4, a5, a6)
		if e == unix.EINTR {
			continue
		}
		if e == unix.EAGAIN && s.spin {
			yield()
			continue
		}
		if e != 0 {
			fail("%s syscall %d: %v", s.name, nr, e)
		}
		return r
	}
}

// echo writes b and reads as many bytes back.
func (s *side) echo(fd int, b []byte) {
	if s.call(s.nr.write, uintptr(fd), ptr(b), uintptr(len(b)), 0, 0, 0) != uintptr(len(b)) {
		fail("%s: short write", s.name)
	}
	for got := 0; got < len(b); {
		n := s.call(s.nr.read, uintptr(fd), ptr(b[got:]), uintptr(len(b)-got), 0, 0, 0)
		if n == 0 {
			fail("%s: early EOF", s.name)
		}
		got += int(n)
	}
	runtime.KeepAlive(b)
}

// endpoint is one side's way of opening a connection, talking on it and
// closing it.
type endpoint interface {
	open(port uint16, nodelay bool) int
	echo(fd int, b []byte)
	close(fd int)
}

func (s *side) open(port uint16, nodelay bool) int { return s.dial(port, nodelay) }
func (s *side) close(fd int)                       { s.call(s.nr.close, uintptr(fd), 0, 0, 0, 0, 0) }

// conns opens n connections one after another, each echoing a byte, and
// returns connections a second.
func conns(e endpoint, port uint16, n int) float64 {
	b := []byte{'c'}
	t0 := time.Now()
	for i := 0; i < n; i++ {
		fd := e.open(port, false)
		e.echo(fd, b)
		e.close(fd)
	}
	return float64(n) / time.Since(t0).Seconds()
}

// rtt echoes 64 bytes n times on one connection and returns the
// microseconds of a round trip.
func rtt(e endpoint, port uint16, n int) float64 {
	fd := e.open(port, true)
	b := buf(64)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		e.echo(fd, b)
	}
	us := float64(time.Since(t0).Microseconds()) / float64(n)
	e.close(fd)
	return us
}

// pairSide is the "pair" model: LKL's sockets dialed as chain does,
// reached through a host socketpair and two relaying goroutines.
type pairSide struct{ lkl *side }

// open dials LKL's socket and returns the client's end of a pair relayed
// to it.
func (p pairSide) open(port uint16, nodelay bool) int {
	lfd := p.lkl.dial(port, nodelay)
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fail("socketpair: %v", err)
	}
	go p.fromClient(sp[1], lfd)
	go p.toClient(lfd, sp[1])
	return sp[0]
}

// fromClient relays the client's bytes to LKL; at the client's EOF it
// shuts LKL's socket for writing (the FIN).
func (p pairSide) fromClient(end, lfd int) {
	b := buf(64 << 10)
	for {
		n, err := unix.Read(end, b)
		if err == unix.EINTR {
			continue
		}
		if n <= 0 {
			lkl.Syscall6(lkl.SysShutdown, uintptr(lfd), unix.SHUT_WR, 0, 0, 0, 0)
			return
		}
		for off := 0; off < n; {
			w, e := lkl.Syscall6(lkl.SysWrite, uintptr(lfd), ptr(b[off:]), uintptr(n-off), 0, 0, 0)
			if e != 0 && e != unix.EINTR {
				return
			}
			off += int(w)
		}
	}
}

// toClient relays LKL's bytes to the client; at LKL's EOF it closes both.
func (p pairSide) toClient(lfd, end int) {
	b := buf(64 << 10)
	for {
		n, e := lkl.Syscall6(lkl.SysRead, uintptr(lfd), ptr(b), uintptr(len(b)), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 || n == 0 {
			break
		}
		if _, err := unix.Write(end, b[:n]); err != nil {
			break
		}
	}
	unix.Close(end)
	lkl.Syscall6(lkl.SysClose, uintptr(lfd), 0, 0, 0, 0, 0)
}

func (p pairSide) echo(fd int, b []byte) { hostSide.echo(fd, b) }
func (p pairSide) close(fd int)          { unix.Close(fd) }

// hostSide reads and writes host fds (the pair's client end).
var hostSide = &side{name: "pair", syscall: hostCall}

func init() { hostSide.nr.write, hostSide.nr.read = unix.SYS_WRITE, unix.SYS_READ }

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: netchain PORT CONNS ROUNDS")
		os.Exit(2)
	}
	p, err1 := strconv.ParseUint(os.Args[1], 10, 16)
	nconns, err2 := strconv.Atoi(os.Args[2])
	rounds, err3 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil || err3 != nil || p == 0 || nconns <= 0 || rounds <= 0 {
		fmt.Fprintln(os.Stderr, "usage: netchain PORT CONNS ROUNDS")
		os.Exit(2)
	}
	port := uint16(p)

	dev, err := lkl.AddNetDev(usernet.GuestMAC)
	if err != nil {
		fail("%v", err)
	}
	if err := lkl.Boot(lkl.Config{MemMB: memMB}); err != nil {
		fail("%v", err)
	}
	defer lkl.Halt()
	if err := lkl.Mkdir("/proc", 0o555); err != nil {
		fail("mkdir /proc: %v", err)
	}
	if err := lkl.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		fail("mount /proc: %v", err)
	}
	procDir, err := lkl.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		fail("open /proc: %v", err)
	}
	if err := dev.Configure(usernet.GuestAddr, usernet.PrefixLen, usernet.GatewayIP); err != nil {
		fail("%v", err)
	}
	if err := dev.SetMTU(usernet.MTU); err != nil {
		fail("%v", err)
	}
	if err := lkl.TuneTCP(procDir, memMB); err != nil {
		fail("%v", err)
	}
	rule, err := usernet.ParseRule(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String())
	if err != nil {
		fail("%v", err)
	}
	nw, err := usernet.New(dev, usernet.Config{Policy: usernet.Policy{Allow: []usernet.Rule{rule}}})
	if err != nil {
		fail("%v", err)
	}
	defer nw.Close()

	host := &side{name: "native", addr: [4]byte{127, 0, 0, 1}, syscall: hostCall}
	host.nr.socket, host.nr.connect, host.nr.write, host.nr.read, host.nr.close, host.nr.setsockopt =
		unix.SYS_SOCKET, unix.SYS_CONNECT, unix.SYS_WRITE, unix.SYS_READ, unix.SYS_CLOSE, unix.SYS_SETSOCKOPT
	chain := &side{name: "chain", addr: usernet.GatewayIP.As4(), syscall: lkl.Syscall6}
	chain.nr.socket, chain.nr.connect, chain.nr.write, chain.nr.read, chain.nr.close, chain.nr.setsockopt =
		lkl.SysSocket, lkl.SysConnect, lkl.SysWrite, lkl.SysRead, lkl.SysClose, lkl.SysSetsockopt
	spin := *chain
	spin.name, spin.spin = "spin", true

	runtime.LockOSThread()
	best := map[string]float64{}
	names := []string{"native", "chain", "spin", "pair"}
	for i := 0; i < 2; i++ {
		for k, e := range []endpoint{host, chain, &spin, pairSide{chain}} {
			c := conns(e, port, nconns)
			r := rtt(e, port, rounds)
			if c > best[names[k]+" conns"] {
				best[names[k]+" conns"] = c
			}
			if v, ok := best[names[k]+" rtt"]; !ok || r < v {
				best[names[k]+" rtt"] = r
			}
		}
	}
	for _, s := range names {
		fmt.Printf("%s conns %.1f /s\n", s, best[s+" conns"])
	}
	for _, s := range names {
		fmt.Printf("%s rtt %.1f us\n", s, best[s+" rtt"])
	}
}
