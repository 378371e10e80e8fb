package usernet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func TestParseHostRule(t *testing.T) {
	for _, c := range []struct {
		in   string
		want HostRule
		err  bool
	}{
		{in: "api.example.com", want: HostRule{Name: "api.example.com"}},
		{in: "API.Example.com.:443", want: HostRule{Name: "api.example.com", Port: 443}},
		{in: "localhost:8000", want: HostRule{Name: "localhost", Port: 8000}},
		{in: "", err: true},
		{in: ":80", err: true},
		{in: "host:0", err: true},
		{in: "host:70000", err: true},
		{in: "host:http", err: true},
		{in: "a b", err: true},
		{in: "10.0.0.0/8", err: true},
		{in: "[::1]:80", err: true},
	} {
		got, err := ParseHostRule(c.in)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("ParseHostRule(%q) = %+v, %v", c.in, got, err)
		}
	}
}

// mapResolver is an injected resolver: a fixed table, NXDOMAIN
// otherwise; it records the names asked.
type mapResolver struct {
	mu    sync.Mutex
	m     map[string][]string
	asked []string
}

func (r *mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	as, ok := r.m[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for _, a := range as {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// TestAllowHost: --net-allow-host's names, resolved through an injected
// resolver, allow exactly their addresses (and port) with --net-deny-all;
// the events name the host; a name that does not resolve fails New.
func TestAllowHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go echoEach(ln)
	port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
	res := &mapResolver{m: map[string][]string{
		"svc.test":   {"127.0.0.1", "127.0.0.1"},
		"other.test": {"192.0.2.9", "2001:db8::9"},
	}}
	d := &loopDialer{}
	var mu sync.Mutex
	var events []Event
	svc := HostRule{Name: "svc.test", Port: port}
	s, _ := guestStack(t, Config{Policy: Policy{DenyAll: true}, Dialer: d, Resolver: res,
		AllowHosts: []HostRule{svc, {Name: "other.test"}},
		Event: func(ev Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}})

	// svc.test's port: carried (echo).
	c, err := dialGuest(s, netip.AddrPortFrom(GatewayIP, port).String())
	if err != nil {
		t.Fatalf("allowed host: %v", err)
	}
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Errorf("echo: %q, %v", buf, err)
	}
	c.Close()
	// svc.test on another port, and an address no name gave: deny-all.
	for _, dest := range []string{netip.AddrPortFrom(GatewayIP, port+1).String(), "192.0.2.10:80"} {
		if c, err := dialGuest(s, dest); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: %v, want connection refused", dest, err)
			if c != nil {
				c.Close()
			}
		}
	}
	// other.test on any port: the policy allows it, the test dialer (only
	// 127.0.0.0/8) refuses it, so it was dialled.
	dialGuest(s, "192.0.2.9:443")
	refused, _ := d.lists()
	if len(refused) != 1 || refused[0] != "tcp 192.0.2.9:443" {
		t.Errorf("dialer refused %q, want tcp 192.0.2.9:443 (allowed by other.test)", refused)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []struct {
		allowed bool
		rule    string
	}{
		{true, "allow host svc.test = 127.0.0.1/32:" + itoa(port)},
		{false, "deny-all"},
		{false, "deny-all"},
		{false, "dial"},
	}
	if len(events) != len(want) {
		t.Fatalf("events %+v", events)
	}
	for i, w := range want {
		if events[i].Allowed != w.allowed || events[i].Rule != w.rule {
			t.Errorf("event %d: %v %q, want %v %q", i, events[i].Allowed, events[i].Rule, w.allowed, w.rule)
		}
	}

	// A name that does not resolve: no network.
	if _, err := New(&memFrames{}, Config{Resolver: res, AllowHosts: []HostRule{{Name: "nothere.test"}}}); err == nil || !strings.Contains(err.Error(), "nothere.test") {
		t.Errorf("unresolvable name: %v", err)
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

// TestUpstreamResolver: host rules resolve through the DNS relay's
// upstream (a fake one on 127.0.0.1, never the host's resolver).
func TestUpstreamResolver(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var m dnsmessage.Message
			if m.Unpack(buf[:n]) != nil || len(m.Questions) != 1 {
				continue
			}
			q := m.Questions[0]
			m.Header.Response, m.Header.Authoritative = true, true
			switch {
			case q.Name.String() != "web.kbox.test.":
				m.Header.RCode = dnsmessage.RCodeNameError
			case q.Type == dnsmessage.TypeA:
				m.Answers = []dnsmessage.Resource{{Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
					Body: &dnsmessage.AResource{A: [4]byte{127, 0, 0, 9}}}}
			case q.Type == dnsmessage.TypeAAAA:
				m.Answers = []dnsmessage.Resource{{Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeAAAA, Class: dnsmessage.ClassINET, TTL: 60},
					Body: &dnsmessage.AAAAResource{AAAA: netip.MustParseAddr("::1").As16()}}}
			}
			out, _ := m.Pack()
			pc.WriteTo(out, a)
		}
	}()
	d := &loopDialer{}
	r := UpstreamResolver(pc.LocalAddr().String(), d)
	rules, err := ResolveHostRules(context.Background(), r, []HostRule{{Name: "web.kbox.test", Port: 80}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, r.String())
	}
	if strings.Join(got, ",") != "host web.kbox.test = 127.0.0.9/32:80,host web.kbox.test = [::1/128]:80" &&
		strings.Join(got, ",") != "host web.kbox.test = [::1/128]:80,host web.kbox.test = 127.0.0.9/32:80" {
		t.Errorf("rules %q", got)
	}
	if _, err := ResolveHostRules(context.Background(), r, []HostRule{{Name: "nothere.kbox.test"}}); err == nil {
		t.Errorf("NXDOMAIN resolved")
	}
}
