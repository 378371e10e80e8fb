package usernet

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/netconf"
)

// The guest's network (docs/networking.md): its addresses are package
// netconf's.
var (
	GuestAddr  = netconf.GuestAddr
	GatewayIP  = netconf.GatewayIP
	DNSAddr    = netconf.DNSAddr
	PrefixLen  = netconf.PrefixLen
	hostLoop4  = netip.MustParseAddr("127.0.0.1")
	guestNet   = netip.PrefixFrom(GatewayIP, PrefixLen).Masked()
	GuestAddr6 = netconf.GuestAddr6
	GatewayIP6 = netconf.GatewayIP6
	PrefixLen6 = netconf.PrefixLen6
	hostLoop6  = netip.IPv6Loopback()
	guestNet6  = netip.PrefixFrom(GatewayIP6, PrefixLen6).Masked()
	GuestMAC   = [6]byte{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	GatewayMAC = [6]byte{0x52, 0x54, 0x00, 0x12, 0x34, 0x02}
)

// Rule names real destinations: a prefix and a port (0: any).
type Rule struct {
	Prefix netip.Prefix
	Port   uint16
	// Host is the name the rule came from (--net-allow-host), "" for a
	// rule given as an address.
	Host string
}

func (r Rule) String() string {
	s := r.Prefix.String()
	if r.Port != 0 {
		if r.Prefix.Addr().Is6() {
			s = fmt.Sprintf("[%s]:%d", r.Prefix, r.Port)
		} else {
			s = fmt.Sprintf("%s:%d", r.Prefix, r.Port)
		}
	}
	if r.Host != "" {
		s = "host " + r.Host + " = " + s
	}
	return s
}

func (r Rule) match(d netip.AddrPort) bool {
	return r.Prefix.Contains(d.Addr().Unmap()) && (r.Port == 0 || r.Port == d.Port())
}

// ParseRule reads CIDR[:PORT]: "127.0.0.1:8000", "10.0.0.0/8",
// "10.0.0.0/8:443", "::1", "[fd00::/8]:443". An address without a length
// is the one address.
func ParseRule(s string) (Rule, error) {
	bad := func(why string) (Rule, error) {
		return Rule{}, fmt.Errorf("net rule %q: %s (want CIDR[:PORT], e.g. 127.0.0.1:8000 or 10.0.0.0/8)", s, why)
	}
	addr, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return bad("no closing ]")
		}
		addr, port = s[1:end], s[end+1:]
		if port != "" {
			if !strings.HasPrefix(port, ":") {
				return bad("junk after ]")
			}
			port = port[1:]
		}
	} else if strings.Count(s, ":") == 1 {
		addr, port, _ = strings.Cut(s, ":")
	}
	var r Rule
	if strings.Contains(addr, "/") {
		p, err := netip.ParsePrefix(addr)
		if err != nil {
			return bad(err.Error())
		}
		r.Prefix = p.Masked()
	} else {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return bad(err.Error())
		}
		r.Prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return bad("port must be 1-65535")
		}
		r.Port = uint16(n)
	}
	return r, nil
}

// guarded are the destinations refused unless a rule allows them:
// link-local and cloud metadata, the host's loopback, private ranges,
// and what no unicast connection may reach.
var guarded = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", // link-local, metadata
		"127.0.0.0/8", "::1/128", // the host's loopback
		"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7", // private
		"0.0.0.0/8", "224.0.0.0/4", "240.0.0.0/4", "ff00::/8", "::/128", // not unicast destinations
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// Policy decides where guest connections may go.
type Policy struct {
	Allow   []Rule
	DenyAll bool // only what Allow names
	// HostAddr says whether an address is one of the host's own, which
	// are guarded as its loopback is (nil: hostAddress, the host's
	// routing; tests name their own).
	HostAddr func(netip.Addr) bool
}

// Real maps a destination the guest named to the real one: the gateway
// stands for the host's 127.0.0.1, the IPv6 gateway for its ::1.
func Real(d netip.AddrPort) netip.AddrPort {
	switch d.Addr().Unmap() {
	case GatewayIP:
		return netip.AddrPortFrom(hostLoop4, d.Port())
	case GatewayIP6:
		return netip.AddrPortFrom(hostLoop6, d.Port())
	}
	return netip.AddrPortFrom(d.Addr().Unmap(), d.Port())
}

// Decide says whether the guest may reach real destination d, and why.
func (p *Policy) Decide(d netip.AddrPort) (bool, string) {
	ok, _, why := p.DecideRule(d)
	return ok, why
}

// DecideRule is Decide with the rule that decided, in a short stable
// form for the observatory, the trace and the audit log: "allow RULE"
// (RULE as --net-allow or --net-allow-host gave it), "deny-all",
// "guest-network", "guarded PREFIX", "host-address" or "public".
func (p *Policy) DecideRule(d netip.AddrPort) (allowed bool, rule, why string) {
	for _, r := range p.Allow {
		if r.match(d) {
			return true, "allow " + r.String(), "allowed by " + r.String()
		}
	}
	if p.DenyAll {
		return false, "deny-all", "--net-deny-all"
	}
	a := d.Addr().Unmap()
	if guestNet.Contains(a) || guestNet6.Contains(a) {
		return false, "guest-network", "the guest's own network"
	}
	for _, g := range guarded {
		if g.Contains(a) {
			return false, "guarded " + g.String(), "guarded range " + g.String()
		}
	}
	// The host's own public addresses reach its services as its
	// loopback does: guarded the same way.
	hostAddr := p.HostAddr
	if hostAddr == nil {
		hostAddr = hostAddress
	}
	if hostAddr(a) {
		return false, "host-address", "one of the host's own addresses"
	}
	return true, "public", "public"
}
