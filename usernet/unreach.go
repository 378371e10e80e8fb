package usernet

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// How a failed host dial is answered to the guest's SYN (docs/networking.md,
// "When the host dial fails"). gVisor's forwarder can only complete the
// handshake or reset it, and a reset is ECONNREFUSED in the guest. A host
// that is unreachable is answered as a router would: an ICMP destination
// unreachable quoting the SYN, which LKL's TCP takes in SYN_SENT as the
// end of the connect with the matching errno (EHOSTUNREACH,
// ENETUNREACH; IPv6's administratively prohibited is EACCES). A dial that
// timed out gets no answer: the guest's SYNs go unanswered, and its
// connect ends as Linux's does with no answer (ETIMEDOUT, after its own
// SYN retries), or at its own timeout. A refusal, by the host or by the
// policy, stays a reset.

// dialAnswer is what the guest's SYN gets when the host dial failed.
type dialAnswer int

const (
	answerReset   dialAnswer = iota // refused, or a failure with no better answer
	answerHostUnr                   // ICMP host (IPv6: address) unreachable
	answerNetUnr                    // ICMP network unreachable (IPv6: no route)
	answerAdmin                     // ICMP administratively prohibited
	answerSilence                   // a timeout: no answer at all
	answerPortUnr                   // ICMP port unreachable (a UDP flow's host socket refused)
)

func (a dialAnswer) String() string {
	return [...]string{"reset", "ICMP host unreachable", "ICMP network unreachable",
		"ICMP administratively prohibited", "no answer (timeout)", "ICMP port unreachable"}[a]
}

// classifyDial says how to answer for a host dial's error.
func classifyDial(err error) dialAnswer {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return answerReset
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.EHOSTDOWN):
		return answerHostUnr
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ENETDOWN):
		return answerNetUnr
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return answerAdmin // a host firewall's refusal
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return answerSilence
	}
	return answerReset
}

// synQuote is what an ICMP error about a guest's SYN quotes: the SYN's
// network header and the first 8 bytes of its TCP header (ports and
// sequence number: LKL checks that the sequence is its own).
type synQuote struct {
	mac   tcpip.LinkAddress // the guest's
	quote []byte
}

// syns remembers the SYNs whose flows are being decided, and the flows
// whose dial timed out (their SYNs are dropped for silenceFor).
type syns struct {
	mu     sync.Mutex
	quotes map[stack.TransportEndpointID]synQuote
	silent map[stack.TransportEndpointID]time.Time
}

// silenceFor is how long a timed-out flow's SYNs stay unanswered
// without a new dial: longer than Linux's SYN retries (about 127 s).
const silenceFor = 3 * time.Minute

// maxSyns bounds both tables (a SYN the forwarder dropped leaves its quote).
const maxSyns = 4096

// handleTCP is the stack's TCP handler for packets of no endpoint: a SYN's
// quote is kept for its flow, a timed-out flow's SYN is dropped, the rest
// goes to the forwarder.
func (n *Network) handleTCP(fwd func(stack.TransportEndpointID, *stack.PacketBuffer) bool) func(stack.TransportEndpointID, *stack.PacketBuffer) bool {
	return func(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
		th := header.TCP(pkt.TransportHeader().Slice())
		if len(th) < header.TCPMinimumSize || th.Flags() != header.TCPFlagSyn {
			return fwd(id, pkt)
		}
		n.syns.mu.Lock()
		if t, ok := n.syns.silent[id]; ok {
			if time.Since(t) < silenceFor {
				n.syns.mu.Unlock()
				return true // dropped: the dial timed out
			}
			delete(n.syns.silent, id)
		}
		if n.syns.quotes == nil || len(n.syns.quotes) >= maxSyns {
			n.syns.quotes = map[stack.TransportEndpointID]synQuote{}
		}
		var mac tcpip.LinkAddress
		if eth := header.Ethernet(pkt.LinkHeader().Slice()); len(eth) >= header.EthernetMinimumSize {
			mac = eth.SourceAddress()
		}
		q := append(append([]byte(nil), pkt.NetworkHeader().Slice()...), th[:8]...)
		n.syns.quotes[id] = synQuote{mac: mac, quote: q}
		n.syns.mu.Unlock()
		return fwd(id, pkt)
	}
}

