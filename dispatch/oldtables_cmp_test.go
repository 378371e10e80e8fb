package dispatch

import (
	"reflect"
	"testing"

	"github.com/kbox-project/kbox/seccomp"
)

// Throwaway: the neutral table, numbered for each arch, is the old
// per-arch table entry for entry.
func TestNeutralTableEqualsOld(t *testing.T) {
	for _, c := range []struct {
		a   *seccomp.Arch
		old map[int]Syscall
	}{{seccomp.ArchX86_64, oldAMD64}, {seccomp.ArchAArch64, oldARM64}} {
		got, missing := numbered(c.a)
		if len(missing) > 0 {
			t.Errorf("%s: missing %v", c.a.Name, missing)
		}
		n := 0
		for nr := 0; nr < MaxNr; nr++ {
			o, g := c.old[nr], got[nr]
			if o.How != Unknown {
				n++
			}
			if o.Name != g.Name || o.Fam != g.Fam || o.How != g.How || o.Errno != g.Errno || o.Facts != g.Facts || o.Why != g.Why ||
				reflect.ValueOf(o.Fn).Pointer() != reflect.ValueOf(g.Fn).Pointer() {
				t.Errorf("%s %d: old %+v, new %+v", c.a.Name, nr, o, g)
			}
		}
		t.Logf("%s: %d entries equal", c.a.Name, n)
	}
}
