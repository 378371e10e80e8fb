// Package usernet is the host side of the guest's network: a user-mode
// network stack (gVisor's tcpip, as a library) in kbox's process that
// takes the ethernet frames of LKL's device, ends every guest TCP and UDP
// flow in one place, applies the egress policy, and carries allowed flows
// over host sockets. See docs/networking.md.
package usernet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/time/rate"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// Frames is the guest's side of the link: LKL's device (lkl.NetDev).
type Frames interface {
	// Read copies the next frame from the guest into b, waiting up to
	// timeoutMs: its length, 0 when none came (on timeout, or earlier),
	// -1 when the link is gone.
	Read(b []byte, timeoutMs int) int
	// Write queues a frame for the guest; false when dropped.
	Write(b []byte) bool
}

// Dialer makes the host connections of allowed flows. Tests inject one
// that refuses everything outside 127.0.0.0/8.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Event is one decision on a guest flow, for the observatory and trace.
type Event struct {
	Proto   string // "tcp", "udp"
	Guest   netip.AddrPort
	Dest    netip.AddrPort // as the guest named it
	Real    netip.AddrPort // where it goes on the host
	Allowed bool
	// Rule is what decided, short and stable (Policy.DecideRule):
	// "allow 127.0.0.1/32:8000", "guarded 127.0.0.0/8", "deny-all",
	// "guest-network", "public", "dns" (the responder), "no-service",
	// "dial" (the host refused), "handshake", "published".
	Rule string
	Why  string
	// Inbound: a connection to a published port (--publish); Real is
	// then the host peer, Dest the guest's port.
	Inbound bool
}

// Config configures a Network.
type Config struct {
	Policy Policy
	Dialer Dialer // nil: net.Dialer
	// DNS is the upstream resolver (host:port) the responder at 10.0.2.3
	// forwards to; empty: DNS is refused.
	DNS string
	// Event, if set, is told of every flow decision.
	Event func(Event)
	// AllowHosts are --net-allow-host rules, resolved by New through
	// Resolver (nil: UpstreamResolver(DNS, Dialer)) and added to
	// Policy.Allow.
	AllowHosts []HostRule
	Resolver   Resolver
	// AfterFrames, if set, is called after a burst of frames went to
	// the guest (the queue for it is empty) or came from it (none is
	// left to take): kbox then looks which of LKL's sockets became ready
	// (inet.Net.Sweep), by the frames LKL received, or by the work
	// that made it send (LKL may do that on a thread of its own).
	AfterFrames func()
}

// Stats count what the network did.
type Stats struct {
	FramesIn, FramesOut, FramesDropped uint64
	TCPAllowed, TCPRefused             uint64
	UDPAllowed, UDPRefused             uint64
	DNSQueries                         uint64
	// Published ports: connections carried in, refused by the guest,
	// UDP flows.
	InboundTCP, InboundRefused, InboundUDP uint64
}

// Network is one guest network.
type Network struct {
	cfg    Config
	frames Frames
	st     *stack.Stack
	ch     *channel.Endpoint
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	framesIn, framesOut, framesDropped atomic.Uint64
	tcpAllowed, tcpRefused             atomic.Uint64
	udpAllowed, udpRefused             atomic.Uint64
	dnsQueries                         atomic.Uint64
	inboundTCPs, inboundRefused        atomic.Uint64
	inboundUDPs                        atomic.Uint64

	syns syns // SYNs being decided, timed-out flows (unreach.go)
	// Spliced flows still carrying the guest's data to the host
	// (Quiesce).
	fromGuestCopies atomic.Int64
	// loopDial: the default dialer, whose loopback dials are blocking
	// connects (dialLoopback).
	loopDial bool
}

// dialTimeout bounds a host TCP dial.
const dialTimeout = 30 * time.Second

const nicID = 1

// MTU is the link's MTU, on both sides (LKL's eth0 is set to it): large,
// so that a bulk transfer crosses the device, the rings and both stacks
// in 64 KiB frames rather than 1514-byte ones. It fits lkl.MaxFrame with
// the ethernet header.
const MTU = 65280

const mtu = MTU

