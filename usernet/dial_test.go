package usernet

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestDialLoopback: the blocking loopback dial connects, carries data and
// fails as the default dialer does (the same error text, the same answer
// to the guest).
func TestDialLoopback(t *testing.T) {
	for _, loop := range []string{"127.0.0.1", "::1"} {
		t.Run(loop, func(t *testing.T) { testDialLoopback(t, loop) })
	}
}

func testDialLoopback(t *testing.T, loop string) {
	ln, err := net.Listen("tcp", net.JoinHostPort(loop, "0"))
	if err != nil {
		t.Skipf("SKIP (no %s on this host): %v", loop, err)
	}
	defer ln.Close()
	go echoEach(ln)
	open := netip.MustParseAddrPort(ln.Addr().String())
	// A port nothing listens on: one just closed.
	l2, err := net.Listen("tcp", net.JoinHostPort(loop, "0"))
	if err != nil {
		t.Fatal(err)
	}
	closed := netip.MustParseAddrPort(l2.Addr().String())
	l2.Close()

	for _, tc := range []struct {
		name string
		to   netip.AddrPort
		ok   bool
	}{
		{"listening", open, true},
		{"refused", closed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dialLoopback(tc.to, 5*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			want, werr := (&net.Dialer{}).DialContext(ctx, "tcp", tc.to.String())
			if want != nil {
				defer want.Close()
			}
			if !tc.ok {
				if err == nil {
					c.Close()
					t.Fatal("dial of a closed port succeeded")
				}
				if werr == nil || err.Error() != werr.Error() {
					t.Errorf("error %q, the default dialer's %v", err, werr)
				}
				if a := classifyDial(err); a != answerReset {
					t.Errorf("classifyDial = %v, want a reset", a)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.RemoteAddr().String(); got != tc.to.String() {
				t.Errorf("remote %s, want %s", got, tc.to)
			}
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 4)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
				t.Fatalf("echo %q, %v", b, err)
			}
			if h, ok := c.(halfCloser); !ok {
				t.Errorf("%T has no CloseWrite: the splice could not pass a half-close on", c)
			} else if err := h.CloseWrite(); err != nil {
				t.Error(err)
			}
			if n, err := c.Read(b); n != 0 || err != io.EOF {
				t.Errorf("after CloseWrite read %d, %v; want EOF", n, err)
			}
		})
	}
}
