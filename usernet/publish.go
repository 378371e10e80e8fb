package usernet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// Publish is one published port (--publish): kbox listens on Host and
// carries each connection (TCP) or each source's datagrams (UDP) to the
// guest's GuestPort on 10.0.2.15.
type Publish struct {
	Host      netip.AddrPort // port 0: any free port (tests)
	GuestPort uint16
	UDP       bool
}

func (p Publish) String() string {
	s := fmt.Sprintf("%s:%d", p.Host, p.GuestPort)
	if p.UDP {
		s += "/udp"
	}
	return s
}

// ParsePublish reads [HOSTADDR:]HOSTPORT:GUESTPORT[/udp|/tcp]. HOSTADDR
// defaults to 127.0.0.1; an IPv6 one is in brackets ("[::1]:8080:80").
func ParsePublish(s string) (Publish, error) {
	bad := func(why string) (Publish, error) {
		return Publish{}, fmt.Errorf("publish %q: %s (want [HOSTADDR:]HOSTPORT:GUESTPORT[/udp], e.g. 8080:80 or 127.0.0.1:5353:53/udp)", s, why)
	}
	var p Publish
	rest := s
	if i := strings.LastIndex(rest, "/"); i >= 0 {
		switch rest[i+1:] {
		case "udp":
			p.UDP = true
		case "tcp":
		default:
			return bad("protocol must be tcp or udp")
		}
		rest = rest[:i]
	}
	host := "127.0.0.1"
	if strings.HasPrefix(rest, "[") {
		end := strings.Index(rest, "]")
		if end < 0 || !strings.HasPrefix(rest[end+1:], ":") {
			return bad("want [IPV6]:HOSTPORT:GUESTPORT")
		}
		host, rest = rest[1:end], rest[end+2:]
	} else if parts := strings.Split(rest, ":"); len(parts) == 3 {
		host, rest = parts[0], parts[1]+":"+parts[2]
	}
	ports := strings.Split(rest, ":")
	if len(ports) != 2 {
		return bad("want two ports")
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return bad("host address " + strconv.Quote(host) + " is no IP address")
	}
	hp, err := strconv.ParseUint(ports[0], 10, 16)
	if err != nil {
		return bad("bad host port " + strconv.Quote(ports[0]))
	}
	gp, err := strconv.ParseUint(ports[1], 10, 16)
	if err != nil || gp == 0 {
		return bad("bad guest port " + strconv.Quote(ports[1]))
	}
	p.Host = netip.AddrPortFrom(addr, uint16(hp))
	p.GuestPort = uint16(gp)
	return p, nil
}

// guestFull is the guest's address at port.
func guestFull(port uint16) tcpip.FullAddress {
	return tcpip.FullAddress{NIC: nicID, Addr: addr4(GuestAddr), Port: port}
}

// gatewayFull is the published connections' source in the guest: the
// gateway, as slirp does.
var gatewayFull = tcpip.FullAddress{NIC: nicID, Addr: addr4(GatewayIP)}

// Publish starts forwarding p: it listens on the host now (so a taken
// port is an error at start) and returns the address it listens on.
// Close stops it.
func (n *Network) Publish(p Publish) (netip.AddrPort, error) {
	if p.UDP {
		pc, err := net.ListenPacket("udp", p.Host.String())
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("publish %s: %w", p, err)
		}
		n.closeOnStop(pc)
		n.wg.Add(1)
		go n.publishUDP(pc.(*net.UDPConn), p.GuestPort)
		return pc.LocalAddr().(*net.UDPAddr).AddrPort(), nil
	}
	ln, err := net.Listen("tcp", p.Host.String())
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("publish %s: %w", p, err)
	}
	n.closeOnStop(ln)
	n.wg.Add(1)
	go n.publishTCP(ln, p.GuestPort)
	return ln.Addr().(*net.TCPAddr).AddrPort(), nil
}

type closer interface{ Close() error }

// closeOnStop closes c when the network stops.
func (n *Network) closeOnStop(c closer) {
	go func() {
		<-n.ctx.Done()
		c.Close()
	}()
}

// publishTCP accepts host connections and carries each to the guest.
func (n *Network) publishTCP(ln net.Listener, port uint16) {
	defer n.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if n.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of fds: try again
			continue
		}
		go n.inboundTCP(c.(*net.TCPConn), port)
	}
}

// inboundTCP dials the guest's port from the stack's side (the gateway's
// address) and splices the two connections. A guest that refuses (no
// listener: its reset) or does not answer resets the host connection.
func (n *Network) inboundTCP(host *net.TCPConn, port uint16) {
	peer := host.RemoteAddr().(*net.TCPAddr).AddrPort()
	ev := Event{Proto: "tcp", Inbound: true, Guest: netip.AddrPortFrom(GuestAddr, port), Dest: netip.AddrPortFrom(GuestAddr, port), Real: peer}
	ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
	g, err := gonet.DialTCPWithBind(ctx, n.st, gatewayFull, guestFull(port), ipv4.ProtocolNumber)
	cancel()
	if err != nil {
		n.inboundRefused.Add(1)
		ev.Rule, ev.Why = "published", "guest: "+err.Error()
		n.event(ev)
		host.SetLinger(0) // close with a reset, as a refused port would
		host.Close()
		return
	}
	n.inboundTCPs.Add(1)
	ev.Allowed, ev.Rule, ev.Why = true, "published", "published"
	n.event(ev)
	n.splice(g, host)
}

// publishUDP relays datagrams from each host source to the guest's port
// over a flow of its own (a gateway port in the guest's view), and the
// guest's answers back to that source, until the flow is idle.
func (n *Network) publishUDP(pc *net.UDPConn, port uint16) {
	defer n.wg.Done()
	var mu sync.Mutex
	flows := map[netip.AddrPort]*gonet.UDPConn{}
	buf := make([]byte, 65536)
	for {
		m, src, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if n.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				mu.Lock()
				for _, g := range flows {
					g.Close()
				}
				mu.Unlock()
				return
			}
			continue
		}
		mu.Lock()
		g := flows[src]
		if g == nil {
			laddr, raddr := gatewayFull, guestFull(port)
			g, err = gonet.DialUDP(n.st, &laddr, &raddr, ipv4.ProtocolNumber)
			if err != nil {
				mu.Unlock()
				n.event(Event{Proto: "udp", Inbound: true, Guest: netip.AddrPortFrom(GuestAddr, port), Dest: netip.AddrPortFrom(GuestAddr, port), Real: src, Rule: "published", Why: "guest: " + err.Error()})
				continue
			}
			flows[src] = g
			n.inboundUDPs.Add(1)
			n.event(Event{Proto: "udp", Inbound: true, Guest: netip.AddrPortFrom(GuestAddr, port), Dest: netip.AddrPortFrom(GuestAddr, port), Real: src, Allowed: true, Rule: "published", Why: "published"})
			go func(src netip.AddrPort, g *gonet.UDPConn) {
				back := make([]byte, 65536)
				for {
					g.SetReadDeadline(time.Now().Add(udpIdle))
					k, err := g.Read(back)
					if err != nil {
						break
					}
					pc.WriteToUDPAddrPort(back[:k], src)
				}
				mu.Lock()
				if flows[src] == g {
					delete(flows, src)
				}
				mu.Unlock()
				g.Close()
			}(src, g)
		}
		mu.Unlock()
		g.Write(buf[:m])
	}
}
