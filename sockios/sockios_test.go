package sockios

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestLookup: the errno or the structure of commands of each kind.
func TestLookup(t *testing.T) {
	for _, c := range []struct {
		name string
		cmd  uint32
		inet bool
		size int
		out  bool
		en   unix.Errno
	}{
		{"SIOCGIFFLAGS", unix.SIOCGIFFLAGS, false, sizeIfreq, true, 0},
		{"SIOCSIFMTU", unix.SIOCSIFMTU, false, sizeIfreq, false, 0},
		{"SIOCGIFCONF", unix.SIOCGIFCONF, false, SizeIfconf, true, 0},
		{"SIOCGARP on an internet socket", unix.SIOCGARP, true, sizeArpreq, true, 0},
		{"SIOCGARP elsewhere", unix.SIOCGARP, false, 0, false, unix.ENOTTY},
		{"SIOCADDRT not offered", unix.SIOCADDRT, true, 0, false, unix.EOPNOTSUPP},
		{"SIOCETHTOOL not offered", unix.SIOCETHTOOL, true, 0, false, unix.EOPNOTSUPP},
		{"device-private", unix.SIOCDEVPRIVATE + 1, true, 0, false, unix.EOPNOTSUPP},
		{"wireless", 0x8B01, true, 0, false, unix.EOPNOTSUPP},
		{"unknown in range", 0x8960, true, 0, false, unix.ENOTTY},
	} {
		got, en := Lookup(c.cmd, c.inet)
		if en != c.en || got.Size != c.size || got.Out != c.out {
			t.Errorf("%s: %+v %v, want size %d out %v errno %v", c.name, got, en, c.size, c.out, c.en)
		}
	}
	for cmd, in := range map[uint32]bool{0x890A: false, 0x890B: true, 0x89FF: true, 0x8A00: false, 0x8B00: true, 0x8BFF: true, 0x8C00: false} {
		if InRange(cmd) != in {
			t.Errorf("InRange(%#x) = %v", cmd, !in)
		}
	}
}

// TestIfconf: the guest's struct ifconf read, bounded, and written.
func TestIfconf(t *testing.T) {
	ic := make([]byte, SizeIfconf)
	for _, c := range []struct{ len, want int }{{-1, 0}, {0, 0}, {40, 40}, {IfconfMax + 1, IfconfMax}} {
		PutIfconf(ic, c.len, 0x1234)
		if n, buf := ReadIfconf(ic); n != c.want || buf != 0x1234 {
			t.Errorf("ifc_len %d: %d %#x, want %d 0x1234", c.len, n, buf, c.want)
		}
		if IfconfLen(ic) != c.len {
			t.Errorf("IfconfLen = %d, want %d", IfconfLen(ic), c.len)
		}
	}
}
