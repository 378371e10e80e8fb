package usernet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// HostRule is --net-allow-host NAME[:PORT]: the addresses NAME resolves
// to (at start), on PORT or any port.
type HostRule struct {
	Name string
	Port uint16
}

func (h HostRule) String() string {
	if h.Port == 0 {
		return h.Name
	}
	return h.Name + ":" + strconv.Itoa(int(h.Port))
}

// ParseHostRule reads NAME[:PORT] ("api.example.com", "api.example.com:443").
func ParseHostRule(s string) (HostRule, error) {
	bad := func(why string) (HostRule, error) {
		return HostRule{}, fmt.Errorf("net host rule %q: %s (want NAME[:PORT], e.g. api.example.com:443)", s, why)
	}
	name, port, hasPort := strings.Cut(s, ":")
	if name == "" {
		return bad("empty name")
	}
	if len(name) > 253 || strings.ContainsAny(name, " \t/[]@") {
		return bad("not a host name")
	}
	var h HostRule
	h.Name = strings.TrimSuffix(strings.ToLower(name), ".")
	if hasPort {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return bad("port must be 1-65535")
		}
		h.Port = uint16(n)
	}
	return h, nil
}

// Resolver resolves the names of host rules; *net.Resolver is one.
// Tests inject their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// UpstreamResolver is the resolver of host rules: the DNS relay's
// upstream dns (host:port) through d, so names resolve as the guest's
// queries to 10.0.2.3 do; with dns "" the host's resolver.
func UpstreamResolver(dns string, d Dialer) Resolver {
	if dns == "" {
		return net.DefaultResolver
	}
	if d == nil {
		d = &net.Dialer{Timeout: 10 * time.Second}
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, dns)
	}}
}

// resolveTimeout bounds the resolution of all host rules at start.
const resolveTimeout = 10 * time.Second

// ResolveHostRules turns host rules into address rules, one per address
// a name resolves to (IPv4 and IPv6), each naming its host. A name that
// does not resolve is an error: the run would refuse what the user meant
// to allow.
func ResolveHostRules(ctx context.Context, r Resolver, hs []HostRule) ([]Rule, error) {
	var rules []Rule
	for _, h := range hs {
		c, cancel := context.WithTimeout(ctx, resolveTimeout)
		addrs, err := r.LookupNetIP(c, "ip", h.Name)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("--net-allow-host %s: %w", h, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("--net-allow-host %s: no address", h)
		}
		seen := map[netip.Addr]bool{}
		for _, a := range addrs {
			a = a.Unmap()
			if seen[a] {
				continue
			}
			seen[a] = true
			rules = append(rules, Rule{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: h.Port, Host: h.Name})
		}
	}
	return rules, nil
}