// linkCaps: the link is memory in one process, so neither side computes
// or checks TCP and UDP checksums (LKL's device offers CSUM and
// GUEST_CSUM to its driver: its frames may carry a partial checksum, and
// it trusts ours).
const linkCaps = stack.CapabilityRXChecksumOffload | stack.CapabilityTXChecksumOffload

func addr4(a netip.Addr) tcpip.Address { return tcpip.AddrFrom4(a.As4()) }

func addrPort(a tcpip.Address, port uint16) netip.AddrPort {
	ip, _ := netip.AddrFromSlice(a.AsSlice())
	return netip.AddrPortFrom(ip.Unmap(), port)
}

// New starts a network on frames. Close stops it.
func New(frames Frames, cfg Config) (*Network, error) {
	defaultDialer := cfg.Dialer == nil
	if defaultDialer {
		cfg.Dialer = &net.Dialer{Timeout: dialTimeout}
	}
	if len(cfg.AllowHosts) > 0 {
		r := cfg.Resolver
		if r == nil {
			r = UpstreamResolver(cfg.DNS, cfg.Dialer)
		}
		rules, err := ResolveHostRules(context.Background(), r, cfg.AllowHosts)
		if err != nil {
			return nil, err
		}
		cfg.Policy.Allow = append(append([]Rule(nil), cfg.Policy.Allow...), rules...)
	}
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	ch := channel.New(1024, mtu+header.EthernetMinimumSize, tcpip.LinkAddress(GatewayMAC[:]))
	ch.LinkEPCapabilities |= linkCaps
	if err := s.CreateNIC(nicID, ethernet.New(ch)); err != nil {
		return nil, fmt.Errorf("usernet: NIC: %s", err)
	}
	for _, a := range []netip.Addr{GatewayIP, DNSAddr, GatewayIP6} {
		pa := tcpip.ProtocolAddress{Protocol: ipv6.ProtocolNumber,
			AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom16(a.As16()), PrefixLen: PrefixLen6}}
		if a.Is4() {
			pa = tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber,
				AddressWithPrefix: tcpip.AddressWithPrefix{Address: addr4(a), PrefixLen: PrefixLen}}
		}
		if err := s.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); err != nil {
			return nil, fmt.Errorf("usernet: address %s: %s", a, err)
		}
	}
	// Every destination is ours to end (promiscuous), and we answer as it
	// (spoofing): the forwarders see each flow.
	s.SetPromiscuousMode(nicID, true)
	s.SetSpoofing(nicID, true)
	// No limit on ICMP errors: they stand for the answers of kbox's own
	// policy and of the host's loopback, which Linux does not limit
	// either (icmpv4_xrlim_allow); gVisor's default (1000 a second,
	// bursts of 50) dropped one refusal in 100 sent at once.
	s.SetICMPLimit(rate.Inf)
	s.SetRouteTable([]tcpip.Route{
		{Destination: header.IPv4EmptySubnet, NIC: nicID},
		{Destination: header.IPv6EmptySubnet, NIC: nicID},
	})
	ctx, cancel := context.WithCancel(context.Background())
	n := &Network{cfg: cfg, frames: frames, st: s, ch: ch, ctx: ctx, cancel: cancel, loopDial: defaultDialer}
	tf := tcp.NewForwarder(s, 0, 1024, n.tcpFlow)
	s.SetTransportProtocolHandler(tcp.ProtocolNumber, n.handleTCP(tf.HandlePacket))
	uf := udp.NewForwarder(s, n.udpFlow)
	s.SetTransportProtocolHandler(udp.ProtocolNumber, uf.HandlePacket)
	n.wg.Add(2)
	go n.fromGuest()
	go n.toGuest()
	return n, nil
}

// Quiesce waits, up to d, until no spliced flow is still carrying the
// guest's data to the host: each has passed on the guest's FIN (or
// reset). kbox calls it when the guest has exited, after the guest's
// sockets were closed in LKL (inet.Net.Drain) and before Close, so
// that what the guest sent last reaches the host. It returns how many
// were still carrying data at the deadline (a guest end never closed).
func (n *Network) Quiesce(d time.Duration) int {
	deadline := time.Now().Add(d)
	for pause := 50 * time.Microsecond; n.fromGuestCopies.Load() > 0 && time.Now().Before(deadline); pause = min(2*pause, 5*time.Millisecond) {
		// Short pauses first: the run's exit waits on this.
		time.Sleep(pause)
	}
	return int(n.fromGuestCopies.Load())
}

