package procfs

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// parseKInt against what Linux's kstrtoint(strstrip(buf), 0) answers
// (checked natively through /proc/self/oom_score_adj, tests/guest/procident.c).
func TestParseKInt(t *testing.T) {
	for _, c := range []struct {
		in string
		v  int
		en unix.Errno
	}{
		{"5", 5, 0}, {"-1000", -1000, 0}, {"1000\n", 1000, 0}, {"  +7 \n", 7, 0}, {"0x10", 16, 0},
		{"0X1f", 31, 0}, {"010", 8, 0}, {"-0", 0, 0}, {"0", 0, 0}, {"5\x0099", 5, 0}, {"\t-3\v", -3, 0},
		{"-2147483648", -2147483648, 0}, {"2147483647", 2147483647, 0},
		{"", 0, unix.EINVAL}, {" ", 0, unix.EINVAL}, {"abc", 0, unix.EINVAL}, {"12x", 0, unix.EINVAL},
		{"0x", 0, unix.EINVAL}, {"08", 0, unix.EINVAL}, {"-+5", 0, unix.EINVAL}, {"+-5", 0, unix.EINVAL},
		{"1\n2", 0, unix.EINVAL}, {"--1", 0, unix.EINVAL}, {"-", 0, unix.EINVAL},
		{"99999999999", 0, unix.ERANGE}, {"2147483648", 0, unix.ERANGE}, {"-2147483649", 0, unix.ERANGE},
		{"0xffffffffffffffffff", 0, unix.ERANGE},
	} {
		v, en := parseKInt([]byte(c.in))
		if v != c.v || en != c.en {
			t.Errorf("parseKInt(%q) = %d, %v; want %d, %v", c.in, v, en, c.v, c.en)
		}
	}
}

// setOOM and oomText follow Linux's oom_score_adj and oom_adj rules: the
// floor a privileged write sets, oom_adj's scaling both ways and its
// compare with the current value.
func TestSetOOM(t *testing.T) {
	id := Ident{}
	steps := []struct {
		v                int
		legacy, priv     bool
		en               unix.Errno
		adj, min         int16
		text, legacyText string
	}{
		{-1000, false, false, unix.EACCES, 0, 0, "0\n", "0\n"},
		{1001, false, true, unix.EINVAL, 0, 0, "0\n", "0\n"},
		{-1000, false, true, 0, -1000, -1000, "-1000\n", "-17\n"},
		{1000, false, true, 0, 1000, 1000, "1000\n", "15\n"},
		{-1, false, false, unix.EACCES, 1000, 1000, "1000\n", "15\n"},
		{8, true, true, 0, 470, 1000, "470\n", "7\n"},       // legacy: the floor stays
		{-16, true, true, 0, -941, 1000, "-941\n", "-15\n"}, // truncated toward 0
		{-17, true, true, 0, -1000, 1000, "-1000\n", "-17\n"},
		{16, true, true, unix.EINVAL, -1000, 1000, "-1000\n", "-17\n"},
		{-18, true, true, unix.EINVAL, -1000, 1000, "-1000\n", "-17\n"},
		{100, false, true, 0, 100, 100, "100\n", "1\n"},
		{200, false, false, 0, 200, 100, "200\n", "3\n"},
		{100, false, false, 0, 100, 100, "100\n", "1\n"},
		{99, false, false, unix.EACCES, 100, 100, "100\n", "1\n"},
		{5, true, false, 0, 294, 100, "294\n", "4\n"},
		{2, true, false, unix.EACCES, 294, 100, "294\n", "4\n"}, // 117 is below the current value
		{117, false, false, 0, 117, 100, "117\n", "1\n"},
		{15, true, false, 0, 1000, 100, "1000\n", "15\n"},
	}
	for i, s := range steps {
		en := id.setOOM(s.v, s.legacy, s.priv)
		if en != s.en || id.OOMAdj != s.adj || id.OOMMin != s.min {
			t.Errorf("step %d: setOOM(%d, legacy %v, privileged %v) = %v, adj %d min %d; want %v, %d %d",
				i, s.v, s.legacy, s.priv, en, id.OOMAdj, id.OOMMin, s.en, s.adj, s.min)
		}
		if got := string(oomText(id.OOMAdj, false)); got != s.text {
			t.Errorf("step %d: oom_score_adj %q, want %q", i, got, s.text)
		}
		if got := string(oomText(id.OOMAdj, true)); got != s.legacyText {
			t.Errorf("step %d: oom_adj %q, want %q", i, got, s.legacyText)
		}
	}
}

