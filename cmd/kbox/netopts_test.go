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
	if len(o.NetAllowHost) != 1 || o.NetAllowHost[0] != (usernet.HostRule{Name: "api.example.com", Port: 443}) || !o.NetDenyAll {
		t.Errorf("policy: %+v deny-all %v", o.NetAllowHost, o.NetDenyAll)
	}
	os.WriteFile(pf, []byte("[network]\nallow_hosts = [\"bad name\"]\n"), 0o644)
	if _, err := ParseImageArgs([]string{"--net", "--policy", pf, "-S", "img", "--", "/bin/true"}); err == nil || !strings.Contains(err.Error(), "allow_hosts") {
		t.Errorf("bad allow_hosts: %v", err)
	}
}
