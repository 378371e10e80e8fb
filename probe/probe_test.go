package probe

import (
	"net/netip"
	"testing"

	"github.com/kbox-project/kbox/policy"
)

func mustPolicy(t *testing.T, text string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every probe names a capability of the catalog, once each.
func TestCatalogCoversProbes(t *testing.T) {
	caps, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, c := range caps {
		if c.ID == "" || c.Description == "" || known[c.ID] {
			t.Errorf("bad or repeated catalog entry %+v", c)
		}
		known[c.ID] = true
	}
	pl := NewPlan(Env{Port: 1})
	ids := map[string]bool{}
	for _, p := range pl.Probes {
		if !known[p.Capability] {
			t.Errorf("probe %s: capability %q is not in catalog.json", p.ID, p.Capability)
		}
		if ids[p.ID] {
			t.Errorf("probe %s planned twice", p.ID)
		}
		ids[p.ID] = true
	}
}

func expected(pl *Plan, id string) string {
	for _, p := range pl.Probes {
		if p.ID == id {
			return p.Expected
		}
	}
	return "absent"
}

func TestExpected(t *testing.T) {
	strict := mustPolicy(t, `
[paths]
hidden = ["/secret/**", "/etc/shadow"]
read_only = ["/etc"]
read_write = ["/etc/shadow/x"]
[syscalls]
quota = { execve = 3, getcwd = 10 }
[limits]
processes = 4
file_size = "1M"
`)
	allow := func(netip.AddrPort) bool { return true }
	guard := func(d netip.AddrPort) bool { return !d.Addr().IsLoopback() && !d.Addr().IsLinkLocalUnicast() }
	cases := []struct {
		name string
		env  Env
		want map[string]string
		par  map[string]string
	}{
		{"default", Env{}, map[string]string{
			"hidden.open": Skipped, "readonly.create": Skipped, "bind.list": Skipped, "bind.escape": Skipped,
			"proc.root1": Denied, "sys.mount": Allowed, "net.host": Denied, "net.outside": Denied,
			"setuid.host": Denied, "limit.quota": Skipped, "limit.processes": Skipped, "inproc.gadget": Denied,
		}, nil},
		{"in-process tier, opted in", Env{InProcess: "rewrite"}, map[string]string{"inproc.gadget": Allowed, "proc.root1": Denied}, nil},
		{"host root", Env{HostRoot: true}, map[string]string{"setuid.host": Skipped}, nil},
		{"read-only image", Env{ReadOnly: true}, map[string]string{"readonly.create": Denied, "readonly.chmod": Denied},
			map[string]string{"ro": "/"}},
		{"read-only image, bound /", Env{ReadOnly: true, Binds: []Bind{{Guest: "/"}}}, map[string]string{"readonly.create": Skipped}, nil},
		{"binds", Env{Binds: []Bind{{Guest: "/y", ReadOnly: true}, {Guest: "/w"}}}, map[string]string{"bind.list": Allowed, "bind.escape": Denied},
			map[string]string{"bind": "/y", "rwbind": "/w"}},
		{"strict", Env{Policy: strict, Binds: []Bind{{Guest: "/secret/b"}}}, map[string]string{
			"hidden.open": Denied, "hidden.hardlink": Denied, "readonly.write": Denied, "bind.list": Denied,
			"sys.mount": Denied, "limit.processes": Denied, "limit.file_size": Denied, "limit.quota": Denied,
		}, map[string]string{"hidden": "/etc/shadow", "ro": "/etc", "procs": "4", "fsize": "1048576", "quota_n": "10", "quota_errno": "1"}},
		{"net guarded", Env{Net: true, NetDecide: guard, Port: 5}, map[string]string{"net.host": Denied, "net.metadata": Denied, "net.outside": Skipped, "net.loopback": Denied}, nil},
		{"net allow all", Env{Net: true, NetDecide: allow, Port: 5}, map[string]string{"net.host": Allowed, "net.metadata": Skipped}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl := NewPlan(c.env)
			for id, w := range c.want {
				if g := expected(pl, id); g != w {
					t.Errorf("%s: expected %s, want %s", id, g, w)
				}
			}
			for k, w := range c.par {
				if g := pl.Params[k]; g != w {
					t.Errorf("param %s = %q, want %q", k, g, w)
				}
			}
			for _, id := range pl.IDs() {
				if expected(pl, id) == Skipped {
					t.Errorf("skipped probe %s handed to the guest", id)
				}
			}
		})
	}
}

func TestJudge(t *testing.T) {
	pl := &Plan{Probes: []Probe{
		{ID: "a", Expected: Denied}, {ID: "b", Expected: Denied}, {ID: "c", Expected: Allowed},
		{ID: "d", Expected: Allowed}, {ID: "e", Expected: Skipped}, {ID: "f", Expected: Denied}, {ID: "g", Expected: Denied},
	}}
	obs, err := ParseObservations([]byte(`{"id":"a","observed":"denied","errno":"ENOENT"}
{"id":"b","observed":"allowed"}
{"id":"c","observed":"denied","errno":"EROFS"}
{"id":"d","observed":"allowed"}
{"id":"g","observed":"skipped","detail":"no marker given"}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": OK, "b": MorePermissive, "c": MoreRestrictive, "d": OK, "e": NotRun, "f": Lost, "g": NotRun}
	recs := pl.Judge(obs)
	if len(recs) != len(pl.Probes) {
		t.Fatalf("%d records for %d probes", len(recs), len(pl.Probes))
	}
	for _, r := range recs {
		if r.Verdict != want[r.Probe] {
			t.Errorf("%s: verdict %s, want %s", r.Probe, r.Verdict, want[r.Probe])
		}
	}
	bad := Failed(recs)
	if len(bad) != 2 || bad[0].Probe != "b" || bad[1].Probe != "f" {
		t.Errorf("failed: %+v", bad)
	}
	if _, err := ParseObservations([]byte("kbox: something\n")); err == nil {
		t.Error("a line that is not a record was taken")
	}
}
