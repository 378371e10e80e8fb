package lkl

import "testing"

// TestTCPMem: LKL's TCP memory bound, in pages, is an eighth, three
// sixteenths and a quarter of the kernel's memory; at --net's 128 MiB
// its pressure point (24 MiB) is above one connection's largest send and
// receive buffers together.
func TestTCPMem(t *testing.T) {
	for _, c := range []struct {
		mb   int
		want string
	}{
		{128, "4096 6144 8192\n"},
		{32, "1024 1536 2048\n"},
		{1024, "32768 49152 65536\n"},
	} {
		if got := tcpMem(c.mb); got != c.want {
			t.Errorf("tcpMem(%d) = %q, want %q", c.mb, got, c.want)
		}
	}
	if pressure := 128 << 20 * 3 / 16; pressure <= SendBufferMax+ReceiveBufferMax {
		t.Errorf("at 128 MiB the pressure point %d is not above one connection's buffers (%d)", pressure, SendBufferMax+ReceiveBufferMax)
	}
}
