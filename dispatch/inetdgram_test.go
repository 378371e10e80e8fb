package dispatch

import (
	"hash/maphash"
	"testing"
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
		s := &inetSock{unwritten: c.unwritten}
		for _, q := range c.queue {
			s.srcs = append(s.srcs, src(q))
		}
		g := src(c.got)
		if i := s.locate(g.n, g.sum, c.inq, c.peek); i != c.want {
			t.Errorf("%s: locate = %d, want %d", c.name, i, c.want)
		}
	}
}
