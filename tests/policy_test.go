//go:build lkl

package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --policy and kbox policy check (docs/agents.md, package policy,
// dispatch/policy.go). On a kbox without policies every run here fails:
// --policy is an unknown option (exit 2).

// writePolicy writes a policy file in the test's temporary directory.
func writePolicy(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// policyImage is a copy of the image with /data/ro/f, /data/secret/key,
// links to them and /data/free0 (tests/guest/policy.c).
func policyImage(t *testing.T) string {
	img := copyImage(t, imagePath(t))
	_, stderr, status := runKbox(t, "image", "-S", img, "--", "/bin/sh", "-c",
		"mkdir -p /data/ro /data/secret /data/links && echo orig > /data/ro/f && echo k > /data/secret/key && "+
			"ln -s /data/ro/f /data/links/ro && ln -s /data/secret /data/links/sec && touch /data/free0")
	if status != 0 {
		t.Fatalf("preparing the image: status %d: %s", status, stderr)
	}
	return img
}

const dataPolicy = `
[paths]
hidden = ["/data/secret"]
read_only = ["/data/ro"]
`

// TestPolicyPaths: every way around a hidden and a read-only path
// (.., a symlink, a dirfd, the cwd, /proc/self/fd, /dev/fd, a hard link,
// fd calls, renames of the file or a directory above it) is refused; the
// same program without the policy does all of it.
func TestPolicyPaths(t *testing.T) {
	img := policyImage(t)
	pol := writePolicy(t, dataPolicy)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--policy", pol, "--audit", audit,
		"--trace-format", "json", "--trace-file", trace, "--", "/opt/tests/policy")
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	want := map[string]string{
		"open-hidden": "ENOENT", "stat-hidden": "ENOENT", "dotdot-hidden": "ENOENT", "symlink-hidden": "ENOENT",
		"dotdot-out-of-hidden": "ENOENT", "link-dotdot-out-of-hidden": "ENOENT",
		"dirfd-hidden": "ENOENT", "cwd-dotdot-hidden": "ENOENT",
		"read-ro": "ok", "content": "orig",
		"write-ro": "EROFS", "trunc-ro": "EROFS", "relative-ro": "EROFS", "symlink-ro": "EROFS",
		"dirfd-ro": "EROFS", "dirfd-create-ro": "EROFS", "procfd-ro": "EROFS", "devfd-ro": "EROFS",
		"fchmod-ro": "EROFS", "chmod-ro": "EROFS", "truncate-ro": "EROFS", "mkdir-ro": "EROFS",
		"symlinkat-ro": "EROFS", "unlink-ro": "EROFS", "hardlink-ro": "EROFS", "linkfd-ro": "EROFS",
		"rename-from-ro": "EROFS", "rename-into-ro": "EROFS", "rename-ro-dir": "EROFS", "rename-parent": "EPERM",
		"bind-mount-hidden": "EPERM", "bind-mount-ro": "EPERM", "bind-mount-parent": "EPERM",
		"write-free": "ok", "rename-free": "ok",
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	// The refusals are in the trace with their rule, and in the audit log.
	tb, _ := os.ReadFile(trace)
	if !strings.Contains(string(tb), `"rule":"hidden:/data/secret"`) || !strings.Contains(string(tb), `"rule":"read_only:/data/ro"`) {
		t.Errorf("the trace names no rule:\n%s", lastLines(string(tb), 10))
	}
	ab, _ := os.ReadFile(audit)
	if !strings.Contains(string(ab), `"type":"policy_refusal"`) || !strings.Contains(string(ab), `"rule":"read_only:/data/ro"`) {
		t.Errorf("the audit log has no refusal:\n%s", ab)
	}
	if !strings.Contains(string(ab), `"policy_sha256"`) {
		t.Errorf("run_start names no policy hash:\n%s", ab)
	}
	if _, se, st := runKbox(t, "audit", "verify", audit); st != 0 {
		t.Errorf("audit verify: status %d: %s", st, se)
	}
	// A hidden name is not listed; the others are.
	out, _, _ := runKbox(t, "image", "-S", img, "--read-only", "--policy", pol, "--", "/bin/ls", "-a", "/data")
	if strings.Contains(out, "secret") || !strings.Contains(out, "links") || !strings.Contains(out, "ro\n") {
		t.Errorf("listing of /data under the policy: %q", out)
	}
	// Nothing was changed, and the refused names are where they were.
	out, _, _ = runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/sh", "-c",
		"cat /data/ro/f /data/secret/key; ls /data /data/ro")
	for _, w := range []string{"orig", "k", "free2", "links", "ro", "secret", "f"} {
		if !strings.Contains(out, w) {
			t.Errorf("after the run: %q lacks %q", out, w)
		}
	}
	for _, n := range []string{"moved", "hl", "data2", "ro2", "new"} {
		if strings.Contains(out, n+"\n") {
			t.Errorf("after the run: %q has %q", out, n)
		}
	}
	assertCleanImage(t, img)
	// Without the policy the same program does it all.
	img2 := policyImage(t)
	out, _, status = runKbox(t, "image", "-S", img2, "--", "/opt/tests/policy")
	// (Once unlink-ro has removed the file and rename-parent moved /data,
	// the later attempts find nothing: ENOENT.)
	if status != 0 || !strings.Contains(out, "open-hidden ok") || !strings.Contains(out, "procfd-ro ok") ||
		!strings.Contains(out, "link-dotdot-out-of-hidden ok") ||
		strings.Contains(out, "EROFS") || strings.Contains(out, "EPERM") {
		t.Errorf("without a policy: status %d\n%s", status, out)
	}
}

// TestPolicySyscalls: denials with their errno, a quota, the process
// limit, and --stats and --report counting the refusals.
func TestPolicySyscalls(t *testing.T) {
	img := imagePath(t)
	report := filepath.Join(t.TempDir(), "report.json")
	pol := writePolicy(t, `
[syscalls]
deny = ["mkdir=EACCES", "family:net"]
quota = { execve = 3 }
[limits]
processes = 3
`)
	runCases(t, []string{"image", "-S", img, "--read-only", "--policy", pol}, []guestCase{
		{name: "deny", args: []string{"--", "/bin/sh", "-c", "mkdir /tmp/x; echo mkdir $?; wget -q -O- http://10.0.0.1/ 2>&1; echo wget $?"},
			want: []string{"mkdir 1", "wget: socket: Operation not permitted", "wget 1"}},
		// The shell's own exec is the first of the three.
		{name: "quota", args: []string{"--", "/bin/sh", "-c", "for i in 1 2 3 4; do /bin/true && echo ok$i || echo fail$i; done"},
			want: []string{"ok1", "ok2", "fail3", "fail4"}},
	})
	// sh and two sleeps are three processes: the third sleep is refused.
	out, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--policy", pol, "--",
		"/bin/sh", "-c", "sleep 1 & sleep 1 & echo two; sleep 1 & echo three; wait")
	if status != 2 || !strings.Contains(out, "two") || strings.Contains(out, "three") ||
		!strings.Contains(stderr, "can't fork: Resource temporarily unavailable") {
		t.Errorf("processes: status %d\nstdout: %s\nstderr: %s", status, out, stderr)
	}
	_, stderr, _ = runKbox(t, "image", "-S", img, "--read-only", "--policy", pol, "--stats", "--report", report,
		"--", "/bin/sh", "-c", "mkdir /tmp/y 2>&1")
	if !strings.Contains(stderr, "kbox: policy refused: deny:mkdir 1") {
		t.Errorf("--stats shows no refusal:\n%s", stderr)
	}
	var rep struct {
		Telemetry struct {
			Policy map[string]uint64 `json:"policy_refusals"`
		} `json:"telemetry"`
	}
	b, _ := os.ReadFile(report)
	if err := json.Unmarshal(b, &rep); err != nil || rep.Telemetry.Policy["deny:mkdir"] != 1 {
		t.Errorf("report's policy_refusals: %v %s", err, b)
	}
}