// takeSYN returns and forgets the quote of flow id's SYN.
func (n *Network) takeSYN(id stack.TransportEndpointID) (synQuote, bool) {
	n.syns.mu.Lock()
	defer n.syns.mu.Unlock()
	q, ok := n.syns.quotes[id]
	delete(n.syns.quotes, id)
	return q, ok
}

// silence drops flow id's SYNs from now on (for silenceFor).
func (n *Network) silence(id stack.TransportEndpointID) {
	n.syns.mu.Lock()
	defer n.syns.mu.Unlock()
	if n.syns.silent == nil || len(n.syns.silent) >= maxSyns {
		n.syns.silent = map[stack.TransportEndpointID]time.Time{}
	}
	n.syns.silent[id] = time.Now()
}

// unreachable sends the guest an ICMP destination unreachable of kind a
// about flow id's SYN quoted by q; it reports false when it could not
// (no quote, or a kind without an ICMP answer).
func (n *Network) unreachable(id stack.TransportEndpointID, q synQuote, a dialAnswer) bool {
	if len(q.quote) < header.IPv4MinimumSize+8 {
		return false
	}
	mac := q.mac
	if len(mac) != header.EthernetAddressSize {
		mac = tcpip.LinkAddress(GuestMAC[:])
	}
	var frame []byte
	if id.RemoteAddress.Len() == 4 {
		frame = icmp4Unreachable(id, q.quote, a)
	} else {
		frame = icmp6Unreachable(id, q.quote, a)
	}
	if frame == nil {
		return false
	}
	typ := header.IPv6ProtocolNumber
	if id.RemoteAddress.Len() == 4 {
		typ = header.IPv4ProtocolNumber
	}
	header.Ethernet(frame).Encode(&header.EthernetFields{SrcAddr: tcpip.LinkAddress(GatewayMAC[:]), DstAddr: mac, Type: typ})
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	var l stack.PacketBufferList
	l.PushBack(pkt)
	_, err := n.ch.WritePackets(l)
	pkt.DecRef()
	return err == nil
}

// icmpCodes are the destination-unreachable codes of each answer that
// has one: LKL's TCP reads them as EHOSTUNREACH, ENETUNREACH and (IPv4)
// EHOSTUNREACH or (IPv6) EACCES.
var icmpCodes = map[dialAnswer]struct {
	v4 header.ICMPv4Code
	v6 header.ICMPv6Code
}{
	answerHostUnr: {header.ICMPv4HostUnreachable, header.ICMPv6AddressUnreachable},
	answerNetUnr:  {header.ICMPv4NetUnreachable, header.ICMPv6NetworkUnreachable},
	answerAdmin:   {header.ICMPv4AdminProhibited, header.ICMPv6Prohibited},
	answerPortUnr: {header.ICMPv4PortUnreachable, header.ICMPv6PortUnreachable},
}

// maxUDPQuote is how much of a refused datagram's payload an ICMP error
// quotes (Linux's IPv4 error quotes up to 576 bytes in all).
const maxUDPQuote = 512

