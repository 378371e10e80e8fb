package guestpath

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
