//go:build lkl

package tests

import (
	"crypto/md5"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var netCounters = regexp.MustCompile(`device \{TxFrames:(\d+) TxDrops:(\d+) RxFrames:(\d+) RxDrops:(\d+)\}`)

// TestNetLargeFrames: the virtual link carries large frames both ways.
// The guest's eth0 has the link's MTU (65280); 16 MB sent by the guest
// and 4 MB fetched by it arrive whole, in far fewer frames than an MTU
// of 1500 needs (about 11,000 and 2,800), as the device's counters
// (KBOX_NET_LOG) show. LKL's TCP may grow a socket's send and receive
// buffers to 8 MiB (net.ipv4.tcp_wmem and tcp_rmem, lkl.SendBufferMax,
// ReceiveBufferMax): at 64 KiB a segment, the kernel's 1 MB default
// stalls a bulk transfer. Its global TCP memory bound (net.ipv4.tcp_mem,
// in pages) grows with them: 16, 24 and 32 MiB at 128 MiB (lkl.tcpMem).
func TestNetLargeFrames(t *testing.T) {
	t.Setenv("KBOX_NET_LOG", "1")
	sink := strconv.Itoa(sinkServer(t))
	web, _ := httpServer(t, "")
	p := strconv.Itoa(web)
	const fetch = 4 << 20
	sum := md5.Sum(pattern(fetch))
	script := "cat /sys/class/net/eth0/mtu /proc/sys/net/ipv4/tcp_wmem /proc/sys/net/ipv4/tcp_rmem /proc/sys/net/ipv4/tcp_mem; /opt/tests/inet bulk 10.0.2.2 " + sink + " 16; " +
		"wget -qO- http://10.0.2.2:" + p + "/" + strconv.Itoa(fetch) + " | md5sum"
	out, errOut, status := runKbox(t, append(netArgs(t, "--net-allow", "127.0.0.1:"+sink, "--net-allow", "127.0.0.1:"+p, "--"),
		"/bin/sh", "-c", script)...)
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, out, errOut)
	}
	for _, want := range []string{"65280\n", "4096\t16384\t8388608\n", "4096\t131072\t8388608\n", "4096\t6144\t8192\n", "sink counted 16777216", hex.EncodeToString(sum[:])} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	m := netCounters.FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no device counters on stderr:\n%s", errOut)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	txFrames, txDrops, rxFrames, rxDrops := n(1), n(2), n(3), n(4)
	t.Logf("device: %d frames from the guest (%d dropped), %d to it (%d dropped)", txFrames, txDrops, rxFrames, rxDrops)
	// From the guest: 16 MB of data plus the ACKs of the 4 MB fetch.
	if txFrames > 3000 {
		t.Errorf("%d frames from the guest for 16 MB: the frames are small", txFrames)
	}
	// To the guest: 4 MB of data plus the ACKs of the 16 MB.
	if rxFrames > 2000 {
		t.Errorf("%d frames to the guest: the frames are small", rxFrames)
	}
	if txDrops != 0 || rxDrops != 0 {
		t.Errorf("device dropped frames: %d from the guest, %d to it", txDrops, rxDrops)
	}
	// The liblkl kbox is tested with has what direct delivery needs
	// (lkl/netdev.c): without it, frames wake LKL's poll thread.
	if !strings.Contains(errOut, "(direct delivery: true)") {
		t.Errorf("frames for LKL are not delivered directly:\n%s", lastLines(errOut, 3))
	}
}
