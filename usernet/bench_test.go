package usernet

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// BenchmarkGuestConns: the floor the user-mode network puts under
// BenchmarkNet's net_conns and net_rtt rows (tests/net_bench_test.go).
// A gVisor stack plays the guest (guestStack: frames in memory, no LKL)
// and runs inet's workloads through the Network to an echo server on the
// host's 127.0.0.1: connections one after another, each echoing a byte,
// then 64-byte round trips on one connection; and the same natively to
// the same server, in the same run. Both TCP ends on the network's side
// are gVisor's here, as both are LKL's in tests' BenchmarkNetLKLFloor.
func BenchmarkGuestConns(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go echoEach(ln) // Go sets TCP_NODELAY, as inet does
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	r, err := ParseRule(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String())
	if err != nil {
		b.Fatal(err)
	}
	s, _ := guestStack(b, Config{Policy: Policy{Allow: []Rule{r}}})
	dst := tcpip.FullAddress{NIC: 1, Addr: addr4(GatewayIP), Port: port}
	guest := func() (net.Conn, error) {
		return gonet.DialContextTCP(context.Background(), s, dst, ipv4.ProtocolNumber)
	}
	native := func() (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) }
	const conns, rounds = 1000, 2000
	for _, side := range []struct {
		name string
		dial func() (net.Conn, error)
	}{{"native", native}, {"usernet", guest}, {"native", native}, {"usernet", guest}} {
		buf := make([]byte, 64)
		t0 := time.Now()
		for i := 0; i < conns; i++ {
			c, err := side.dial()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Write(buf[:1]); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf[:1]); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
		cps := conns / time.Since(t0).Seconds()
		c, err := side.dial()
		if err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		for i := 0; i < rounds; i++ {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
		rtt := float64(time.Since(t0).Microseconds()) / rounds
		c.Close()
		b.Logf("%-8s conns %7.1f /s   rtt %6.1f us", side.name, cps, rtt)
		b.ReportMetric(cps, side.name+"_conns_per_s")
		b.ReportMetric(rtt, side.name+"_rtt_us")
	}
	b.ReportMetric(0, "ns/op")
}