// Close stops the network: no new flows, and the frame pumps end.
func (n *Network) Close() {
	n.cancel()
	n.st.Close()
	n.wg.Wait()
}

// Stats returns the counters.
func (n *Network) Stats() Stats {
	return Stats{
		FramesIn: n.framesIn.Load(), FramesOut: n.framesOut.Load(), FramesDropped: n.framesDropped.Load(),
		TCPAllowed: n.tcpAllowed.Load(), TCPRefused: n.tcpRefused.Load(),
		UDPAllowed: n.udpAllowed.Load(), UDPRefused: n.udpRefused.Load(),
		DNSQueries: n.dnsQueries.Load(),
		InboundTCP: n.inboundTCPs.Load(), InboundRefused: n.inboundRefused.Load(), InboundUDP: n.inboundUDPs.Load(),
	}
}

// maxFrame is the largest frame read from the guest (lkl.MaxFrame).
const maxFrame = 64 << 10

// smallFrame: frames up to this size are copied into a chunk of their own.
const smallFrame = 4096

// fromGuest carries the guest's frames into the stack. Each frame is read
// straight into a view from gVisor's buffer pool, which the packet then
// owns: for a large frame no copy on this side but of its first
// headChunk bytes (splitHeaders), and no allocation.
func (n *Network) fromGuest() {
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		v := buffer.NewViewSize(maxFrame)
		m := n.frames.Read(v.AsSlice(), 0)
		if m == 0 {
			n.afterFrames()
			m = n.frames.Read(v.AsSlice(), 200)
		}
		if m < 0 {
			v.Release()
			return
		}
		if m < header.EthernetMinimumSize {
			v.Release()
			continue
		}
		if m <= smallFrame {
			// A small frame gets a chunk of its own size: a queued
			// segment must not hold 64 KiB.
			small := buffer.NewViewWithData(v.AsSlice()[:m])
			v.Release()
			v = small
			n.framesIn.Add(1)
			n.inject(buffer.MakeWithView(v))
			continue
		}
		v.CapLength(m)
		n.framesIn.Add(1)
		n.inject(splitHeaders(v))
	}
}

// headChunk is the size of the chunk that holds a large frame's first
// bytes (splitHeaders): the ethernet, IP and TCP headers with their usual
// options fit in it. A full chunk of gVisor's pool (64, 128, 256, ...),
// so that the rest is appended to the buffer, not copied into it.
const headChunk = 256

// splitHeaders makes the buffer of a large frame v (owned; more than
// headChunk bytes): its first headChunk bytes copied into a small chunk
// of their own, then the rest of v's chunk. Why: gVisor's IPv4 and IPv6
// endpoints take a second view of the network header while they hold the
// first (hence a shared chunk), and a shared chunk is copied whole before
// a view into it is handed out (buffer.PullUp): with the frame in one
// chunk that is a copy of up to 64 KiB per frame; here it is headChunk
// bytes. A header longer than that (large IP and TCP options) is merged
// by gVisor as any header that spans two views.
func splitHeaders(v *buffer.View) buffer.Buffer {
	head := buffer.NewViewWithData(v.AsSlice()[:headChunk])
	v.TrimFront(headChunk)
	b := buffer.MakeWithView(head)
	b.Append(v)
	return b
}

// inject hands a frame from the guest to the stack.
func (n *Network) inject(b buffer.Buffer) {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: b})
	n.ch.InjectInbound(0, pkt)
	pkt.DecRef()
}

// toGuest carries the stack's frames to the guest.
func (n *Network) toGuest() {
	defer n.wg.Done()
	for {
		pkt := n.ch.ReadContext(n.ctx)
		if pkt == nil {
			return
		}
		v := pkt.ToView()
		b := v.AsSlice()
		if n.frames.Write(b) {
			n.framesOut.Add(1)
		} else {
			n.framesDropped.Add(1)
		}
		v.Release()
		pkt.DecRef()
		if n.ch.NumQueued() == 0 {
			n.afterFrames()
		}
	}
}

