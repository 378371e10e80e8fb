package procfs

import (
	"os"
	"testing"
)

func TestParseHostStat(t *testing.T) {
	// Fields 3 on after a command; the caller's part of each line.
	const tail = " S 1 4242 4242 0 -1 4194560 100 0 0 0 17 5 3 2 20 0 1 0 12345 1000 100 18446744073709551615\n"
	want := PidStat{State: 'S', Ppid: 1, Pgrp: 4242, Start: 12345}
	for _, tc := range []struct {
		name string
		in   string
		want PidStat
		ok   bool
	}{
		{"plain", "4242 (sh)" + tail, want, true},
		{"spaces", "4242 (a b)" + tail, want, true},
		{"hostile", "4242 (a) b (c)" + tail, want, true},
		{"hostile unclosed", "4242 (a) b (c" + tail, PidStat{}, false}, // the last ')' is the command's
		{"fake fields", "4242 (x) Z 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 99 )" + tail, want, true},
		{"zombie", "7 (z) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0 0\n", PidStat{State: 'Z', Ppid: 1, Pgrp: 7, Start: 99}, true},
		{"empty", "", PidStat{}, false},
		{"no paren", "4242 sh S 1 2 3", PidStat{}, false},
		{"unclosed", "4242 (sh", PidStat{}, false},
		{"short", "4242 (sh) S 1 4242", PidStat{}, false},
		{"19 fields", "4242 (sh) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18", PidStat{}, false},
		{"bad ppid", "4242 (sh) S x 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0\n", PidStat{}, false},
		{"bad pgrp", "4242 (sh) S 1 y 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0\n", PidStat{}, false},
		{"bad start", "4242 (sh) S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5 0\n", PidStat{}, false},
		{"long state", "4242 (sh) SS 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0\n", PidStat{}, false},
		{"garbage", "\x00\xff)(\n))", PidStat{}, false},
	} {
		got, ok := parsePidStat(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: parsePidStat(%q) = %+v, %v; want %+v, %v", tc.name, tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestHostStatSelf(t *testing.T) {
	// The state is the thread group leader's, which may sleep while
	// another thread reads.
	st, ok := ReadPidStat(os.Getpid())
	if !ok || (st.State != 'R' && st.State != 'S') || st.Ppid != os.Getppid() || st.Pgrp <= 0 || st.Start == 0 {
		t.Errorf("ReadPidStat(self) = %+v, %v", st, ok)
	}
	if _, ok := ReadPidStat(-1); ok {
		t.Error("ReadPidStat(-1) found a process")
	}
}