// The parent and name of stat and status texts.
func TestRewriteIdent(t *testing.T) {
	stat := "4242 (a (b) c) S 17 4242 99 0 -1 4194560 1 2 3\n"
	if got, want := rewriteStat(stat, "", 0), "4242 (a (b) c) S 0 4242 99 0 -1 4194560 1 2 3\n"; got != want {
		t.Errorf("rewriteStat: %q, want %q", got, want)
	}
	if got, want := rewriteStat(stat, "hello", 0), "4242 (hello) S 0 4242 99 0 -1 4194560 1 2 3\n"; got != want {
		t.Errorf("rewriteStat with a name: %q, want %q", got, want)
	}
	if c, found := statComm(stat); !found || c != "a (b) c" {
		t.Errorf("statComm: %q %v", c, found)
	}
	status := "Name:\tkbox\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4242\nPPid:\t17\nTracerPid:\t0\n"
	want := "Name:\thello\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4242\nPPid:\t0\nTracerPid:\t0\n"
	if got := rewriteStatus(status, "hello", 0, nil); got != want {
		t.Errorf("rewriteStatus: %q, want %q", got, want)
	}
	caps := "Name:\tkbox\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n" +
		"CapBnd:\t000001fffeffffff\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n"
	c := Creds{Inh: 0x6, Perm: 0x7, Eff: 0x3, Bnd: 0xff, Amb: 0x2}
	want = "Name:\tkbox\nCapInh:\t0000000000000006\nCapPrm:\t0000000000000007\nCapEff:\t0000000000000003\n" +
		"CapBnd:\t00000000000000ff\nCapAmb:\t0000000000000002\nNoNewPrivs:\t0\nSeccomp:\t2\n"
	if got := rewriteStatus(caps, "", 7, &c); got != want {
		t.Errorf("rewriteStatus with credentials: %q, want %q", got, want)
	}
	c.NoNewPrivs = true
	if got := rewriteStatus(caps, "", 7, &c); !strings.Contains(got, "NoNewPrivs:\t1\n") {
		t.Errorf("rewriteStatus with no_new_privs: %q", got)
	}
	// The ids: the host's are kbox's.
	ids := "Umask:\t0022\nUid:\t1001\t1001\t1001\t1001\nGid:\t1001\t1001\t1001\t1001\nFDSize:\t64\nGroups:\t1001 \nNStgid:\t9\n"
	for _, tc := range []struct {
		c    Creds
		want string
	}{
		{Creds{UID: 1000, EUID: 1001, SUID: 1002, FSUID: 1001, GID: 5, EGID: 6, SGID: 7, FSGID: 8, Groups: []uint32{5, 27}},
			"Umask:\t0022\nUid:\t1000\t1001\t1002\t1001\nGid:\t5\t6\t7\t8\nFDSize:\t64\nGroups:\t5 27 \nNStgid:\t9\n"},
		{Creds{}, "Umask:\t0022\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nFDSize:\t64\nGroups:\t \nNStgid:\t9\n"},
	} {
		if got := rewriteStatus(ids, "", 7, &tc.c); got != tc.want {
			t.Errorf("rewriteStatus of ids %+v: %q, want %q", tc.c, got, tc.want)
		}
	}
	if n, found := statusLine(status, "Name"); !found || n != "kbox" {
		t.Errorf("statusLine: %q %v", n, found)
	}
}
