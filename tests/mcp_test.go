//go:build lkl

package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP server (kbox mcp, docs/agents.md), driven through the official
// SDK's client against the real binary: its command transport (stdio)
// and streamable HTTP on 127.0.0.1.

// mcpSession starts `kbox mcp --image IMG` and connects to it.
func mcpSession(t *testing.T, img string, extra ...string) *mcp.ClientSession {
	t.Helper()
	return mcpServer(t, append([]string{"--image", img}, extra...)...)
}

// mcpServer starts `kbox mcp ARGS...` and connects to it.
func mcpServer(t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(kboxBin(t), append([]string{"mcp"}, args...)...)
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "kbox-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to kbox mcp: %v (a kbox without the mcp command fails here)", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and decodes its structured result into out; it
// returns the result for isError and text checks.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if out != nil && !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type runResult struct {
	ExitCode     int    `json:"exit_code"`
	Signal       string `json:"signal"`
	TimedOut     bool   `json:"timed_out"`
	Stdout       string `json:"stdout"`
	Stderr       string `json:"stderr"`
	Truncated    bool   `json:"truncated"`
	StdoutLen    int64  `json:"stdout_bytes"`
	StdoutBase64 string `json:"stdout_base64"`
	DurationMs   int64  `json:"duration_ms"`
	Tier         string `json:"tier"`
	Telemetry    *struct {
		Syscalls uint64                       `json:"syscalls"`
		ByFamily map[string]map[string]uint64 `json:"by_family"`
		Policy   map[string]uint64            `json:"policy_refusals"`
	} `json:"telemetry"`
	AuditHead string `json:"audit_head"`
}

func TestMCPRun(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	cs := mcpSession(t, img)
	cases := []struct {
		name  string
		args  map[string]any
		check func(t *testing.T, r runResult)
	}{
		{"zero exit", map[string]any{"argv": []string{"/bin/echo", "hello", "world"}}, func(t *testing.T, r runResult) {
			// As on the host: echo prints its arguments and exits 0, in the
			// seccomp tier (an agent's calls never run in-process).
			if r.ExitCode != 0 || r.Stdout != "hello world\n" || r.Stderr != "" || r.TimedOut || r.Truncated {
				t.Errorf("%+v", r)
			}
			if r.Tier != "seccomp" || r.Telemetry == nil || r.Telemetry.Syscalls == 0 || len(r.Telemetry.ByFamily) == 0 {
				t.Errorf("tier %q telemetry %+v", r.Tier, r.Telemetry)
			}
		}},
		{"non-zero exit", map[string]any{"command": "echo out; echo err >&2; exit 7"}, func(t *testing.T, r runResult) {
			if r.ExitCode != 7 || r.Stdout != "out\n" || r.Stderr != "err\n" || r.Signal != "" {
				t.Errorf("%+v", r)
			}
		}},
		{"stdin", map[string]any{"argv": []string{"/bin/sh", "-c", "wc -c; echo done"}, "stdin": strings.Repeat("x", 100000)}, func(t *testing.T, r runResult) {
			if r.ExitCode != 0 || strings.TrimSpace(strings.Split(r.Stdout, "\n")[0]) != "100000" || !strings.HasSuffix(r.Stdout, "done\n") {
				t.Errorf("%+v", r)
			}
		}},
		{"env and workdir", map[string]any{"command": "echo $GREETING; pwd", "env": map[string]string{"GREETING": "hi there", "PATH": "/bin:/usr/bin"}, "workdir": "/etc"}, func(t *testing.T, r runResult) {
			if r.ExitCode != 0 || r.Stdout != "hi there\n/etc\n" {
				t.Errorf("%+v", r)
			}
		}},
		{"huge output", map[string]any{"command": "yes abcdefgh | head -c 4999995; echo TAILMARK", "max_output_bytes": 10000}, func(t *testing.T, r runResult) {
			if r.ExitCode != 0 || !r.Truncated || r.StdoutLen != 5000004 {
				t.Errorf("exit %d truncated %v stdout_bytes %d", r.ExitCode, r.Truncated, r.StdoutLen)
			}
			if !strings.HasPrefix(r.Stdout, "abcdefgh\nabcdefgh\n") || !strings.HasSuffix(r.Stdout, "abcdefgh\nTAILMARK\n") || len(r.Stdout) > 10200 {
				t.Errorf("head/tail not kept: %d bytes, %q ... %q", len(r.Stdout), r.Stdout[:min(40, len(r.Stdout))], r.Stdout[max(0, len(r.Stdout)-40):])
			}
			if !strings.Contains(r.Stdout, "bytes cut") {
				t.Errorf("no cut marker")
			}
		}},
		{"binary stdin and stdout", map[string]any{"argv": []string{"/bin/cat"}, "stdin_base64": base64.StdEncoding.EncodeToString([]byte{0xff, 0, 0xfe, 'a', 0x80})}, func(t *testing.T, r runResult) {
			got, _ := base64.StdEncoding.DecodeString(r.StdoutBase64)
			if r.ExitCode != 0 || !bytes.Equal(got, []byte{0xff, 0, 0xfe, 'a', 0x80}) {
				t.Errorf("%+v (stdout_base64 %q)", r, r.StdoutBase64)
			}
		}},
		{"not found", map[string]any{"argv": []string{"/no/such/program"}}, func(t *testing.T, r runResult) {
			if r.ExitCode != 127 || !strings.Contains(r.Stderr, "/no/such/program") {
				t.Errorf("%+v", r)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r runResult
			res := call(t, cs, "run", c.args, &r)
			if res.IsError {
				t.Fatalf("isError: %s", resultText(res))
			}
			c.check(t, r)
		})
	}
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		var r runResult
		res := call(t, cs, "run", map[string]any{"command": "sleep 3141 & sleep 3142; echo never", "timeout_ms": 1500}, &r)
		if res.IsError {
			t.Fatalf("isError: %s", resultText(res))
		}
		if !r.TimedOut || r.Signal != "SIGKILL" || r.ExitCode != 137 || strings.Contains(r.Stdout, "never") {
			t.Errorf("%+v", r)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("took %v", d)
		}
		// The whole guest tree is gone: no sleep left behind.
		if left := processesWith("3141", "3142"); len(left) > 0 {
			t.Errorf("guest processes outlived the timeout: %v", left)
		}
	})
	if after := fileSum(t, img); after != before {
		t.Errorf("the image changed under ephemeral runs: %s -> %s", before, after)
	}
	assertCleanImage(t, img)
}

