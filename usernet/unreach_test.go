package usernet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// failDialer fails every dial with the error its destination names, and
// counts the dials of each.
type failDialer struct {
	mu    sync.Mutex
	errs  map[string]error
	count map[string]int
}

func (d *failDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.count[address]++
	err := d.errs[address]
	d.mu.Unlock()
	if err == nil {
		err = errors.New("test dialer: no such destination")
	}
	return nil, err
}

func (d *failDialer) dials(a string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count[a]
}

func opErr(en syscall.Errno) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", en)}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestDialFailures: how the guest's connect ends when the host dial
// fails. A refusal is a reset (ECONNREFUSED), as before; an unreachable
// host or network is an ICMP destination unreachable (the guest stack's
// connect fails with no route / host or network unreachable, at once); a
// firewall's EACCES is administratively prohibited; a timeout is no
// answer at all (the guest's connect is still trying when its own
// deadline ends it), and the guest's retransmitted SYNs are not dialled
// again. A generic error stays a reset. Only the injected dialer is
// asked: nothing leaves the machine.
func TestDialFailures(t *testing.T) {
	d := &failDialer{count: map[string]int{}, errs: map[string]error{
		"192.0.2.1:80": opErr(syscall.ECONNREFUSED),
		"192.0.2.2:80": opErr(syscall.EHOSTUNREACH),
		"192.0.2.3:80": opErr(syscall.ENETUNREACH),
		"192.0.2.4:80": opErr(syscall.EACCES),
		"192.0.2.5:80": &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}},
	}}
	var evmu sync.Mutex
	var events []Event
	s, _ := guestStack(t, Config{Dialer: d, Event: func(ev Event) {
		evmu.Lock()
		events = append(events, ev)
		evmu.Unlock()
	}})
	for _, c := range []struct {
		dest, want, why string
	}{
		{"192.0.2.1:80", "refused", "reset"},
		{"192.0.2.2:80", "no route to host", "ICMP host unreachable"},
		{"192.0.2.3:80", "network is unreachable", "ICMP network unreachable"},
		{"192.0.2.4:80", "no route to host", "ICMP administratively prohibited"}, // gVisor's reading; Linux's is EHOSTUNREACH too
		{"192.0.2.6:80", "refused", "reset"},
	} {
		start := time.Now()
		conn, err := dialGuest(s, c.dest)
		if err == nil {
			conn.Close()
			t.Errorf("%s: connected", c.dest)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.dest, err, c.want)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("%s: took %v, want at once", c.dest, el)
		}
		// The answer can reach the guest before the event is told
		// (an ICMP error goes out first): wait for this flow's.
		var ev Event
		for deadline := time.Now().Add(2 * time.Second); ev.Dest.String() != c.dest && time.Now().Before(deadline); {
			evmu.Lock()
			for _, e := range events {
				if e.Dest.String() == c.dest {
					ev = e
				}
			}
			evmu.Unlock()
			if ev.Dest.String() != c.dest {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if ev.Allowed || ev.Rule != "dial" || !strings.HasSuffix(ev.Why, "the guest gets "+c.why) {
			t.Errorf("%s: event %+v, want rule dial and %q", c.dest, ev, c.why)
		}
	}
	// A timeout: no answer; the guest's own deadline ends its connect.
	ap := netip.MustParseAddrPort("192.0.2.5:80")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	conn, err := dialGuestCtx(ctx, s, ap)
	if err == nil {
		conn.Close()
		t.Fatal("192.0.2.5: connected")
	}
	if strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "unreachable") || ctx.Err() == nil {
		t.Errorf("192.0.2.5: %v, want the guest's own deadline", err)
	}
	// The guest stack retransmitted its SYN (after 1 s, then 3 s): one
	// dial only.
	if n := d.dials("192.0.2.5:80"); n != 1 {
		t.Errorf("192.0.2.5 dialled %d times, want 1", n)
	}
}

func dialGuestCtx(ctx context.Context, s *stack.Stack, ap netip.AddrPort) (net.Conn, error) {
	return gonet.DialContextTCP(ctx, s, tcpip.FullAddress{Addr: addr4(ap.Addr()), Port: ap.Port()}, ipv4.ProtocolNumber)
}

// TestICMPv6Unreachable: the IPv6 answer's frame, parsed back: from the
// IPv6 gateway to the guest, destination unreachable with the code of
// each kind, the SYN quoted, a valid checksum.
func TestICMPv6Unreachable(t *testing.T) {
	guest := tcpip.AddrFrom16(GuestAddr6.As16())
	id := stack.TransportEndpointID{RemoteAddress: guest, RemotePort: 40000,
		LocalAddress: tcpip.AddrFrom16(netip.MustParseAddr("2001:db8::1").As16()), LocalPort: 80}
	quote := make([]byte, header.IPv6MinimumSize+8)
	for i := range quote {
		quote[i] = byte(i)
	}
	for a, want := range map[dialAnswer]header.ICMPv6Code{answerHostUnr: header.ICMPv6AddressUnreachable,
		answerNetUnr: header.ICMPv6NetworkUnreachable, answerAdmin: header.ICMPv6Prohibited} {
		f := icmp6Unreachable(id, quote, a)
		ip := header.IPv6(f[header.EthernetMinimumSize:])
		if !ip.IsValid(len(ip)) || ip.DestinationAddress() != guest || ip.TransportProtocol() != header.ICMPv6ProtocolNumber {
			t.Fatalf("%v: bad IPv6 header", a)
		}
		ic := header.ICMPv6(ip.Payload())
		if ic.Type() != header.ICMPv6DstUnreachable || ic.Code() != want {
			t.Errorf("%v: type %d code %d", a, ic.Type(), ic.Code())
		}
		icl := header.ICMPv6DstUnreachableMinimumSize
		if got := header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: ic[:icl], Src: ip.SourceAddress(),
			Dst: guest, PayloadCsum: checksum.Checksum(ic[icl:], 0), PayloadLen: len(ic) - icl}); got != ic.Checksum() {
			t.Errorf("%v: checksum %#x, want %#x", a, ic.Checksum(), got)
		}
		if string(ic[icl:]) != string(quote) {
			t.Errorf("%v: quote differs", a)
		}
	}
	if icmp6Unreachable(id, quote, answerReset) != nil || icmp4Unreachable(id, quote, answerSilence) != nil {
		t.Error("a reset or a timeout got an ICMP answer")
	}
}