// TestPolicyLimits: wall time (137 and kbox's message), CPU time (the
// guest dies of SIGXCPU), address space, file size (SIGXFSZ).
func TestPolicyLimits(t *testing.T) {
	img := imagePath(t)
	limit := func(text string) []string {
		return []string{"--policy", writePolicy(t, "[limits]\n"+text+"\n")}
	}
	runCases(t, []string{"image", "-S", img, "--read-only"}, []guestCase{
		{name: "wall", args: append(limit(`wall_time = "1s"`), "--", "/bin/sleep", "30"), status: 137},
		{name: "cpu", args: append(limit(`cpu_time = "1s"`), "--", "/bin/sh", "-c", "while :; do :; done"), status: 128 + 24},
		{name: "address-space", args: append(limit(`address_space = "64M"`), "--", "/bin/sh", "-c",
			"dd if=/dev/zero of=/dev/null bs=100M count=1 2>/dev/null; echo big $?; dd if=/dev/zero of=/dev/null bs=1M count=1 2>/dev/null; echo small $?"),
			want: []string{"big 1", "small 0"}},
		{name: "file-size", args: append(limit(`file_size = "1M"`), "--", "/bin/sh", "-c",
			"dd if=/dev/zero of=/tmp/big bs=1M count=2 2>/dev/null; echo dd $?; wc -c </tmp/big"),
			want: []string{"dd 153", "1048576"}},
	})
}

