//go:build linux && amd64 && cgo

package trap

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/seccomp"
	"github.com/kbox-project/kbox/seccomp/supervisor"
	"github.com/kbox-project/kbox/tierpolicy"
)

// Throwaway: dumps the filters both tiers derive from the table, to
// compare before and after the restructuring (POLDUMP names the file).
func TestPolicyDump(t *testing.T) {
	out := os.Getenv("POLDUMP")
	if out == "" {
		t.Skip("POLDUMP unset")
	}
	var b strings.Builder
	sorted := func(l []string) []string {
		c := append([]string(nil), l...)
		sort.Strings(c)
		return c
	}
	dump := func(label string, p *seccomp.Policy) {
		p.Trusted = []seccomp.IPRange{{Lo: 0x1000, Hi: 0x2000}}
		prog, err := p.Assemble()
		if err != nil {
			t.Fatal(err)
		}
		var na []string
		for k, v := range p.NullArg {
			na = append(na, fmt.Sprintf("%s=%d", k, v))
		}
		fmt.Fprintf(&b, "== %s\nDeny %v\nAllow %v\nHostFD %v\nNoSys %v\nNotifyIf %+v\nNullArg %v\nIoctl %v %v\nbase %d deny %d notify %#x dupfd %v\nbpf %d %x\n",
			label, sorted(p.Deny), sorted(p.Allow), sorted(p.HostFD), sorted(p.NoSys), p.NotifyIf, sorted(na),
			p.IoctlNotify, p.IoctlNotifyRanges, p.VirtualFDBase, p.DenyErrno, p.Notify, p.DupfdAlways, len(prog), prog)
	}
	for _, ns := range []supervisor.Namespaces{0, supervisor.NSIPC, supervisor.NSNet | supervisor.NSIPC} {
		for _, net := range []bool{false, true} {
			for _, forks := range []bool{false, true} {
				// As supervisor.Run builds it.
				pol := tierpolicy.Seccomp(1024, ns&supervisor.NSIPC != 0)
				if net {
					tierpolicy.WithNet(pol)
				}
				if forks {
					tierpolicy.NotifyForks(pol)
				}
				dump(fmt.Sprintf("seccomp ns=%d net=%v forks=%v", ns, net, forks), pol)
			}
		}
	}
	for _, net := range []bool{false, true} {
		for _, rw := range []bool{false, true} {
			dump(fmt.Sprintf("trap net=%v rewrite=%v", net, rw), tierpolicy.InProcess(1024, net, rw))
		}
	}
	var tr []string
	for nr, f := range transport {
		if f != nil {
			tr = append(tr, fmt.Sprintf("%d:%s", nr, dispatch.NameOf(nr)))
		}
	}
	fmt.Fprintf(&b, "== transport %d %v\n", len(tr), tr)
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