// TestClassifyDial: the host dial's errors as the guest's answers.
func TestClassifyDial(t *testing.T) {
	for _, c := range []struct {
		err  error
		want dialAnswer
	}{
		{opErr(syscall.ECONNREFUSED), answerReset},
		{opErr(syscall.EHOSTUNREACH), answerHostUnr},
		{opErr(syscall.EHOSTDOWN), answerHostUnr},
		{opErr(syscall.ENETUNREACH), answerNetUnr},
		{opErr(syscall.EACCES), answerAdmin},
		{opErr(syscall.ETIMEDOUT), answerSilence},
		{context.DeadlineExceeded, answerSilence},
		{&net.OpError{Op: "dial", Err: timeoutErr{}}, answerSilence},
		{errors.New("something else"), answerReset},
	} {
		if got := classifyDial(c.err); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
}

// TestUDPRefusalICMP: a UDP flow the host refused is answered with a port
// unreachable from the destination itself, quoting headers made from the
// flow and the start of its last datagram, for IPv4 and IPv6.
func TestUDPRefusalICMP(t *testing.T) {
	v4 := stack.TransportEndpointID{RemoteAddress: addr4(GuestAddr), RemotePort: 40000, LocalAddress: addr4(GatewayIP), LocalPort: 53}
	v6 := stack.TransportEndpointID{RemoteAddress: tcpip.AddrFrom16(GuestAddr6.As16()), RemotePort: 40000,
		LocalAddress: tcpip.AddrFrom16(netip.MustParseAddr("2001:db8::1").As16()), LocalPort: 53}
	long := strings.Repeat("q", 2*maxUDPQuote)
	for _, c := range []struct {
		name    string
		id      stack.TransportEndpointID
		payload string
	}{{"v4", v4, "query"}, {"v6", v6, "query"}, {"v4 empty", v4, ""}, {"v6 long", v6, long[:maxUDPQuote]}} {
		q := udpQuote(c.id, []byte(c.payload)).quote
		var f, quoted []byte
		var src tcpip.Address
		if c.id.RemoteAddress.Len() == 4 {
			f = icmp4Unreachable(c.id, q, answerPortUnr)
			ip := header.IPv4(f[header.EthernetMinimumSize:])
			ic := header.ICMPv4(ip.Payload())
			if ic.Type() != header.ICMPv4DstUnreachable || ic.Code() != header.ICMPv4PortUnreachable {
				t.Errorf("%s: type %d code %d", c.name, ic.Type(), ic.Code())
			}
			src, quoted = ip.SourceAddress(), ic[header.ICMPv4MinimumSize:]
			qip := header.IPv4(quoted)
			if !qip.IsValid(len(quoted)) || qip.SourceAddress() != c.id.RemoteAddress || qip.DestinationAddress() != c.id.LocalAddress ||
				qip.TransportProtocol() != header.UDPProtocolNumber {
				t.Errorf("%s: quoted IPv4 header %x", c.name, quoted[:header.IPv4MinimumSize])
			}
			quoted = qip.Payload()
		} else {
			f = icmp6Unreachable(c.id, q, answerPortUnr)
			ip := header.IPv6(f[header.EthernetMinimumSize:])
			ic := header.ICMPv6(ip.Payload())
			if ic.Type() != header.ICMPv6DstUnreachable || ic.Code() != header.ICMPv6PortUnreachable {
				t.Errorf("%s: type %d code %d", c.name, ic.Type(), ic.Code())
			}
			src, quoted = ip.SourceAddress(), ic[header.ICMPv6DstUnreachableMinimumSize:]
			qip := header.IPv6(quoted)
			if !qip.IsValid(len(quoted)) || qip.SourceAddress() != c.id.RemoteAddress || qip.DestinationAddress() != c.id.LocalAddress {
				t.Errorf("%s: quoted IPv6 header %x", c.name, quoted[:header.IPv6MinimumSize])
			}
			quoted = qip.Payload()
		}
		if src != c.id.LocalAddress {
			t.Errorf("%s: ICMP from %v, want the destination %v", c.name, src, c.id.LocalAddress)
		}
		u := header.UDP(quoted)
		if u.SourcePort() != c.id.RemotePort || u.DestinationPort() != c.id.LocalPort || int(u.Length()) != len(u) ||
			string(u.Payload()) != c.payload {
			t.Errorf("%s: quoted UDP %d→%d length %d payload %q", c.name, u.SourcePort(), u.DestinationPort(), u.Length(), u.Payload())
		}
	}
}