// TestPolicyCheck: kbox policy check prints the policy in effect; a bad
// file is exit status 2 with the key named, for check and --policy alike.
func TestPolicyCheck(t *testing.T) {
	good := writePolicy(t, `
[paths]
read_only = ["/"]
read_write = ["/tmp"]
[syscalls]
deny = ["ptrace"]
[limits]
wall_time = "90s"
address_space = "1G"
`)
	out, stderr, status := runKbox(t, "policy", "check", good)
	if status != 0 {
		t.Fatalf("check: status %d: %s", status, stderr)
	}
	for _, w := range []string{`default = "read_write"`, `read_only = ["/"]`, `read_write = ["/tmp"]`, `deny = ["ptrace=EPERM"]`, `wall_time = "1m30s"`, `address_space = 1073741824`} {
		if !strings.Contains(out, w) {
			t.Errorf("check output lacks %s:\n%s", w, out)
		}
	}
	bad := []struct{ text, want string }{
		{"[paths]\nhiden = [\"/x\"]\n", "unknown key paths.hiden"},
		{"[limit]\nwall_time = \"1s\"\n", "unknown key limit"},
		{"[syscalls]\ndeny = [\"nosuchcall\"]\n", `unknown syscall "nosuchcall"`},
		{"[syscalls]\ndeny = [\"getpid\"]\n", "getpid runs natively"},
		{"[paths]\nhidden = [\"rel\"]\n", "not an absolute path"},
		{"[network]\nallow = [\"nonsense\"]\n", "network.allow"},
	}
	for _, b := range bad {
		f := writePolicy(t, b.text)
		_, stderr, status := runKbox(t, "policy", "check", f)
		if status != 2 || !strings.Contains(stderr, b.want) {
			t.Errorf("check %q: status %d, stderr %q; want 2 and %q", b.text, status, stderr, b.want)
		}
		_, stderr, status = runKbox(t, "image", "-S", imagePath(t), "--read-only", "--policy", f, "--", "/bin/true")
		if status != 2 || !strings.Contains(stderr, b.want) {
			t.Errorf("--policy %q: status %d, stderr %q; want 2 and %q", b.text, status, stderr, b.want)
		}
	}
}

// TestPolicyMCP: run's policy argument, TOML: the refusal reaches the
// guest and the telemetry; a bad policy, or a host path, refuses the call.
func TestPolicyMCP(t *testing.T) {
	cs := mcpSession(t, imagePath(t))
	var r runResult
	res := call(t, cs, "run", map[string]any{"command": "cat /etc/passwd; echo rc $?",
		"policy": "[paths]\nhidden = [\"/etc/passwd\"]\n"}, &r)
	if res.IsError || !strings.Contains(r.Stdout, "rc 1") || !strings.Contains(r.Stderr, "No such file") ||
		r.Telemetry == nil || r.Telemetry.Policy["hidden:/etc/passwd"] != 1 {
		t.Errorf("inline policy: isError %v %+v %+v", res.IsError, r, r.Telemetry)
	}
	res = call(t, cs, "run", map[string]any{"command": "mkdir /tmp/d; echo rc $?", "policy": "[syscalls]\ndeny = [\"mkdir=EACCES\"]\n"}, &r)
	if res.IsError || !strings.Contains(r.Stdout, "rc 1") || !strings.Contains(r.Stderr, "Permission denied") {
		t.Errorf("deny: isError %v %+v", res.IsError, r)
	}
	file := writePolicy(t, "[syscalls]\ndeny = [\"mkdir=EACCES\"]\n")
	res = call(t, cs, "run", map[string]any{"command": "mkdir /tmp/d; echo rc $?", "policy": file}, &r)
	if !res.IsError || !strings.Contains(resultText(res), "a host path is refused") {
		t.Errorf("policy file: isError %v %q", res.IsError, resultText(res))
	}
	res = call(t, cs, "run", map[string]any{"command": "true", "policy": "[paths]\nhiden = []\n"}, nil)
	if !res.IsError || !strings.Contains(resultText(res), "unknown key paths.hiden") {
		t.Errorf("bad policy: isError %v %q", res.IsError, resultText(res))
	}
}
