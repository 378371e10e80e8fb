//go:build lkl

package tests

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// kbox mcp's flags are the operator's and a tool's arguments the agent's
// requests within them (docs/agents.md, "The operator decides"): no host
// path an agent names is read or written, an agent's policy only adds
// restrictions, an agent's network is at most the operator's, and the
// audit log says which settings bound each run.

// secretImage makes a small ext4 image with a secret file and a static
// busybox (so a kbox that ran on it would print the secret): the host
// disk image an agent must not reach.
func secretImage(t *testing.T) (img, token string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bb := filepath.Join(root, "bin", "busybox")
	if out, err := exec.Command("debugfs", "-R", "dump /bin/busybox "+bb, imagePath(t)).CombinedOutput(); err != nil {
		t.Fatalf("debugfs: %v: %s", err, out)
	}
	os.Chmod(bb, 0o755)
	for _, n := range []string{"sh", "cat"} {
		os.Symlink("busybox", filepath.Join(root, "bin", n))
	}
	token = "kbox-secret-" + rand.Text()
	if err := os.WriteFile(filepath.Join(root, "secret.txt"), []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img = filepath.Join(dir, "secret-disk.ext4")
	if out, err := exec.Command("mke2fs", "-q", "-t", "ext4", "-d", root, img, "16M").CombinedOutput(); err != nil {
		t.Fatalf("mke2fs: %v: %s", err, out)
	}
	return img, token
}

// wantToolError checks that a call failed as a tool error mentioning want,
// and did not show secret.
func wantToolError(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, want, secret string) {
	t.Helper()
	res := call(t, cs, tool, args, nil)
	text := resultText(res)
	b, _ := json.Marshal(res.StructuredContent)
	if !res.IsError || !strings.Contains(text, want) {
		t.Errorf("%s %v: isError %v, %q; want an error mentioning %q", tool, args, res.IsError, text, want)
	}
	if secret != "" && (strings.Contains(text, secret) || strings.Contains(string(b), secret)) {
		t.Errorf("%s %v: the host image's secret reached the agent: %q", tool, args, text)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestMCPHostPathsRefused: an image, a snapshot or a policy an agent names
// is never a host path, and a network it asks for is at most the
// operator's: each attempt is a clear tool error that reads and writes
// nothing on the host.
func TestMCPHostPathsRefused(t *testing.T) {
	img := imagePath(t)
	secret, token := secretImage(t)
	victim := t.TempDir()
	hostPolicy := writePolicy(t, "[paths]\nhidden = [\"/etc/hostname\"]\n")

	t.Run("image only", func(t *testing.T) {
		cs := mcpSession(t, img)
		wantToolError(t, cs, "run", map[string]any{"argv": []string{"/bin/cat", "/secret.txt"}, "image": secret}, "no --images directory", token)
		wantToolError(t, cs, "session_open", map[string]any{"image": secret}, "no --images directory", token)
		wantToolError(t, cs, "kernel_read", map[string]any{"path": "/sys/block/vda/size", "image": secret}, "no --images directory", token)
		wantToolError(t, cs, "run", map[string]any{"command": "cat /etc/hostname", "policy": hostPolicy}, "a host path is refused", "")
		wantToolError(t, cs, "run", map[string]any{"command": "true", "net": true}, "no network", "")
		// A snapshot needs the operator's --snapshots: refused, nothing
		// written, and the session stays open.
		var open struct {
			Session string `json:"session"`
		}
		if res := call(t, cs, "session_open", map[string]any{}, &open); res.IsError {
			t.Fatalf("session_open: %s", resultText(res))
		}
		call(t, cs, "write_file", map[string]any{"session": open.Session, "path": "/root/note", "content": "x"}, nil)
		wantToolError(t, cs, "session_close", map[string]any{"session": open.Session, "snapshot": filepath.Join(victim, ".anything")}, "no --snapshots directory", "")
		wantToolError(t, cs, "session_close", map[string]any{"session": open.Session, "snapshot": "plain"}, "no --snapshots directory", "")
		if res := call(t, cs, "read_file", map[string]any{"session": open.Session, "path": "/root/note"}, nil); res.IsError {
			t.Errorf("the session did not survive the refused close: %s", resultText(res))
		}
		if res := call(t, cs, "session_close", map[string]any{"session": open.Session}, nil); res.IsError {
			t.Errorf("session_close: %s", resultText(res))
		}
	})

	t.Run("images and snapshots", func(t *testing.T) {
		imgs := t.TempDir()
		if err := os.Symlink(img, filepath.Join(imgs, "base.ext4")); err != nil {
			t.Fatal(err)
		}
		cs := mcpServer(t, "--images", imgs, "--snapshots", imgs)
		var r runResult
		if res := call(t, cs, "run", map[string]any{"image": "base", "argv": []string{"/bin/cat", "/etc/hostname"}}, &r); res.IsError || r.ExitCode != 0 || r.Stdout == "" {
			t.Fatalf("run on a named image: %s %+v", resultText(res), r)
		}
		wantToolError(t, cs, "run", map[string]any{"argv": []string{"true"}}, "no default image; give image, one of: base", "")
		for _, name := range []string{secret, "../" + filepath.Base(filepath.Dir(secret)) + "/secret-disk", "a/b", "..", ".base", "base/../base"} {
			wantToolError(t, cs, "run", map[string]any{"argv": []string{"/bin/cat", "/secret.txt"}, "image": name}, "bare name", token)
		}
		wantToolError(t, cs, "run", map[string]any{"argv": []string{"/bin/cat", "/secret.txt"}, "image": "secret-disk"}, "not one of the server's images: base", token)

		// A session's snapshot is a name in the operator's directory,
		// which is also --images here: it runs as an image later.
		var open struct {
			Session string `json:"session"`
		}
		if res := call(t, cs, "session_open", map[string]any{"image": "base"}, &open); res.IsError {
			t.Fatalf("session_open: %s", resultText(res))
		}
		call(t, cs, "write_file", map[string]any{"session": open.Session, "path": "/root/note", "content": "from the session\n"}, nil)
		for _, name := range []string{filepath.Join(victim, ".anything"), "/root/.anything", "../" + filepath.Base(victim) + "/x", ".hidden"} {
			wantToolError(t, cs, "session_close", map[string]any{"session": open.Session, "snapshot": name}, "bare name", "")
		}
		if res := call(t, cs, "session_close", map[string]any{"session": open.Session, "snapshot": "snap1"}, nil); res.IsError {
			t.Fatalf("session_close snap1: %s", resultText(res))
		}
		assertCleanImage(t, filepath.Join(imgs, "snap1.ext4"))
		if res := call(t, cs, "run", map[string]any{"image": "snap1", "argv": []string{"/bin/cat", "/root/note"}}, &r); res.IsError || r.Stdout != "from the session\n" {
			t.Errorf("run on the snapshot: %s %+v", resultText(res), r)
		}
		sum := fileSum(t, filepath.Join(imgs, "snap1.ext4"))
		if res := call(t, cs, "session_open", map[string]any{"image": "base"}, &open); res.IsError {
			t.Fatalf("session_open: %s", resultText(res))
		}
		wantToolError(t, cs, "session_close", map[string]any{"session": open.Session, "snapshot": "snap1"}, "exists already", "")
		if fileSum(t, filepath.Join(imgs, "snap1.ext4")) != sum {
			t.Errorf("an existing snapshot was replaced")
		}
		if got := strings.Join(dirNames(t, imgs), " "); got != "base.ext4 snap1.ext4" {
			t.Errorf("the images directory holds %s (temporary files left?)", got)
		}
	})
	if got := dirNames(t, victim); len(got) != 0 {
		t.Errorf("files appeared where the agent named: %v", got)
	}
}

// TestMCPOperatorPolicy: the operator's --policy binds every run and the
// session file tools; an agent's policy that tries to loosen it changes
// nothing, and one that adds a restriction takes effect.
func TestMCPOperatorPolicy(t *testing.T) {
	op := writePolicy(t, "[paths]\nhidden = [\"/etc/hostname\"]\nread_only = [\"/usr\"]\n[syscalls]\ndeny = [\"mkdir=EACCES\"]\n")
	cs := mcpSession(t, imagePath(t), "--policy", op)
	probe := "cat /etc/hostname; echo hostname=$?; mkdir /root/d; echo mkdir=$?; cat /etc/passwd >/dev/null; echo passwd=$?"
	loosen := `[paths]
default = "read_write"
read_write = ["/", "/etc", "/etc/hostname"]
[syscalls]
deny = ["mkdir=EPERM"]
quota = { mkdir = 100000 }
[limits]
processes = 100000
`
	cases := []struct {
		name, policy string
		want         []string // in stdout or stderr
		not          []string
		refusals     map[string]uint64
	}{
		{"operator's", "", []string{"hostname=1", "mkdir=1", "passwd=0", "No such file", "Permission denied"}, []string{"Operation not permitted"},
			map[string]uint64{"hidden:/etc/hostname": 1, "deny:mkdir": 1}},
		{"loosen", loosen, []string{"hostname=1", "mkdir=1", "passwd=0", "No such file", "Permission denied"}, []string{"Operation not permitted"},
			map[string]uint64{"hidden:/etc/hostname": 1, "deny:mkdir": 1}},
		{"restrict", "[paths]\nhidden = [\"/etc/passwd\"]\n", []string{"hostname=1", "mkdir=1", "passwd=1"}, nil,
			map[string]uint64{"hidden:/etc/hostname": 1, "deny:mkdir": 1, "hidden:/etc/passwd": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := map[string]any{"command": probe}
			if c.policy != "" {
				args["policy"] = c.policy
			}
			var r runResult
			if res := call(t, cs, "run", args, &r); res.IsError {
				t.Fatalf("run: %s", resultText(res))
			}
			out := r.Stdout + r.Stderr
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.not {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			for rule, n := range c.refusals {
				if r.Telemetry == nil || r.Telemetry.Policy[rule] != n {
					t.Errorf("refusals of %s: %v, want %d", rule, r.Telemetry, n)
				}
			}
		})
	}
	wantToolError(t, cs, "run", map[string]any{"command": "true", "policy": "[network]\nallow = [\"127.0.0.1\"]\n"}, "network.allow", "")

	// The session file tools: the hidden file is hidden (by its name, a
	// symlink to it, in its directory's listing), the read-only tree
	// cannot be written.
	var open struct {
		Session string `json:"session"`
	}
	if res := call(t, cs, "session_open", map[string]any{}, &open); res.IsError {
		t.Fatalf("session_open: %s", resultText(res))
	}
	sid := open.Session
	var r runResult
	if res := call(t, cs, "run", map[string]any{"session": sid, "command": "ln -s /etc/hostname /root/lnk && ln -s /etc /root/etc && echo ok"}, &r); res.IsError || r.Stdout != "ok\n" {
		t.Fatalf("run: %s %+v", resultText(res), r)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"read_file", map[string]any{"path": "/etc/hostname"}, "ENOENT"},
		{"read_file", map[string]any{"path": "/root/lnk"}, "ENOENT"},
		{"read_file", map[string]any{"path": "/root/etc/hostname"}, "ENOENT"},
		{"read_file", map[string]any{"path": "/etc/../etc/hostname"}, "ENOENT"},
		{"stat", map[string]any{"path": "/etc/hostname"}, "ENOENT"},
		{"write_file", map[string]any{"path": "/etc/hostname", "content": "x"}, "ENOENT"},
		{"write_file", map[string]any{"path": "/usr/kbox-x", "content": "x"}, "EROFS"},
		{"write_file", map[string]any{"path": "/usr/newdir/x", "content": "x", "mkdirs": true}, "EROFS"},
	} {
		c.args["session"] = sid
		wantToolError(t, cs, c.tool, c.args, c.want, "")
	}
	if res := call(t, cs, "write_file", map[string]any{"session": sid, "path": "/root/ok", "content": "x"}, nil); res.IsError {
		t.Errorf("write_file /root/ok: %s", resultText(res))
	}
	var ls struct {
		Entries []struct {
			Path string `json:"path"`
		} `json:"entries"`
	}
	if res := call(t, cs, "list_dir", map[string]any{"session": sid, "path": "/etc"}, &ls); res.IsError {
		t.Fatalf("list_dir: %s", resultText(res))
	}
	var names []string
	for _, e := range ls.Entries {
		names = append(names, filepath.Base(e.Path))
	}
	if got := " " + strings.Join(names, " ") + " "; strings.Contains(got, " hostname ") || !strings.Contains(got, " passwd ") {
		t.Errorf("list_dir /etc: %s", got)
	}
}

// TestMCPOperatorNet: the operator's --net and egress rules bind every
// run: an allowed loopback server is reached, a run that asks for no
// network reaches nothing, and a destination not allowed is refused.
func TestMCPOperatorNet(t *testing.T) {
	body := "kbox mcp net " + rand.Text()
	port, hits := httpServer(t, body)
	other, otherHits := httpServer(t, "not allowed")
	cs := mcpSession(t, imagePath(t), "--net", "--net-allow", "127.0.0.1:"+strconv.Itoa(port))
	wget := func(p int) string { return "wget -qO- http://10.0.2.2:" + strconv.Itoa(p) + "/; echo \" status=$?\"" }
	var r runResult
	if res := call(t, cs, "run", map[string]any{"command": wget(port)}, &r); res.IsError || !strings.Contains(r.Stdout, body) || !strings.Contains(r.Stdout, "status=0") {
		t.Errorf("allowed server: %s %+v", resultText(res), r)
	}
	if hits.Load() != 1 {
		t.Errorf("the allowed server saw %d requests, want 1", hits.Load())
	}
	if res := call(t, cs, "run", map[string]any{"command": wget(port), "net": false}, &r); res.IsError || strings.Contains(r.Stdout, body) || strings.Contains(r.Stdout, "status=0") || !strings.Contains(r.Stderr, "Network is unreachable") {
		t.Errorf("net: false: %s %+v", resultText(res), r)
	}
	if res := call(t, cs, "run", map[string]any{"command": wget(other)}, &r); res.IsError || strings.Contains(r.Stdout, "not allowed") || strings.Contains(r.Stdout, "status=0") || !strings.Contains(r.Stderr, "Connection refused") {
		t.Errorf("a server not allowed: %s %+v", resultText(res), r)
	}
	wantToolError(t, cs, "run", map[string]any{"command": wget(other), "policy": "[network]\nallow = [\"127.0.0.1:" + strconv.Itoa(other) + "\"]\n"}, "network.allow", "")
	if hits.Load() != 1 || otherHits.Load() != 0 {
		t.Errorf("servers saw %d and %d requests, want 1 and 0", hits.Load(), otherHits.Load())
	}
}

// TestMCPAuditSettings: every record of the audit log carries the SHA-256
// of the server's settings, the server's mcp_start record holds them, the
// hash changes with the settings, and the log verifies.
func TestMCPAuditSettings(t *testing.T) {
	img := imagePath(t)
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	for _, extra := range [][]string{nil, {"--policy", writePolicy(t, "[paths]\nhidden = [\"/etc/hostname\"]\n")}} {
		cs := mcpSession(t, img, append([]string{"--audit", log}, extra...)...)
		if res := call(t, cs, "run", map[string]any{"argv": []string{"/bin/true"}}, nil); res.IsError {
			t.Fatalf("run: %s", resultText(res))
		}
		cs.Close()
	}
	var hashes []string // by server, in order
	types := map[string][]string{}
	for _, rec := range readAuditLog(t, log) {
		if len(rec.Settings) != 64 {
			t.Errorf("a %s record without the settings hash: %s", rec.Type, rec.line)
			continue
		}
		if rec.Type == "mcp_start" {
			hashes = append(hashes, rec.Settings)
			st, _ := rec.Data["settings"].(map[string]any)
			if abs, _ := filepath.Abs(img); st["image"] != abs || st["tier"] != "seccomp" {
				t.Errorf("mcp_start settings: %v", rec.Data)
			}
			if _, has := st["policy_sha256"]; has != (len(hashes) == 2) {
				t.Errorf("mcp_start %d: policy_sha256 %v", len(hashes), st["policy_sha256"])
			}
		} else if len(hashes) == 0 || rec.Settings != hashes[len(hashes)-1] {
			t.Errorf("a %s record carries %s, not its server's settings hash %v", rec.Type, rec.Settings, hashes)
		}
		types[rec.Settings] = append(types[rec.Settings], rec.Type)
	}
	if len(hashes) != 2 || hashes[0] == hashes[1] {
		t.Fatalf("servers' settings hashes %v: want two that differ", hashes)
	}
	for _, h := range hashes {
		if got := strings.Join(types[h], " "); !strings.HasPrefix(got, "mcp_start run_start") || !strings.HasSuffix(got, "run_end") {
			t.Errorf("records of %s: %s", h[:8], got)
		}
	}
	if out, stderr, status := runKbox(t, "audit", "verify", log); status != 0 {
		t.Errorf("audit verify: %d %s %s", status, out, stderr)
	}
}
