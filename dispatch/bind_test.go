package dispatch

import (
	"strings"
	"testing"
)

func TestCheckBindGuests(t *testing.T) {
	routes := []string{"/proc", "/sys", "/dev"}
	cases := []struct {
		guests []string
		want   string
	}{
		{[]string{"/mnt/a", "/data", "/devices", "/mnt/ab"}, ""},
		{[]string{"/"}, "may not be /"},
		{[]string{"//"}, "may not be /"},
		{[]string{"rel"}, "absolute"},
		{[]string{"/dev"}, "/dev host route"},
		{[]string{"/proc/x/"}, "/proc host route"},
		{[]string{"/mnt/a", "/mnt/a/b"}, "overlaps bind /mnt/a"},
		{[]string{"/mnt/a/b", "/mnt/a/"}, "overlaps bind /mnt/a/b"},
	}
	for _, c := range cases {
		err := CheckBindGuests(c.guests, routes)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.guests, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want %q", c.guests, err, c.want)
		}
	}
}

func TestBindPaths(t *testing.T) {
	e := New(Options{Binds: []*Bind{{Host: "/srv/h", Guest: "/mnt/data"}, {Host: "/", Guest: "/host", ReadOnly: true}}})
	if !e.anyRO {
		t.Error("anyRO not set")
	}
	for _, c := range []struct{ p, rel string }{{"/mnt/data", "."}, {"/mnt/data/a/b", "a/b"}, {"/host/etc", "etc"}} {
		b := e.bindOf(c.p)
		if b == nil {
			t.Fatalf("%s: no bind", c.p)
		}
		if tg := bindTarget(b, c.p); !tg.Host || tg.Rel != c.rel || tg.Bind != b {
			t.Errorf("%s: %+v", c.p, tg)
		}
	}
	for _, p := range []string{"/mnt/database", "/mnt", "/hostile"} {
		if e.bindOf(p) != nil {
			t.Errorf("%s is not in a bind", p)
		}
	}
	for _, c := range []struct{ host, guest string }{{"/srv/h", "/mnt/data"}, {"/srv/h/x", "/mnt/data/x"}, {"/etc/x", "/host/etc/x"}} {
		if g, ok := e.bindGuestPath(c.host); !ok || g != c.guest {
			t.Errorf("bindGuestPath(%s) = %s, %v; want %s", c.host, g, ok, c.guest)
		}
	}
}
