package usernet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// The frame path without LKL: a second gVisor stack plays the guest
// (10.0.2.15 behind an ethernet link) and exchanges frames with the
// Network through an in-memory Frames. Only 127.0.0.0/8 is ever dialled.

// loopDialer dials 127.0.0.0/8 only and records every other address it
// was asked for, refusing it.
type loopDialer struct {
	mu      sync.Mutex
	refused []string
	dialled []string
}

func (d *loopDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil || !netip.MustParsePrefix("127.0.0.0/8").Contains(ap.Addr()) {
		d.refused = append(d.refused, network+" "+address)
		return nil, errors.New("test dialer: only 127.0.0.0/8")
	}
	d.dialled = append(d.dialled, network+" "+address)
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (d *loopDialer) lists() ([]string, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.refused...), append([]string(nil), d.dialled...)
}

// memFrames is the guest side of the link, in memory.
type memFrames struct {
	toNet chan []byte
	guest *channel.Endpoint
}

func (f *memFrames) Read(b []byte, timeoutMs int) int {
	if timeoutMs <= 0 {
		select {
		case fr := <-f.toNet:
			return copy(b, fr)
		default:
			return 0
		}
	}
	select {
	case fr := <-f.toNet:
		return copy(b, fr)
	case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
		return 0
	}
}

func (f *memFrames) Write(b []byte) bool {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(append([]byte(nil), b...))})
	f.guest.InjectInbound(0, pkt)
	pkt.DecRef()
	return true
}

// guestStack makes the guest and the Network between them.
func guestStack(t testing.TB, cfg Config) (*stack.Stack, *Network) {
	t.Helper()
	if cfg.Policy.HostAddr == nil {
		// The tests' destinations are the injected dialer's, whatever
		// addresses this machine has (192.0.2.2 is one on some).
		cfg.Policy.HostAddr = func(netip.Addr) bool { return false }
	}
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	ch := channel.New(256, mtu+header.EthernetMinimumSize, tcpip.LinkAddress(GuestMAC[:]))
	ch.LinkEPCapabilities |= linkCaps // as LKL's driver with CSUM and GUEST_CSUM
	if err := s.CreateNIC(1, ethernet.New(ch)); err != nil {
		t.Fatal(err)
	}
	s.AddProtocolAddress(1, tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: addr4(GuestAddr), PrefixLen: PrefixLen}}, stack.AddressProperties{})
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, Gateway: addr4(GatewayIP), NIC: 1}})
	f := &memFrames{toNet: make(chan []byte, 256), guest: ch}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			pkt := ch.ReadContext(ctx)
			if pkt == nil {
				return
			}
			v := pkt.ToView()
			f.toNet <- append([]byte(nil), v.AsSlice()...)
			v.Release()
			pkt.DecRef()
		}
	}()
	n, err := New(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		n.Close()
		s.Close()
	})
	return s, n
}

func dialGuest(s *stack.Stack, dest string) (net.Conn, error) {
	ap := netip.MustParseAddrPort(dest)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return gonet.DialContextTCP(ctx, s, tcpip.FullAddress{Addr: addr4(ap.Addr()), Port: ap.Port()}, ipv4.ProtocolNumber)
}

func TestFramePathTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go echoEach(ln)
	port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
	allow, _ := ParseRule(ln.Addr().String())
	d := &loopDialer{}
	var events []Event
	var evmu sync.Mutex
	s, n := guestStack(t, Config{Policy: Policy{Allow: []Rule{allow}}, Dialer: d, Event: func(ev Event) {
		evmu.Lock()
		events = append(events, ev)
		evmu.Unlock()
	}})
	gw := netip.AddrPortFrom(GatewayIP, port).String()

	// Allowed: the gateway's port is the host's 127.0.0.1 port; 1 MB
	// echoed whole.
	c, err := dialGuest(s, gw)
	if err != nil {
		t.Fatalf("dial %s: %v", gw, err)
	}
	want := make([]byte, 1<<20)
	for i := range want {
		want[i] = byte(i * 13)
	}
	go c.Write(want)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != string(want) {
		t.Errorf("echo: %v, equal %v", err, string(got) == string(want))
	}
	c.Close()

	// Refused by the policy: a reset, and no dial at all.
	for _, dest := range []string{"169.254.169.254:80", "10.0.2.2:1", "10.0.2.9:80", "192.168.0.1:80"} {
		if c, err := dialGuest(s, dest); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: %v, want connection refused", dest, err)
			if c != nil {
				c.Close()
			}
		}
	}
	// Allowed by the policy (public), refused by the injected dialer: a
	// reset too, and the dialer says it refused.
	if c, err := dialGuest(s, "192.0.2.1:80"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("public: %v, want connection refused", err)
		if c != nil {
			c.Close()
		}
	}
	refused, dialled := d.lists()
	if len(refused) != 1 || refused[0] != "tcp 192.0.2.1:80" {
		t.Errorf("dialer refused %q, want only tcp 192.0.2.1:80", refused)
	}
	for _, a := range dialled {
		if !strings.HasPrefix(a, "tcp 127.0.0.1:") {
			t.Errorf("dialled %s", a)
		}
	}
	st := n.Stats()
	if st.TCPAllowed != 1 || st.TCPRefused != 5 {
		t.Errorf("stats %+v, want 1 allowed, 5 refused", st)
	}
	evmu.Lock()
	defer evmu.Unlock()
	if len(events) != 6 || !events[0].Allowed || events[0].Real.Addr().String() != "127.0.0.1" {
		t.Errorf("events %+v", events)
	}
}

func TestFramePathUDPAndDNS(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			m, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("re:"), buf[:m]...), a)
		}
	}()
	up := pc.LocalAddr().String()
	allow, _ := ParseRule(up)
	d := &loopDialer{}
	s, n := guestStack(t, Config{Policy: Policy{Allow: []Rule{allow}}, Dialer: d, DNS: up})
	port := pc.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	for _, dest := range []netip.AddrPort{netip.AddrPortFrom(GatewayIP, port), netip.AddrPortFrom(DNSAddr, 53)} {
		c, err := gonet.DialUDP(s, nil, &tcpip.FullAddress{Addr: addr4(dest.Addr()), Port: dest.Port()}, ipv4.ProtocolNumber)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("hello"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		m, err := c.Read(buf)
		if err != nil || string(buf[:m]) != "re:hello" {
			t.Errorf("%s: %q, %v", dest, buf[:m], err)
		}
		c.Close()
	}
	if st := n.Stats(); st.UDPAllowed != 2 || st.DNSQueries != 1 {
		t.Errorf("stats %+v", st)
	}
	if refused, _ := d.lists(); len(refused) != 0 {
		t.Errorf("dialer refused %q", refused)
	}
}

// echoEach echoes each connection ln accepts until ln is closed.
func echoEach(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() { io.Copy(c, c); c.Close() }()
	}
}