// processesWith lists host processes whose command line holds one of
// marks.
func processesWith(marks ...string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cl := strings.ReplaceAll(string(b), "\x00", " ")
		for _, m := range marks {
			if strings.Contains(cl, "sleep "+m) {
				out = append(out, e.Name()+": "+cl)
			}
		}
	}
	return out
}

type readResult struct {
	Encoding      string `json:"encoding"`
	ContentBase64 string `json:"content_base64"`
	Text          string `json:"-"` // the result's content, for encoding "text"
	Bytes         int    `json:"bytes"`
	Size          int64  `json:"size"`
	EOF           bool   `json:"eof"`
}

// readFile calls read_file: its text is the result's content.
func readFile(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, readResult) {
	t.Helper()
	var rd readResult
	res := call(t, cs, "read_file", args, &rd)
	if !res.IsError && rd.Encoding == "text" {
		rd.Text = resultText(res)
	}
	return res, rd
}

func TestMCPSession(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	snaps := t.TempDir()
	cs := mcpSession(t, img, "--snapshots", snaps)
	var open struct {
		Session string `json:"session"`
	}
	if res := call(t, cs, "session_open", map[string]any{}, &open); res.IsError || open.Session == "" {
		t.Fatalf("session_open: %s", resultText(res))
	}
	sid := open.Session
	// 1: write a script; 2: run it; 3: read what it wrote.
	script := "#!/bin/sh\necho built > /work/out.txt\nuname -s >> /work/out.txt\necho $1 >> /work/out.txt\n"
	if res := call(t, cs, "write_file", map[string]any{"session": sid, "path": "/work/build.sh", "content": script, "mode": "0755", "mkdirs": true}, nil); res.IsError {
		t.Fatalf("write_file: %s", resultText(res))
	}
	var r runResult
	if res := call(t, cs, "run", map[string]any{"session": sid, "argv": []string{"/work/build.sh", "arg1"}}, &r); res.IsError || r.ExitCode != 0 {
		t.Fatalf("run: %s %+v", resultText(res), r)
	}
	res, rd := readFile(t, cs, map[string]any{"session": sid, "path": "/work/out.txt"})
	if res.IsError {
		t.Fatalf("read_file: %s", resultText(res))
	}
	if rd.Text != "built\nLinux\narg1\n" || rd.ContentBase64 != "" || !rd.EOF || rd.Size != int64(len(rd.Text)) {
		t.Errorf("read_file: %+v", rd)
	}
	var st struct {
		Type string `json:"type"`
		Mode string `json:"mode"`
		Size int64  `json:"size"`
	}
	if res := call(t, cs, "stat", map[string]any{"session": sid, "path": "/work/build.sh"}, &st); res.IsError || st.Type != "file" || st.Mode != "0755" || st.Size != int64(len(script)) {
		t.Errorf("stat: %s %+v", resultText(res), st)
	}
	var ls struct {
		Entries []struct {
			Path, Type string
		} `json:"entries"`
	}
	if res := call(t, cs, "list_dir", map[string]any{"session": sid, "path": "/work"}, &ls); res.IsError || len(ls.Entries) != 2 {
		t.Errorf("list_dir: %s %+v", resultText(res), ls)
	}

	// Binary content both ways: every byte value written, read back
	// exactly; and an ELF of the image, as debugfs reads it.
	bin := make([]byte, 70000)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	if res := call(t, cs, "write_file", map[string]any{"session": sid, "path": "/work/blob", "content_base64": base64.StdEncoding.EncodeToString(bin)}, nil); res.IsError {
		t.Fatalf("write_file binary: %s", resultText(res))
	}
	res, rd = readFile(t, cs, map[string]any{"session": sid, "path": "/work/blob", "offset": 1000, "limit": 5000})
	if res.IsError {
		t.Fatalf("read_file binary: %s", resultText(res))
	}
	got, _ := base64.StdEncoding.DecodeString(rd.ContentBase64)
	if !bytes.Equal(got, bin[1000:6000]) || rd.Encoding != "base64" || strings.Contains(resultText(res), "\x00") || rd.Size != 70000 || rd.EOF {
		t.Errorf("binary read back wrong: %d bytes, size %d eof %v text %d", len(got), rd.Size, rd.EOF, len(rd.Text))
	}
	res, rd = readFile(t, cs, map[string]any{"session": sid, "path": "/bin/busybox", "limit": 4096})
	if res.IsError {
		t.Fatalf("read_file busybox: %s", resultText(res))
	}
	got, _ = base64.StdEncoding.DecodeString(rd.ContentBase64)
	want, err := exec.Command("debugfs", "-R", "cat /bin/busybox", img).Output()
	if err != nil || len(want) < 4096 {
		t.Fatalf("debugfs: %v", err)
	}
	if !bytes.Equal(got, want[:4096]) || !bytes.HasPrefix(got, []byte("\x7fELF")) || rd.Size != int64(len(want)) {
		t.Errorf("read_file /bin/busybox differs from debugfs's (%d bytes, size %d)", len(got), rd.Size)
	}

	// The session's writes are in its snapshot, never in the image.
	snap := filepath.Join(snaps, "snap.ext4")
	if res := call(t, cs, "session_close", map[string]any{"session": sid, "snapshot": "snap"}, nil); res.IsError {
		t.Fatalf("session_close: %s", resultText(res))
	}
	if out, _ := exec.Command("debugfs", "-R", "cat /work/out.txt", snap).Output(); string(out) != "built\nLinux\narg1\n" {
		t.Errorf("snapshot lacks the session's file: %q", out)
	}
	assertCleanImage(t, snap)
	if after := fileSum(t, img); after != before {
		t.Errorf("the base image changed under a session")
	}
	if res := call(t, cs, "read_file", map[string]any{"session": sid, "path": "/work/out.txt"}, nil); !res.IsError || !strings.Contains(resultText(res), "no session") {
		t.Errorf("a closed session still answers: %s", resultText(res))
	}
}