func (n *Network) afterFrames() {
	if n.cfg.AfterFrames != nil {
		n.cfg.AfterFrames()
	}
}

func (n *Network) event(ev Event) {
	if n.cfg.Event != nil {
		n.cfg.Event(ev)
	}
}

// tcpFlow ends one guest TCP connection: refused (reset) or carried to
// the host's connection to the real destination, dialled before the
// guest's handshake completes so that a host refusal is a reset too.
func (n *Network) tcpFlow(r *tcp.ForwarderRequest) {
	id := r.ID()
	syn, _ := n.takeSYN(id)
	dest := addrPort(id.LocalAddress, id.LocalPort)
	ev := Event{Proto: "tcp", Guest: addrPort(id.RemoteAddress, id.RemotePort), Dest: dest, Real: Real(dest)}
	if dest.Addr() == DNSAddr {
		ev.Allowed, ev.Rule, ev.Why = false, "no-service", "no TCP service at the DNS address"
	} else {
		ev.Allowed, ev.Rule, ev.Why = n.cfg.Policy.DecideRule(ev.Real)
	}
	if !ev.Allowed {
		n.tcpRefused.Add(1)
		n.event(ev)
		r.Complete(true)
		return
	}
	var host net.Conn
	var err error
	if n.loopDial && ev.Real.Addr().IsLoopback() {
		host, err = dialLoopback(ev.Real, dialTimeout)
	} else {
		ctx, cancel := context.WithTimeout(n.ctx, dialTimeout)
		host, err = n.cfg.Dialer.DialContext(ctx, "tcp", ev.Real.String())
		cancel()
	}
	if err != nil {
		// Refused: a reset. Unreachable: an ICMP error as a router's.
		// Timed out: no answer (unreach.go).
		n.tcpRefused.Add(1)
		a := classifyDial(err)
		switch {
		case a == answerSilence:
			n.silence(id)
		case a != answerReset && !n.unreachable(id, syn, a):
			a = answerReset
		}
		ev.Allowed, ev.Rule, ev.Why = false, "dial", "dial: "+err.Error()+"; the guest gets "+a.String()
		n.event(ev)
		r.Complete(a == answerReset)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		host.Close()
		r.Complete(true)
		n.tcpRefused.Add(1)
		ev.Allowed, ev.Rule, ev.Why = false, "handshake", "handshake: "+terr.String()
		n.event(ev)
		return
	}
	r.Complete(false)
	n.tcpAllowed.Add(1)
	n.event(ev)
	n.splice(resetter{gonet.NewTCPConn(&wq, ep), ep}, host)
}

// resetter is the guest's side of a carried connection: a reset of the
// host's side is passed on as a reset (Abort sends RST), not a FIN.
type resetter struct {
	*gonet.TCPConn
	ep tcpip.Endpoint
}

func (r resetter) Reset() { r.ep.Abort() }

type halfCloser interface{ CloseWrite() error }

// spliceBuf is the copy buffer of each direction of a spliced flow: a
// host TCP connection's ReadFrom would copy through 32 KiB, i.e. twice
// the reads and writes (and wake-ups) per 64 KiB frame.
const spliceBuf = 256 << 10

var splicePool = sync.Pool{New: func() any { b := make([]byte, spliceBuf); return &b }}

// copyConn copies src to dst until src ends or either fails, through a
// pooled buffer of spliceBuf. It returns the error that ended it, nil
// for src's end of file.
func copyConn(dst, src net.Conn) error {
	bp := splicePool.Get().(*[]byte)
	defer splicePool.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// splice copies both ways until both directions end, passing half-closes
// on, then closes both.
func (n *Network) splice(a, b net.Conn) {
	if t, ok := b.(*net.TCPConn); ok {
		// A host peer's urgent byte stays in the stream: Go's reads
		// would skip it, and gVisor's TCP carries no urgent data, so
		// it reaches the guest in line rather than not at all
		// (docs/networking.md, "Urgent data").
		if rc, err := t.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) {
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_OOBINLINE, 1)
			})
		}
	}
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		err := copyConn(dst, src)
		if r, ok := dst.(interface{ Reset() }); ok && errors.Is(err, syscall.ECONNRESET) {
			r.Reset() // the host peer reset: so does the guest's
			return
		}
		if h, ok := dst.(halfCloser); ok {
			h.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	n.fromGuestCopies.Add(1)
	go cp(a, b)
	cp(b, a) // on the caller's goroutine: one goroutine fewer per flow
	n.fromGuestCopies.Add(-1)
	wg.Wait()
	a.Close()
	b.Close()
}

