//go:build linux && amd64 && cgo

package trap

import (
	"testing"

	"github.com/kbox-project/kbox/dispatch"
)

// TestTransportFollowsTable: the tier answers itself (transport.go)
// exactly the syscalls whose table entry says so (InProc.Own), and every
// other reaches the engine.
func TestTransportFollowsTable(t *testing.T) {
	for nr := 0; nr < dispatch.MaxNr; nr++ {
		s := dispatch.Lookup(nr)
		has := nr < len(transport) && transport[nr] != nil
		if has != s.InProc.Own() {
			t.Errorf("%d (%s, InProc %d): transport.go answers it: %v", nr, s.Name, s.InProc, has)
		}
	}
	if len(transport) > dispatch.MaxNr {
		t.Errorf("transport has %d numbers, the table %d", len(transport), dispatch.MaxNr)
	}
}
