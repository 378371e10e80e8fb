package usernet

import (
	"net"
	"net/netip"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, c := range []struct {
		in, want string
		bad      bool
	}{
		{in: "127.0.0.1:8000", want: "127.0.0.1/32:8000"},
		{in: "10.0.0.0/8", want: "10.0.0.0/8"},
		{in: "10.1.2.3/8:443", want: "10.0.0.0/8:443"},
		{in: "::1", want: "::1/128"},
		{in: "[fd00::/8]:443", want: "[fd00::/8]:443"},
		{in: "[::1]:80", want: "[::1/128]:80"},
		{in: "", bad: true},
		{in: "localhost:80", bad: true},
		{in: "127.0.0.1:0", bad: true},
		{in: "127.0.0.1:70000", bad: true},
		{in: "10.0.0.0/33", bad: true},
		{in: "[::1", bad: true},
		{in: "[::1]x", bad: true},
	} {
		r, err := ParseRule(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%q: accepted as %v", c.in, r)
			}
			continue
		}
		if err != nil || r.String() != c.want {
			t.Errorf("%q: %v, %v; want %s", c.in, r, err, c.want)
		}
	}
}

func TestPolicyDecide(t *testing.T) {
	rule := func(s string) Rule {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	notHost := func(netip.Addr) bool { return false } // TestHostAddress asks the host
	open := &Policy{HostAddr: notHost}
	allow := &Policy{HostAddr: notHost, Allow: []Rule{rule("127.0.0.1:8000"), rule("192.168.1.0/24")}}
	strict := &Policy{HostAddr: notHost, DenyAll: true, Allow: []Rule{rule("198.51.100.7:443")}}
	for _, c := range []struct {
		p    *Policy
		dest string
		want bool
	}{
		{open, "93.184.215.14:80", true},
		{open, "127.0.0.1:8000", false},
		{open, "127.1.2.3:80", false},
		{open, "169.254.169.254:80", false},
		{open, "[fd00:ec2::254]:80", false},
		{open, "[fe80::1]:80", false},
		{open, "10.1.2.3:80", false},
		{open, "172.16.0.1:80", false},
		{open, "192.168.1.1:80", false},
		{open, "[fd12::1]:80", false},
		{open, "[::1]:80", false},
		{open, "10.0.2.3:80", false},
		{open, "[2001:db8::1]:443", true},
		{open, "[::ffff:127.0.0.1]:8000", false},
		{allow, "127.0.0.1:8000", true},
		{allow, "127.0.0.1:8001", false},
		{allow, "[::ffff:127.0.0.1]:8000", true},
		{allow, "192.168.1.77:22", true},
		{allow, "169.254.169.254:80", false},
		{strict, "198.51.100.7:443", true},
		{strict, "198.51.100.7:80", false},
		{strict, "93.184.215.14:80", false},
	} {
		got, why := c.p.Decide(netip.MustParseAddrPort(c.dest))
		if got != c.want {
			t.Errorf("%+v %s: %v (%s), want %v", c.p, c.dest, got, why, c.want)
		}
	}
	if r := Real(netip.MustParseAddrPort("10.0.2.2:8000")); r.String() != "127.0.0.1:8000" {
		t.Errorf("the gateway maps to %v", r)
	}
}

// TestPolicyIPv6: the IPv6 gateway stands for the host's ::1, which is
// guarded until a rule names it; the guest's own /64, link-local and the
// metadata address are refused, each with its rule.
func TestPolicyIPv6(t *testing.T) {
	loop, _ := ParseRule("[::1]:8000")
	notHost := func(netip.Addr) bool { return false }
	allow := &Policy{HostAddr: notHost, Allow: []Rule{loop}}
	for _, c := range []struct {
		p           *Policy
		named, real string
		want        bool
		rule        string
	}{
		{&Policy{HostAddr: notHost}, "[fd00:6b62:6f78::2]:8000", "[::1]:8000", false, "guarded ::1/128"},
		{allow, "[fd00:6b62:6f78::2]:8000", "[::1]:8000", true, "allow [::1/128]:8000"},
		{allow, "[fd00:6b62:6f78::2]:8001", "[::1]:8001", false, "guarded ::1/128"},
		{allow, "[fd00:6b62:6f78::9]:80", "[fd00:6b62:6f78::9]:80", false, "guest-network"},
		{allow, "[fe80::1]:80", "[fe80::1]:80", false, "guarded fe80::/10"},
		{allow, "[fd00:ec2::254]:80", "[fd00:ec2::254]:80", false, "guarded fd00:ec2::254/128"},
		{allow, "[fd12::1]:80", "[fd12::1]:80", false, "guarded fc00::/7"},
		{allow, "[2001:db8::1]:443", "[2001:db8::1]:443", true, "public"},
	} {
		r := Real(netip.MustParseAddrPort(c.named))
		if r.String() != c.real {
			t.Errorf("Real(%s) = %s, want %s", c.named, r, c.real)
		}
		ok, rule, _ := c.p.DecideRule(r)
		if ok != c.want || rule != c.rule {
			t.Errorf("%s: %v %q, want %v %q", c.named, ok, rule, c.want, c.rule)
		}
	}
}

// TestPolicyHostAddress: the host's own addresses are refused as its
// loopback is, unless a rule names them; the rules before it decide
// first.
func TestPolicyHostAddress(t *testing.T) {
	own := netip.MustParseAddr("203.0.113.5")
	isOwn := func(a netip.Addr) bool { return a == own }
	rule, _ := ParseRule("203.0.113.5:22")
	for _, c := range []struct {
		p    *Policy
		dest string
		want bool
		rule string
	}{
		{&Policy{HostAddr: isOwn}, "203.0.113.5:22", false, "host-address"},
		{&Policy{HostAddr: isOwn}, "203.0.113.6:22", true, "public"},
		{&Policy{HostAddr: isOwn, Allow: []Rule{rule}}, "203.0.113.5:22", true, "allow 203.0.113.5/32:22"},
		{&Policy{HostAddr: isOwn, Allow: []Rule{rule}}, "203.0.113.5:23", false, "host-address"},
		{&Policy{HostAddr: isOwn, DenyAll: true}, "203.0.113.5:22", false, "deny-all"},
		{&Policy{HostAddr: func(netip.Addr) bool { return true }}, "127.0.0.1:22", false, "guarded 127.0.0.0/8"},
	} {
		ok, r, _ := c.p.DecideRule(netip.MustParseAddrPort(c.dest))
		if ok != c.want || r != c.rule {
			t.Errorf("%s: %v %q, want %v %q", c.dest, ok, r, c.want, c.rule)
		}
	}
}

// TestHostAddress asks this host's routing: its loopback and every
// address of its interfaces are its own; documentation addresses it
// does not have are not.
func TestHostAddress(t *testing.T) {
	own := map[netip.Addr]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ia := range addrs {
		p, err := netip.ParsePrefix(ia.String())
		if err != nil || p.Addr().IsLinkLocalUnicast() {
			continue // a link-local address needs its zone
		}
		own[p.Addr()] = true
	}
	own[netip.MustParseAddr("127.0.0.1")] = true
	for a := range own {
		if !hostAddress(a) {
			t.Errorf("hostAddress(%s) = false for one of this host's addresses", a)
		}
	}
	t.Logf("this host's addresses: %v", own)
	for _, s := range []string{"198.51.100.1", "203.0.113.77", "2001:db8::77", "::ffff:198.51.100.1"} {
		a := netip.MustParseAddr(s)
		if own[a.Unmap()] {
			continue
		}
		if hostAddress(a) {
			t.Errorf("hostAddress(%s) = true; this host has no such address", a)
		}
	}
}
