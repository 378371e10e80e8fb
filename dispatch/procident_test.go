package dispatch

import "testing"

// mayWrite is the kernel's permission check for writing.
func TestMayWrite(t *testing.T) {
	nobody := UserCred(65534, 65534, []uint32{100})
	root := RootCred()
	for _, c := range []struct {
		c             Cred
		uid, gid, mod uint32
		want          bool
	}{
		{nobody, 65534, 65534, 0o644, true},
		{nobody, 65534, 65534, 0o444, false},
		{nobody, 0, 0, 0o644, false},
		{nobody, 0, 100, 0o664, true}, // a supplementary group
		{nobody, 0, 0, 0o666, true},
		{root, 1000, 1000, 0o444, true}, // CAP_DAC_OVERRIDE
	} {
		if got := c.c.mayWrite(c.uid, c.gid, c.mod); got != c.want {
			t.Errorf("%d may write %d:%d %o: %v, want %v", c.c.FSUID, c.uid, c.gid, c.mod, got, c.want)
		}
	}
}