// udpQuote is what an ICMP error about a UDP flow's datagram quotes: an
// IP header and a UDP header made from the flow's addresses and ports,
// then payload, the start of the last datagram the guest sent on the
// flow (the datagram itself went to the host before the host's socket
// reported the refusal). LKL finds the guest's socket by the headers and
// gives the payload to an error queue's reader (IP_RECVERR); it checks
// neither checksum nor length.
func udpQuote(id stack.TransportEndpointID, payload []byte) synQuote {
	var q []byte
	ul := header.UDPMinimumSize + len(payload)
	if id.RemoteAddress.Len() == 4 {
		q = make([]byte, header.IPv4MinimumSize+ul)
		ip := header.IPv4(q)
		ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(q)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
			SrcAddr: id.RemoteAddress, DstAddr: id.LocalAddress})
		ip.SetChecksum(^ip.CalculateChecksum())
	} else {
		q = make([]byte, header.IPv6MinimumSize+ul)
		header.IPv6(q).Encode(&header.IPv6Fields{PayloadLength: uint16(ul), TransportProtocol: header.UDPProtocolNumber,
			HopLimit: 64, SrcAddr: id.RemoteAddress, DstAddr: id.LocalAddress})
	}
	u := header.UDP(q[len(q)-ul:])
	u.Encode(&header.UDPFields{SrcPort: id.RemotePort, DstPort: id.LocalPort, Length: uint16(ul)})
	copy(u[header.UDPMinimumSize:], payload)
	return synQuote{quote: q}
}

// icmpSource is the source of an ICMP error of kind a about flow id: the
// destination itself for a port unreachable (as a host answers), the
// gateway for the rest (as a router does).
func icmpSource(id stack.TransportEndpointID, a dialAnswer) tcpip.Address {
	if a == answerPortUnr {
		return id.LocalAddress
	}
	if id.RemoteAddress.Len() == 4 {
		return addr4(GatewayIP)
	}
	return tcpip.AddrFrom16(GatewayIP6.As16())
}

// icmp4Unreachable is an ethernet frame (its ethernet header left to
// fill) carrying an ICMP destination unreachable from the gateway to the
// guest.
func icmp4Unreachable(id stack.TransportEndpointID, quote []byte, a dialAnswer) []byte {
	codes, ok := icmpCodes[a]
	if !ok {
		return nil
	}
	eth, ipl, icl := header.EthernetMinimumSize, header.IPv4MinimumSize, header.ICMPv4MinimumSize
	frame := make([]byte, eth+ipl+icl+len(quote))
	ip := header.IPv4(frame[eth:])
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(ipl + icl + len(quote)), TTL: 64,
		Protocol: uint8(header.ICMPv4ProtocolNumber), SrcAddr: icmpSource(id, a), DstAddr: id.RemoteAddress})
	ip.SetChecksum(^ip.CalculateChecksum())
	ic := header.ICMPv4(frame[eth+ipl:])
	ic.SetType(header.ICMPv4DstUnreachable)
	ic.SetCode(codes.v4)
	copy(ic[icl:], quote)
	ic.SetChecksum(header.ICMPv4Checksum(ic[:icl], checksum.Checksum(quote, 0)))
	return frame
}

// icmp6Unreachable is icmp4Unreachable for IPv6 (ICMPv6 codes: no route,
// address unreachable, administratively prohibited).
func icmp6Unreachable(id stack.TransportEndpointID, quote []byte, a dialAnswer) []byte {
	codes, ok := icmpCodes[a]
	if !ok {
		return nil
	}
	eth, ipl, icl := header.EthernetMinimumSize, header.IPv6MinimumSize, header.ICMPv6DstUnreachableMinimumSize
	frame := make([]byte, eth+ipl+icl+len(quote))
	src := icmpSource(id, a)
	ip := header.IPv6(frame[eth:])
	ip.Encode(&header.IPv6Fields{PayloadLength: uint16(icl + len(quote)), TransportProtocol: header.ICMPv6ProtocolNumber,
		HopLimit: 64, SrcAddr: src, DstAddr: id.RemoteAddress})
	ic := header.ICMPv6(frame[eth+ipl:])
	ic.SetType(header.ICMPv6DstUnreachable)
	ic.SetCode(codes.v6)
	copy(ic[icl:], quote)
	ic.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: ic[:icl], Src: src, Dst: id.RemoteAddress,
		PayloadCsum: checksum.Checksum(quote, 0), PayloadLen: len(quote)}))
	return frame
}