func TestMCPKernelRead(t *testing.T) {
	cs := mcpSession(t, imagePath(t))
	var kr struct {
		Text string `json:"text"`
	}
	if res := call(t, cs, "kernel_read", map[string]any{"path": "/proc/meminfo"}, &kr); res.IsError {
		t.Fatalf("kernel_read: %s", resultText(res))
	}
	// The in-process kernel's memory, not the host's: its MemTotal is
	// far below the host's.
	m := regexp.MustCompile(`MemTotal:\s+(\d+) kB`).FindStringSubmatch(kr.Text)
	host, _ := os.ReadFile("/proc/meminfo")
	hm := regexp.MustCompile(`MemTotal:\s+(\d+) kB`).FindStringSubmatch(string(host))
	if m == nil || hm == nil || len(m[1]) > len(hm[1]) || m[1] == hm[1] {
		t.Errorf("kernel meminfo %v, host %v:\n%s", m, hm, kr.Text)
	}
	// Its sysfs: the image is its disk, of the image's size in sectors.
	if res := call(t, cs, "kernel_read", map[string]any{"path": "/sys/block/vda/size"}, &kr); res.IsError {
		t.Fatalf("kernel_read /sys: %s", resultText(res))
	}
	fi, err := os.Stat(imagePath(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(fi.Size() / 512); strings.TrimSpace(kr.Text) != want {
		t.Errorf("/sys/block/vda/size: %q, want %s", kr.Text, want)
	}
	for _, p := range []string{"/proc/self/status", "/proc/1/environ", "/proc/../etc/passwd", "/etc/passwd", "/sys/../etc/passwd"} {
		if res := call(t, cs, "kernel_read", map[string]any{"path": p}, nil); !res.IsError {
			t.Errorf("kernel_read %s was allowed", p)
		}
	}
}

func TestMCPBadArguments(t *testing.T) {
	cs := mcpSession(t, imagePath(t))
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run", map[string]any{}, "give argv"},
		{"run", map[string]any{"argv": "echo hi"}, "argv"},
		{"run", map[string]any{"argv": []string{"true"}, "command": "true"}, "not both"},
		{"run", map[string]any{"argv": []string{"true"}, "timeout_ms": -5}, "timeout_ms"},
		{"run", map[string]any{"argv": []string{"true"}, "session": "nope"}, "no session"},
		{"run", map[string]any{"argv": []string{"true"}, "image": "/no/such.ext4"}, "no --images directory"},
		{"run", map[string]any{"argv": []string{"true"}, "workdir": "relative"}, "absolute"},
		{"read_file", map[string]any{"session": "nope", "path": "/etc/passwd"}, "no session"},
		{"read_file", map[string]any{"path": "/etc/passwd"}, "session"},
		{"kernel_read", map[string]any{"path": "meminfo"}, "must be absolute"},
		{"kernel_read", map[string]any{"path": "/proc/self/../meminfo"}, "clean /proc/NAME"},
	}
	for _, c := range cases {
		res := call(t, cs, c.tool, c.args, nil)
		if !res.IsError || !strings.Contains(resultText(res), c.want) {
			t.Errorf("%s %v: isError %v, %q; want an error mentioning %q", c.tool, c.args, res.IsError, resultText(res), c.want)
		}
	}
	// A file error of the image reaches the agent with its errno.
	var open struct {
		Session string `json:"session"`
	}
	call(t, cs, "session_open", map[string]any{}, &open)
	if res := call(t, cs, "read_file", map[string]any{"session": open.Session, "path": "/no/such/file"}, nil); !res.IsError || !strings.Contains(resultText(res), "ENOENT") {
		t.Errorf("read_file of a missing file: %q", resultText(res))
	}
	if res := call(t, cs, "read_file", map[string]any{"session": open.Session, "path": "/etc"}, nil); !res.IsError || !strings.Contains(resultText(res), "EISDIR") {
		t.Errorf("read_file of a directory: %q", resultText(res))
	}
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// listenMCP starts cmd (a `kbox mcp --listen ...`), ended with the test,
// and returns the address it serves at, from its stderr.
func listenMCP(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := regexp.MustCompile(`mcp at (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	select {
	case u, ok := <-addr:
		if !ok {
			t.Fatal("kbox mcp --listen did not start (a kbox without mcp fails here)")
		}
		return u
	case <-time.After(20 * time.Second):
		t.Fatal("kbox mcp --listen: no address")
	}
	return ""
}

func TestMCPHTTP(t *testing.T) {
	img := imagePath(t)
	cmd := exec.Command(kboxBin(t), "mcp", "--image", img, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KBOX_MCP_TOKEN=sesame-123")
	url := listenMCP(t, cmd)
	// Without the token: refused.
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: status %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bad := mcp.NewClient(&mcp.Implementation{Name: "kbox-test", Version: "1"}, nil)
	if s, err := bad.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerRT{"wrong"}}, MaxRetries: -1}, nil); err == nil {
		s.Close()
		t.Errorf("a wrong token connected")
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "kbox-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerRT{"sesame-123"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.InputSchema == nil || tl.OutputSchema == nil {
			t.Errorf("tool %s lacks a schema", tl.Name)
		}
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "run") || !strings.Contains(got, "kernel_read") || !strings.Contains(got, "session_open") {
		t.Errorf("tools: %s", got)
	}
	var r runResult
	if res := call(t, cs, "run", map[string]any{"command": "cat /etc/hostname >/dev/null; echo over http; exit 3"}, &r); res.IsError || r.ExitCode != 3 || r.Stdout != "over http\n" {
		t.Errorf("run over HTTP: %s %+v", resultText(res), r)
	}
}

func TestMCPSnapshotAndENOSYS(t *testing.T) {
	cs := mcpSession(t, imagePath(t))
	if res := call(t, cs, "enosys", map[string]any{}, nil); !res.IsError || !strings.Contains(resultText(res), "no run") {
		t.Errorf("enosys before any run: %q", resultText(res))
	}
	// observe makes 2 landlock_create_ruleset calls, which kbox answers ENOSYS
	// (tests/guest/observe.c); the shell lives long enough for a sample
	// of its peak RSS.
	var r struct {
		ExitCode  int `json:"exit_code"`
		Telemetry struct {
			ENOSYS      map[string]uint64 `json:"enosys"`
			KernelMemKB uint64            `json:"kernel_mem_peak_kb"`
			GuestPeakKB int64             `json:"guest_peak_rss_kb"`
		} `json:"telemetry"`
	}
	if res := call(t, cs, "run", map[string]any{"argv": []string{"/bin/sh", "-c", "/opt/tests/observe 1 2 0; sleep 0.5"}}, &r); res.IsError || r.ExitCode != 0 {
		t.Fatalf("run: %s", resultText(res))
	}
	if r.Telemetry.ENOSYS["landlock_create_ruleset"] != 2 || r.Telemetry.KernelMemKB == 0 || r.Telemetry.GuestPeakKB == 0 {
		t.Errorf("run telemetry: %+v", r.Telemetry)
	}
	var en struct {
		ENOSYS map[string]uint64 `json:"enosys"`
	}
	if res := call(t, cs, "enosys", map[string]any{}, &en); res.IsError || en.ENOSYS["landlock_create_ruleset"] != 2 {
		t.Errorf("enosys: %s %+v", resultText(res), en)
	}
	var snap struct {
		Argv   []string `json:"argv"`
		Kernel struct {
			Available bool `json:"available"`
			MemKB     struct {
				TotalKB uint64 `json:"total_kb"`
				UsedKB  uint64 `json:"used_kb"`
			} `json:"mem_kb"`
		} `json:"kernel"`
	}
	if res := call(t, cs, "snapshot", map[string]any{}, &snap); res.IsError || !snap.Kernel.Available || snap.Kernel.MemKB.TotalKB == 0 || snap.Kernel.MemKB.UsedKB == 0 || len(snap.Argv) != 3 {
		t.Errorf("snapshot: %s %+v", resultText(res), snap)
	}
}

// TestMCPServerKilled: when kbox mcp dies mid-run, the run and its guest
// die too.
func TestMCPServerKilled(t *testing.T) {
	img := imagePath(t)
	cmd := exec.Command(kboxBin(t), "mcp", "--image", img)
	c := mcp.NewClient(&mcp.Implementation{Name: "kbox-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to kbox mcp: %v", err)
	}
	defer cs.Close()
	go cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": "sleep 3143"}})
	deadline := time.Now().Add(30 * time.Second)
	for len(processesWith("3143")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the guest never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	deadline = time.Now().Add(10 * time.Second)
	for len(processesWith("3143")) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("guest outlived kbox mcp: %v", processesWith("3143"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMCPSessionBuildsC: a session across three calls builds and runs a
// C program: write_file the source, run gcc, run the program, read_file
// the binary (an image with gcc; skips loudly without a Debian mirror).
func TestMCPSessionBuildsC(t *testing.T) {
	img := packageImage(t, "gcc", "libc6-dev")
	cs := mcpSession(t, img)
	var open struct {
		Session string `json:"session"`
	}
	if res := call(t, cs, "session_open", map[string]any{}, &open); res.IsError {
		t.Fatalf("session_open: %s", resultText(res))
	}
	src := "#include <stdio.h>\nint main(int argc, char **argv) { printf(\"hello from C %d\\n\", 40 + argc); return 3; }\n"
	if res := call(t, cs, "write_file", map[string]any{"session": open.Session, "path": "/work/hello.c", "content": src, "mkdirs": true}, nil); res.IsError {
		t.Fatalf("write_file: %s", resultText(res))
	}
	var r runResult
	if res := call(t, cs, "run", map[string]any{"session": open.Session, "command": "cd /work && gcc -O2 -o hello hello.c", "timeout_ms": 300000}, &r); res.IsError || r.ExitCode != 0 {
		t.Fatalf("gcc: %s %+v", resultText(res), r)
	}
	if res := call(t, cs, "run", map[string]any{"session": open.Session, "argv": []string{"/work/hello", "x"}}, &r); res.IsError || r.ExitCode != 3 || r.Stdout != "hello from C 42\n" {
		t.Fatalf("hello: %s %+v", resultText(res), r)
	}
	res, rd := readFile(t, cs, map[string]any{"session": open.Session, "path": "/work/hello", "limit": 4})
	if res.IsError {
		t.Fatalf("read_file: %s", resultText(res))
	}
	// "\x7fELF" is valid UTF-8, so it comes as text.
	if rd.Text != "\x7fELF" || rd.ContentBase64 != "" || rd.Size < 1000 {
		t.Errorf("the binary: %+v", rd)
	}
}

// TestMCPSessionTimeout: a run timed out in the middle of writing leaves
// the session's image clean, with what it had written before.
func TestMCPSessionTimeout(t *testing.T) {
	snaps := t.TempDir()
	cs := mcpSession(t, imagePath(t), "--snapshots", snaps)
	var open struct {
		Session string `json:"session"`
	}
	if res := call(t, cs, "session_open", map[string]any{}, &open); res.IsError {
		t.Fatalf("session_open: %s", resultText(res))
	}
	var r runResult
	res := call(t, cs, "run", map[string]any{"session": open.Session, "timeout_ms": 2000,
		"command": "echo before > /kept && sync && while :; do echo data >> /busy; done"}, &r)
	if res.IsError || !r.TimedOut || r.ExitCode != 137 {
		t.Fatalf("run: %s %+v", resultText(res), r)
	}
	if res := call(t, cs, "run", map[string]any{"session": open.Session, "command": "cat /kept && test -s /busy"}, &r); res.IsError || r.ExitCode != 0 || r.Stdout != "before\n" {
		t.Fatalf("after the timeout: %s %+v", resultText(res), r)
	}
	snap := filepath.Join(snaps, "snap.ext4")
	if res := call(t, cs, "session_close", map[string]any{"session": open.Session, "snapshot": "snap"}, nil); res.IsError {
		t.Fatalf("session_close: %s", resultText(res))
	}
	assertCleanImage(t, snap)
}

// TestMCPTwoSessions: two sessions of one image at once, each with its
// own writes, the image unchanged.
func TestMCPTwoSessions(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	cs := mcpSession(t, img)
	var ids []string
	for i := range 2 {
		var open struct {
			Session string `json:"session"`
		}
		if res := call(t, cs, "session_open", map[string]any{}, &open); res.IsError {
			t.Fatalf("session_open: %s", resultText(res))
		}
		ids = append(ids, open.Session)
		if res := call(t, cs, "write_file", map[string]any{"session": open.Session, "path": "/etc/hostname", "content": fmt.Sprintf("session%d\n", i)}, nil); res.IsError {
			t.Fatalf("write_file: %s", resultText(res))
		}
	}
	for i, id := range ids {
		var r runResult
		if res := call(t, cs, "run", map[string]any{"session": id, "argv": []string{"/bin/cat", "/etc/hostname"}}, &r); res.IsError || r.Stdout != fmt.Sprintf("session%d\n", i) {
			t.Errorf("session %d: %s %+v", i, resultText(res), r)
		}
	}
	for _, id := range ids {
		call(t, cs, "session_close", map[string]any{"session": id}, nil)
	}
	if after := fileSum(t, img); after != before {
		t.Errorf("the image changed")
	}
}
