package inet

import (
	"encoding/binary"
	"hash/maphash"
	"testing"

	"github.com/kbox-project/kbox/sysabi"
)

// TestLocateDatagram: which queued source belongs to the datagram kbox
// just received, given the bytes left in the guest's end.
func TestLocateDatagram(t *testing.T) {
	src := func(text string) dgramSrc {
		return dgramSrc{addr: []byte(text), n: len(text), sum: maphash.String(dgramSeed, text)}
	}
	for _, c := range []struct {
		name      string
		queue     []string
		unwritten int
		got       string // the datagram received
		inq       int    // bytes left after it (-1: unknown)
		peek      bool
		want      int
	}{
		{"head, nothing read natively", []string{"aa", "bbb"}, 0, "aa", 3, false, 0},
		{"after a native read", []string{"aa", "bbb", "c"}, 0, "bbb", 1, false, 1},
		{"same bytes, the second", []string{"same", "same", "same"}, 0, "same", 4, false, 1},
		{"same bytes, none left", []string{"same", "same"}, 0, "same", 0, false, 1},
		{"peek after a native read", []string{"aa", "bbb", "c"}, 0, "bbb", 4, true, 1},
		{"an unwritten entry is not in the pair", []string{"aa", "bbb", "dd"}, 1, "aa", 3, false, 0},
		{"another process read meanwhile", []string{"aa", "bbb", "c", "dd"}, 0, "bbb", 2, false, 1},
		{"empty datagrams in order", []string{"", ""}, 0, "", 0, false, 0},
		{"count unknown: the first match", []string{"aa", "bbb", "bbb"}, 0, "bbb", -1, false, 1},
		{"no match", []string{"aa"}, 0, "zz", 0, false, -1},
	} {
		s := &Sock{unwritten: c.unwritten}
		for _, q := range c.queue {
			s.srcs = append(s.srcs, src(q))
		}
		g := src(c.got)
		if i := s.locate(g.n, g.sum, c.inq, c.peek); i != c.want {
			t.Errorf("%s: locate = %d, want %d", c.name, i, c.want)
		}
	}
}

// TestControls: control messages copied into the guest's buffer as
// Linux's put_cmsg does: whole messages, a cut last one, MSG_CTRUNC.
func TestControls(t *testing.T) {
	msg := func(typ int32, data int) []byte {
		b := make([]byte, sysabi.CmsgAlign(sysabi.CmsgHdr+data))
		binary.NativeEndian.PutUint64(b, uint64(sysabi.CmsgHdr+data))
		binary.NativeEndian.PutUint32(b[8:], 0)
		binary.NativeEndian.PutUint32(b[12:], uint32(typ))
		return b
	}
	two := append(msg(1, 16), msg(2, 4)...) // 32 + 24 bytes
	for _, c := range []struct {
		name       string
		ctrl       []byte
		control    uint64
		room       uint64
		wantLen    int
		wantTrunc  bool
		wantCutLen uint64 // the last message's cmsg_len, if cut
	}{
		{"nothing kept", nil, 0x1000, 64, 0, false, 0},
		{"no buffer", two, 0, 0, 0, true, 0},
		{"shorter than a header", two, 0x1000, 8, 0, true, 0},
		{"room for all", two, 0x1000, 64, 56, false, 0},
		{"exactly all but padding", two, 0x1000, 52, 52, false, 0},
		{"room for one", two, 0x1000, 32, 32, true, 0},
		{"one and a cut header", two, 0x1000, 40, 32, true, 0},
		{"one and a cut message", two, 0x1000, 50, 50, true, 18},
	} {
		var wrote []byte
		write := func(at uint64, b []byte) error { wrote = append([]byte(nil), b...); return nil }
		m := &recvMsgs{}
		sp := &recvSpec{control: c.control, controllen: c.room}
		n, trunc := m.controls(sp, c.ctrl, write)
		if n != c.wantLen || trunc != c.wantTrunc {
			t.Errorf("%s: controls = %d, %v; want %d, %v", c.name, n, trunc, c.wantLen, c.wantTrunc)
			continue
		}
		if n > 0 && len(wrote) != n {
			t.Errorf("%s: wrote %d bytes, reported %d", c.name, len(wrote), n)
		}
		if c.wantCutLen != 0 {
			if got := binary.NativeEndian.Uint64(wrote[32:]); got != c.wantCutLen {
				t.Errorf("%s: cut message's length %d, want %d", c.name, got, c.wantCutLen)
			}
		}
	}
}
