package usernet

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

func TestParsePublish(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{in: "8080:80", want: "127.0.0.1:8080:80"},
		{in: "0.0.0.0:8080:80/tcp", want: "0.0.0.0:8080:80"},
		{in: "127.0.0.2:5353:53/udp", want: "127.0.0.2:5353:53/udp"},
		{in: "[::1]:8080:80", want: "[::1]:8080:80"},
		{in: "80", err: "want two ports"},
		{in: "8080:0", err: "bad guest port"},
		{in: "8080:70000", err: "bad guest port"},
		{in: "x:80", err: "bad host port"},
		{in: "localhost:8080:80", err: "no IP address"},
		{in: "8080:80/sctp", err: "tcp or udp"},
		{in: "[::1:8080:80", err: "[IPV6]"},
		{in: "::1:8080:80", err: "want two ports"},
	} {
		p, err := ParsePublish(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || p.String() != c.want {
			t.Errorf("%q: %v %v, want %s", c.in, p, err, c.want)
		}
	}
}

// TestPublish: a host client reaches a server on the guest stack through
// a published port, both ways with a half-close; a port the guest does
// not listen on resets the host connection; UDP gets its answers back.
func TestPublish(t *testing.T) {
	g, n := guestStack(t, Config{Dialer: &loopDialer{}})
	ln, err := gonet.ListenTCP(g, tcpip.FullAddress{Addr: addr4(GuestAddr), Port: 80}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peers := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		peers <- c.RemoteAddr().String()
		b, _ := io.ReadAll(c) // until the host's half-close
		c.Write([]byte("got " + string(b)))
		c.Close()
	}()
	at, err := n.Publish(Publish{Host: netip.MustParseAddrPort("127.0.0.1:0"), GuestPort: 80})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", at.String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello"))
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(b) != "got hello" {
		t.Errorf("published echo: %q, %v", b, err)
	}
	if p := <-peers; !strings.HasPrefix(p, "10.0.2.2:") {
		t.Errorf("guest saw the peer %s, want the gateway", p)
	}

	// Nobody listens on the guest's port 81: the host connection is
	// accepted, then reset.
	at81, err := n.Publish(Publish{Host: netip.MustParseAddrPort("127.0.0.1:0"), GuestPort: 81})
	if err != nil {
		t.Fatal(err)
	}
	if err := resetOnRead(at81.String()); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("unpublished guest port: %v, want connection reset", err)
	}

	// A taken host port is an error at once.
	if _, err := n.Publish(Publish{Host: at, GuestPort: 80}); err == nil {
		t.Errorf("publishing a taken port worked")
	}

	// UDP: each datagram comes back from the guest to its host source.
	uc, err := gonet.DialUDP(g, &tcpip.FullAddress{Addr: addr4(GuestAddr), Port: 53}, nil, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			m, a, err := uc.ReadFrom(buf)
			if err != nil {
				return
			}
			uc.WriteTo(append([]byte("re:"), buf[:m]...), a)
		}
	}()
	uat, err := n.Publish(Publish{Host: netip.MustParseAddrPort("127.0.0.1:0"), GuestPort: 53, UDP: true})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := net.Dial("udp", uat.String())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	for _, msg := range []string{"one", "two"} {
		hc.Write([]byte(msg))
		hc.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		m, err := hc.Read(buf)
		if err != nil || string(buf[:m]) != "re:"+msg {
			t.Errorf("udp %s: %q, %v", msg, buf[:m], err)
		}
	}
	if st := n.Stats(); st.InboundTCP != 1 || st.InboundRefused != 1 || st.InboundUDP != 1 {
		t.Errorf("stats %+v", st)
	}
}

// resetOnRead connects to addr and reads: the error of whichever comes
// first (a fast reset can already fail the connect).
func resetOnRead(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return err
}
