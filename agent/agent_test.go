package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestHeadTail(t *testing.T) {
	cases := []struct {
		name   string
		max    int
		writes []string
		want   string
		cut    bool
	}{
		{"fits", 10, []string{"abc", "def"}, "abcdef", false},
		{"exactly", 6, []string{"abcdef"}, "abcdef", false},
		{"cut in one write", 6, []string{"abcdefghij"}, "abc\n[... kbox: 4 bytes cut ...]\nhij", true},
		{"cut over many writes", 6, []string{"ab", "cd", "ef", "gh", "ij"}, "abc\n[... kbox: 4 bytes cut ...]\nhij", true},
		{"tail ring wraps", 4, []string{"a", "b", "c", "d", "e", "f", "g"}, "ab\n[... kbox: 3 bytes cut ...]\nfg", true},
		{"odd max", 5, []string{"0123456789"}, "012\n[... kbox: 5 bytes cut ...]\n89", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHeadTail(c.max)
			var total int64
			for _, w := range c.writes {
				n, err := h.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write: %d %v", n, err)
				}
				total += int64(len(w))
			}
			if got := h.String(); got != c.want || h.cut() != c.cut || h.total != total {
				t.Fatalf("got %q cut %v total %d, want %q cut %v", got, h.cut(), h.total, c.want, c.cut)
			}
		})
	}
}

// The tools' argument checks, before any kbox runs (Kbox names nothing):
// over the SDK's in-memory transport.
func TestToolArguments(t *testing.T) {
	s, err := New(Config{Kbox: "/nonexistent/kbox", Image: "/nonexistent.ext4", TmpDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run", map[string]any{}, "give argv"},
		{"run", map[string]any{"argv": []string{""}}, "argv[0] is empty"},
		{"run", map[string]any{"argv": 5}, "argv"},
		{"run", map[string]any{"argv": []string{"x"}, "command": "x"}, "not both"},
		{"run", map[string]any{"argv": []string{"x"}, "timeout_ms": -1}, "timeout_ms"},
		{"run", map[string]any{"argv": []string{"x"}, "timeout_ms": 1 << 40}, "above the limit"},
		{"run", map[string]any{"argv": []string{"x"}, "max_output_bytes": 1 << 30}, "above the limit"},
		{"run", map[string]any{"argv": []string{"x"}, "workdir": "tmp"}, "absolute"},
		{"run", map[string]any{"argv": []string{"x"}, "image": "a", "session": "b"}, "not both"},
		{"run", map[string]any{"argv": []string{"x"}, "session": "b"}, "no session"},
		{"run", map[string]any{"argv": []string{"x"}}, "/nonexistent.ext4"},
		{"run", map[string]any{"argv": []string{"x"}, "unknown": 1}, "unknown"},
		{"run", map[string]any{"argv": []string{"x"}, "stdin": "a", "stdin_base64": "YQ=="}, "not both"},
		{"run", map[string]any{"argv": []string{"x"}, "stdin_base64": "!"}, "not base64"},
		{"session_open", map[string]any{"image": "/no/such"}, "no --images directory"},
		{"run", map[string]any{"argv": []string{"x"}, "net": true}, "no network"},
		{"run", map[string]any{"argv": []string{"x"}, "policy": "/etc/kbox/policy.toml"}, "a host path is refused"},
		{"run", map[string]any{"argv": []string{"x"}, "policy": "[network]\nallow = [\"127.0.0.1\"]\n"}, "network.allow"},
		{"run", map[string]any{"argv": []string{"x"}, "policy": "[paths]\nhiden = []\n"}, "unknown key paths.hiden"},
		{"session_close", map[string]any{"session": "x", "snapshot": "/tmp/x"}, "saves no snapshots"},
		{"session_close", map[string]any{"session": "x"}, "no session"},
		{"read_file", map[string]any{"session": "x", "path": "/a", "offset": -1}, "negative"},
		{"read_file", map[string]any{"session": "x", "path": "/a", "unknown": 1}, "unknown"},
		{"read_file", map[string]any{"session": "x", "path": 5}, "path"},
		{"read_file", map[string]any{"path": "/a"}, "session"},
		{"read_file", map[string]any{"session": "x", "path": "/a"}, "no session"},
		{"write_file", map[string]any{"session": "x", "path": "/a", "content": "a", "content_base64": "YQ=="}, "not both"},
		{"write_file", map[string]any{"session": "x", "path": "/a", "content_base64": "!!"}, "not base64"},
		{"write_file", map[string]any{"session": "x", "path": "/a", "mode": "999"}, "octal"},
		{"snapshot", map[string]any{}, "no run yet"},
		{"enosys", map[string]any{"session": "x"}, "no session"},
	}
	for _, c := range cases {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Errorf("%s %v: protocol error %v", c.tool, c.args, err)
			continue
		}
		var text strings.Builder
		for _, ct := range res.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if !res.IsError || !strings.Contains(text.String(), c.want) {
			t.Errorf("%s %v: isError %v %q, want an error with %q", c.tool, c.args, res.IsError, text.String(), c.want)
		}
	}
}