// udpIdle ends a UDP flow without traffic.
const udpIdle = 60 * time.Second

// udpFlow ends one guest UDP flow (a guest address and port to one
// destination): to the DNS responder, refused, or relayed over a host
// socket until idle.
func (n *Network) udpFlow(r *udp.ForwarderRequest) bool {
	id := r.ID()
	dest := addrPort(id.LocalAddress, id.LocalPort)
	ev := Event{Proto: "udp", Guest: addrPort(id.RemoteAddress, id.RemotePort), Dest: dest, Real: Real(dest)}
	if dest.Addr() == DNSAddr {
		if dest.Port() != 53 || n.cfg.DNS == "" {
			ev.Allowed, ev.Rule, ev.Why = false, "no-service", "no DNS service"
		} else {
			ev.Allowed, ev.Rule, ev.Why = true, "dns", "DNS responder"
			ev.Real = netip.AddrPort{}
		}
	} else {
		ev.Allowed, ev.Rule, ev.Why = n.cfg.Policy.DecideRule(ev.Real)
	}
	if !ev.Allowed {
		n.udpRefused.Add(1)
		n.event(ev)
		return false // the stack answers port unreachable
	}
	target := ev.Real.String()
	if dest.Addr() == DNSAddr {
		target = n.cfg.DNS
	}
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	host, err := n.cfg.Dialer.DialContext(ctx, "udp", target)
	cancel()
	if err != nil {
		n.udpRefused.Add(1)
		ev.Allowed, ev.Rule, ev.Why = false, "dial", "dial: "+err.Error()
		n.event(ev)
		return false
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		host.Close()
		return false
	}
	n.udpAllowed.Add(1)
	n.event(ev)
	guest := gonet.NewUDPConn(&wq, ep)
	go n.relayUDP(id, guest, host, dest.Addr() == DNSAddr)
	return true
}

// relayUDP carries datagrams both ways until the flow is idle. When the
// host's socket reports a refusal (the destination's ICMP port
// unreachable, seen by the host's next send or receive), the guest gets
// an ICMP port unreachable about its flow, as it would from the
// destination, and the flow goes on: a connected socket's next receive
// fails with ECONNREFUSED, once, as on Linux.
func (n *Network) relayUDP(id stack.TransportEndpointID, guest *gonet.UDPConn, host net.Conn, dns bool) {
	done := make(chan struct{})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(done)
			guest.Close()
			host.Close()
		})
	}
	// The start of the last datagram sent to the host, which a refusal
	// quotes.
	var lastMu sync.Mutex
	last := make([]byte, 0, maxUDPQuote)
	refused := func() {
		lastMu.Lock()
		q := udpQuote(id, last)
		lastMu.Unlock()
		n.unreachable(id, q, answerPortUnr)
	}
	cp := func(dst, src net.Conn, count bool) {
		defer stop()
		buf := make([]byte, 65536)
		for {
			src.SetReadDeadline(time.Now().Add(udpIdle))
			m, err := src.Read(buf)
			if err != nil {
				if src == host && errors.Is(err, syscall.ECONNREFUSED) {
					refused()
					continue
				}
				return // idle (the deadline), or closed
			}
			if count {
				n.dnsQueries.Add(1)
			}
			if dst == host {
				lastMu.Lock()
				last = append(last[:0], buf[:min(m, maxUDPQuote)]...)
				lastMu.Unlock()
			}
			if _, err := dst.Write(buf[:m]); err != nil {
				if dst == host && errors.Is(err, syscall.ECONNREFUSED) {
					refused()
					continue
				}
				return
			}
		}
	}
	go cp(host, guest, dns)
	go cp(guest, host, false)
	select {
	case <-done:
	case <-n.ctx.Done():
		stop()
	}
}
