package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeLog(t *testing.T, n int) (string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(p, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var head string
	for i := 0; i < n; i++ {
		if head, err = l.Append("exec", map[string]any{"path": "/bin/p", "i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return p, head
}

func lines(t *testing.T, p string) [][]byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

func TestVerifyDetectsTampering(t *testing.T) {
	p, head := writeLog(t, 5)
	if s, err := VerifyFile(p, head); err != nil || s.Records != 5 || s.Head != head {
		t.Fatalf("intact log: %+v %v", s, err)
	}
	orig := lines(t, p)
	join := func(ls [][]byte) []byte {
		var out []byte
		for _, l := range ls {
			out = append(out, bytes.TrimSuffix(l, []byte("\n"))...)
			out = append(out, '\n')
		}
		return out
	}
	cp := func() [][]byte { return append([][]byte{}, orig...) }
	cases := []struct {
		name   string
		log    func() [][]byte
		head   string
		want   string // in the error
		wantAt int
	}{
		{"edit", func() [][]byte {
			l := cp()
			l[1] = bytes.Replace(l[1], []byte(`"i":1`), []byte(`"i":7`), 1)
			return l
		}, "", "changed", 3},
		{"insert", func() [][]byte {
			l := cp()
			return append(l[:2:2], append([][]byte{orig[1]}, l[2:]...)...)
		}, "", "seq", 3},
		{"remove", func() [][]byte { l := cp(); return append(l[:2:2], l[3:]...) }, "", "seq", 3},
		{"reorder", func() [][]byte { l := cp(); l[2], l[3] = l[3], l[2]; return l }, "", "seq", 3},
		{"truncate", func() [][]byte { return cp()[:3] }, head, "truncated", 0},
		{"edit last, with head", func() [][]byte {
			l := cp()
			l[4] = bytes.Replace(l[4], []byte(`"i":4`), []byte(`"i":9`), 1)
			return l
		}, head, "truncated", 0},
		{"cut line", func() [][]byte { l := cp(); l[4] = l[4][:10]; return l }, "", "", 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := join(c.log())
			if c.name == "cut line" {
				b = b[:len(b)-1]
			}
			_, err := Verify(bytes.NewReader(b), c.head)
			ve, ok := err.(*VerifyError)
			if !ok {
				t.Fatalf("want a VerifyError, got %v", err)
			}
			if ve.Line != c.wantAt || !strings.Contains(ve.Error(), c.want) {
				t.Fatalf("got %v (line %d), want line %d mentioning %q", ve, ve.Line, c.wantAt, c.want)
			}
		})
	}
}

func TestOpenContinuesChain(t *testing.T) {
	p, _ := writeLog(t, 2)
	l, err := Open(p, "r2")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := Open(p, "r3")
	if err != nil {
		t.Fatal(err)
	}
	// Two runs at once: their records interleave in one chain.
	l.Append("exec", nil)
	l2.Append("exec", nil)
	head, err := l.Append("run_end", nil)
	if err != nil {
		t.Fatal(err)
	}
	head2, _ := l2.Append("run_end", nil)
	l.Close()
	l2.Close()
	s, err := VerifyFile(p, head)
	if err != nil || s.Records != 6 || s.HeadAt != 5 {
		t.Fatalf("%+v %v", s, err)
	}
	s, err = VerifyFile(p, head2)
	if err != nil || s.Records != 6 || s.HeadAt != 6 {
		t.Fatalf("%+v %v", s, err)
	}
	// A head from earlier still verifies: later runs appended.
	if s, err := VerifyFile(p, Hash(lines(t, p)[0][:len(lines(t, p)[0])-1])); err != nil || s.HeadAt != 1 {
		t.Fatalf("earlier head: %+v %v", s, err)
	}
}

// TestSettings: records carry the settings hash they were given, the log
// verifies, and changing a record's hash breaks the chain.
func TestSettings(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(p, "r1")
	if err != nil {
		t.Fatal(err)
	}
	l.Append("run_start", nil)
	l.SetSettings(strings.Repeat("ab", 32))
	l.Append("exec", map[string]any{"i": 1})
	head, _ := l.Append("run_end", nil)
	l.Close()
	ls := lines(t, p)
	if strings.Contains(string(ls[0]), "settings_sha256") {
		t.Errorf("a record before SetSettings has a settings hash: %s", ls[0])
	}
	for _, x := range ls[1:] {
		if !strings.Contains(string(x), `"settings_sha256":"`+strings.Repeat("ab", 32)+`"`) {
			t.Errorf("record without the settings hash: %s", x)
		}
	}
	if _, err := VerifyFile(p, head); err != nil {
		t.Fatalf("verify: %v", err)
	}
	b, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(b, []byte(`"settings_sha256":"abab`), []byte(`"settings_sha256":"cdab`), 1), 0o600)
	if _, err := VerifyFile(p, head); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("a changed settings hash verified: %v", err)
	}
}
