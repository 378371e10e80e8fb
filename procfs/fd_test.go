package procfs

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestIsPidName(t *testing.T) {
	for s, want := range map[string]bool{"1": true, "4242": true, "0": false, "01": false, "+1": false, "-1": false,
		"": false, "1a": false, "12345678901": false, "self": false} {
		if got := IsPidName(s); got != want {
			t.Errorf("IsPidName(%q) = %v", s, got)
		}
	}
	if !isFdName("0") || isFdName("00") {
		t.Error("isFdName")
	}
}

// linkMode: an fd link's permission bits, as Linux gives them.
func TestLinkMode(t *testing.T) {
	for acc, want := range map[int]uint32{unix.O_RDONLY: 0o500, unix.O_WRONLY: 0o300, unix.O_RDWR: 0o700} {
		if got := linkMode(acc); got != want {
			t.Errorf("linkMode(%d) = %#o", acc, got)
		}
	}
}

func TestFdinfoFlags(t *testing.T) {
	got := string(FdinfoFlags([]byte("pos:\t5\nflags:\t02100002\nmnt_id:\t9\n"), 0o2000002))
	if got != "pos:\t5\nflags:\t02000002\nmnt_id:\t9\n" {
		t.Errorf("%q", got)
	}
	if got := string(FdinfoFlags(nil, 0)); !strings.HasPrefix(got, "flags:\t00\n") {
		t.Errorf("%q", got)
	}
}

// AccWithin: a host file outside binds and routes is reopened through its
// fd link only with access the fd has.
func TestAccWithin(t *testing.T) {
	cases := []struct {
		flags, acc int
		want       bool
	}{
		{unix.O_RDONLY, unix.O_RDONLY, true},
		{unix.O_RDONLY, unix.O_WRONLY, false},
		{unix.O_RDONLY, unix.O_RDWR, true},
		{unix.O_WRONLY, unix.O_RDONLY, false},
		{unix.O_WRONLY, unix.O_WRONLY, true},
		{unix.O_RDWR, unix.O_WRONLY, false},
		{unix.O_RDWR, unix.O_RDWR, true},
		{unix.O_RDONLY | unix.O_TRUNC, unix.O_RDONLY, false},
		{unix.O_WRONLY | unix.O_TRUNC, unix.O_WRONLY, true},
		{unix.O_PATH, unix.O_WRONLY, true},
	}
	for _, c := range cases {
		if got := AccWithin(c.flags, c.acc); got != c.want {
			t.Errorf("AccWithin(%#o, %d) = %v", c.flags, c.acc, got)
		}
	}
}
