package usernet

import (
	"bytes"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// frameThroughIPv4Headers builds a packet of a frame of size bytes made
// by mk, takes its headers as gVisor's IPv4 endpoint does (a view of the
// network header held while the header is read again), and reports
// whether the payload's last byte still lies in the frame's own memory,
// and whether the packet's bytes are the frame's.
func frameThroughIPv4Headers(t *testing.T, size int, mk func(*buffer.View) buffer.Buffer) (inPlace, same bool) {
	t.Helper()
	v := buffer.NewViewSize(maxFrame)
	v.CapLength(size)
	want := v.AsSlice()
	for i := range want {
		want[i] = byte(i * 7)
	}
	want = append([]byte(nil), want...)
	last := &v.AsSlice()[size-1]
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: mk(v)})
	defer pkt.DecRef()
	if _, ok := pkt.LinkHeader().Consume(header.EthernetMinimumSize); !ok {
		t.Fatal("link header")
	}
	if _, ok := pkt.NetworkHeader().Consume(header.IPv4MinimumSize); !ok {
		t.Fatal("network header")
	}
	held := pkt.NetworkHeader().View()
	_ = pkt.NetworkHeader().Slice()
	held.Release()
	s := pkt.AsSlices()
	tail := s[len(s)-1]
	var got []byte
	for _, b := range s {
		got = append(got, b...)
	}
	return &tail[len(tail)-1] == last, bytes.Equal(got, want)
}

// TestSplitHeaders: a large frame from the guest keeps its payload in
// the chunk it was read into when gVisor takes its headers (no copy of
// 64 KiB per frame), and its bytes are unchanged.
func TestSplitHeaders(t *testing.T) {
	for _, size := range []int{smallFrame + 1, 1500 * 10, maxFrame - 242, maxFrame} {
		inPlace, same := frameThroughIPv4Headers(t, size, splitHeaders)
		if !same {
			t.Errorf("%d bytes: the packet's bytes differ from the frame's", size)
		}
		if !inPlace {
			t.Errorf("%d bytes: the payload was copied out of the frame's chunk", size)
		}
	}
	// What splitHeaders avoids: the frame in one chunk is copied whole.
	if inPlace, same := frameThroughIPv4Headers(t, maxFrame, func(v *buffer.View) buffer.Buffer { return buffer.MakeWithView(v) }); !same || inPlace {
		t.Logf("one chunk: payload in place %v (gVisor no longer copies a shared chunk?), bytes same %v", inPlace, same)
	}
}
