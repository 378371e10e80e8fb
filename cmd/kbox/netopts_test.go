package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbox-project/kbox/usernet"
)

// TestNetAllowHostOption: --net-allow-host NAME[:PORT] is parsed (a bad
// one is a usage error), and a policy's network.allow_hosts adds to it.
func TestNetAllowHostOption(t *testing.T) {
	o, err := ParseImageArgs([]string{"--net", "--net-allow-host", "svc.test:8000", "--net-allow-host", "Other.Test", "-S", "img", "--", "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	want := []usernet.HostRule{{Name: "svc.test", Port: 8000}, {Name: "other.test"}}
	if len(o.NetAllowHost) != 2 || o.NetAllowHost[0] != want[0] || o.NetAllowHost[1] != want[1] {
		t.Errorf("NetAllowHost %+v", o.NetAllowHost)
	}
	for _, bad := range []string{"svc.test:0", "", "a/b", "svc:http"} {
		if _, err := ParseImageArgs([]string{"--net", "--net-allow-host", bad, "-S", "img", "--", "/bin/true"}); err == nil {
			t.Errorf("--net-allow-host %q accepted", bad)
		}
	}
	if _, err := addNetDev(&ImageOptions{NetAllowHost: want}); err == nil || !strings.Contains(err.Error(), "--net-allow-host") {
		t.Errorf("without --net: %v", err)
	}
	pf := filepath.Join(t.TempDir(), "p.toml")
	os.WriteFile(pf, []byte("[network]\nallow_hosts = [\"api.example.com:443\"]\ndeny_all = true\n"), 0o644)
	o, err = ParseImageArgs([]string{"--net", "--policy", pf, "-S", "img", "--", "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	pol, hosts := egress(o)
	if len(hosts) != 1 || hosts[0] != (usernet.HostRule{Name: "api.example.com", Port: 443}) || !pol.DenyAll {
		t.Errorf("policy: %+v deny-all %v", hosts, pol.DenyAll)
	}
	// Without --net the policy's rules have no network to apply to: no
	// error, unlike the same flags on the command line.
	o, err = ParseImageArgs([]string{"--policy", pf, "-S", "img", "--", "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := addNetDev(o); err != nil {
		t.Errorf("a policy's network rules without --net: %v", err)
	}
	os.WriteFile(pf, []byte("[network]\nallow_hosts = [\"bad name\"]\n"), 0o644)
	if _, err := ParseImageArgs([]string{"--net", "--policy", pf, "-S", "img", "--", "/bin/true"}); err == nil || !strings.Contains(err.Error(), "allow_hosts") {
		t.Errorf("bad allow_hosts: %v", err)
	}
}

// TestRepeatedPolicy: a later --policy adds restrictions to an earlier
// one and removes none; one that would widen the network is refused.
func TestRepeatedPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	op := write("op.toml", "[paths]\nhidden = [\"/secret\"]\n[network]\nallow = [\"127.0.0.1:8000\"]\n[limits]\nwall_time = \"1m\"\n")
	more := write("more.toml", "[paths]\nread_write = [\"/secret\"]\nhidden = [\"/etc/shadow\"]\n[network]\ndeny_all = true\n[limits]\nwall_time = \"10s\"\n")
	o, err := ParseImageArgs([]string{"--net", "--policy", op, "--policy", more, "-S", "img", "--", "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	p := o.Agent.Policy.P
	if c, _ := p.Classify("/secret/x"); c.String() != "hidden" {
		t.Errorf("/secret/x: %v", c)
	}
	if c, _ := p.Classify("/etc/shadow"); c.String() != "hidden" {
		t.Errorf("/etc/shadow: %v", c)
	}
	pol, _ := egress(o)
	if len(pol.Allow) != 1 || !pol.DenyAll || o.Agent.Timeout.String() != "10s" || len(p.Sources) != 2 {
		t.Errorf("allow %v deny-all %v timeout %v sources %v", pol.Allow, pol.DenyAll, o.Agent.Timeout, p.Sources)
	}
	widen := write("widen.toml", "[network]\nallow = [\"127.0.0.1\"]\n")
	if _, err := ParseImageArgs([]string{"--net", "--policy", op, "--policy", widen, "-S", "img", "--", "/bin/true"}); err == nil || !strings.Contains(err.Error(), "network.allow") {
		t.Errorf("a later policy that widens the network: %v", err)
	}
}
