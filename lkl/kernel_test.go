package lkl

import (
	"slices"
	"strings"
	"testing"
)

func TestParseConfigAndSatisfies(t *testing.T) {
	cfg := ParseConfig([]byte("#\n# comment\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=8\nCONFIG_S=\"x y\"\n# CONFIG_D is not\nnot a line\n"))
	want := map[string]string{"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": "8", "CONFIG_S": "\"x y\""}
	if len(cfg) != len(want) {
		t.Errorf("parsed %v, want %v", cfg, want)
	}
	for k, v := range want {
		if cfg[k] != v {
			t.Errorf("%s = %q, want %q", k, cfg[k], v)
		}
	}
	for _, c := range []struct {
		frag    string
		missing []string
	}{
		{"CONFIG_A=y\n", nil},
		{"# CONFIG_B is not set\n# CONFIG_E is not set\n", nil}, // off, or absent
		{"CONFIG_C=8\n", nil},
		{"CONFIG_C=16\n", []string{"CONFIG_C"}},
		{"# CONFIG_A is not set\n", []string{"CONFIG_A"}},
		{"CONFIG_E=y\nCONFIG_B=y\n", []string{"CONFIG_B", "CONFIG_E"}},
	} {
		got := Satisfies(cfg, ParseConfig([]byte(c.frag)))
		slices.Sort(got)
		if !slices.Equal(got, c.missing) {
			t.Errorf("%q: missing %v, want %v", c.frag, got, c.missing)
		}
	}
}

// TestKboxFragmentCommented: every option of lkl/kbox.config comes right
// after a comment line saying why (docs/lkl.md), and the file turns
// KASAN off and inotify and config.gz on.
func TestKboxFragmentCommented(t *testing.T) {
	lines := strings.Split(string(kboxFragment), "\n")
	n := 0
	for i, l := range lines {
		if len(ParseConfig([]byte(l))) == 0 {
			continue
		}
		n++
		prev := ""
		if i > 0 {
			prev = lines[i-1]
		}
		if !strings.HasPrefix(prev, "# ") || len(ParseConfig([]byte(prev))) != 0 || len(prev) < 20 {
			t.Errorf("line %d %q: no comment line before it saying why (%q)", i+1, l, prev)
		}
	}
	f := KboxFragment()
	if n != len(f) || n < 10 {
		t.Errorf("%d option lines, %d options", n, len(f))
	}
	for k, v := range map[string]string{"CONFIG_KASAN": "n", "CONFIG_INOTIFY_USER": "y", "CONFIG_IKCONFIG_PROC": "y", "CONFIG_DEBUG_INFO_REDUCED": "n", "CONFIG_UNIX": "n"} {
		if f[k] != v {
			t.Errorf("kbox.config: %s=%q, want %q", k, f[k], v)
		}
	}
}
