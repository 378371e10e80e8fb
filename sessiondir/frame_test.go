package sessiondir

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func TestFrames(t *testing.T) {
	for _, c := range []struct {
		name string
		v    any
		raw  []byte
		max  int
		err  string
	}{
		{"json alone", map[string]int{"a": 1}, nil, 100, ""},
		{"with raw bytes", map[string]string{"op": "read"}, []byte{0, 0xff, '\n', 0x80}, 100, ""},
		{"empty raw", struct{}{}, []byte{}, 100, ""},
		{"over the limit", map[string]string{"x": strings.Repeat("y", 50)}, make([]byte, 60), 100, "above the limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := AppendFrame([]byte("prefix"), c.v, c.raw)
			if err != nil || !bytes.HasPrefix(b, []byte("prefix")) {
				t.Fatalf("AppendFrame: %v", err)
			}
			r := bytes.NewReader(b[len("prefix"):])
			var head [HeadLen]byte
			r.Read(head[:])
			body, raw, err := ReadBody(r, head, c.max)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("want %q, got %v", c.err, err)
				}
				return
			}
			if err != nil || body[0] != '{' || !bytes.Equal(raw, c.raw) || r.Len() != 0 {
				t.Fatalf("body %q raw %q err %v, %d left", body, raw, err, r.Len())
			}
		})
	}
	// A frame cut short is an error, not a hang or a short answer.
	b, _ := AppendFrame(nil, map[string]int{"a": 1}, []byte("raw"))
	var head [HeadLen]byte
	copy(head[:], b)
	if _, _, err := ReadBody(bytes.NewReader(b[HeadLen:len(b)-1]), head, 100); err == nil {
		t.Error("a frame cut short was read")
	}
}

// FuzzReadBody: any head and bytes give an answer or an error, within the
// limit.
func FuzzReadBody(f *testing.F) {
	b, _ := AppendFrame(nil, map[string]int{"a": 1}, []byte("raw"))
	f.Add(b)
	f.Add(binary.LittleEndian.AppendUint64(nil, 0xffffffffffffffff))
	f.Fuzz(func(t *testing.T, in []byte) {
		var head [HeadLen]byte
		n := copy(head[:], in)
		body, raw, err := ReadBody(bytes.NewReader(in[n:]), head, 1<<16)
		if err == nil && len(body)+len(raw) > 1<<16 {
			t.Fatalf("%d bytes read past the limit", len(body)+len(raw))
		}
	})
}
