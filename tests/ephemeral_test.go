//go:build lkl

package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// --ephemeral, --snapshot and --audit of kbox image (docs/agents.md).

// bigImage is a copy of the test image grown to 256 MiB, room for 100 MB
// of writes.
func bigImage(t *testing.T) string {
	img := copyImage(t, imagePath(t))
	if out, err := exec.Command("e2fsck", "-fy", img).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck: %v\n%s", err, out)
	}
	if err := os.Truncate(img, 256<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("resize2fs", img).CombinedOutput(); err != nil {
		t.Fatalf("resize2fs: %v\n%s", err, out)
	}
	return img
}

func TestEphemeralLeavesBaseUnchanged(t *testing.T) {
	img := bigImage(t)
	before := fileSum(t, img)
	out, errOut, status := runKbox(t, "image", "-S", img, "--ephemeral", "--",
		"/bin/sh", "-c", "dd if=/dev/zero of=/big bs=1M count=100 2>/dev/null && sync && stat -c %s /big && echo changed > /etc/hostname && cat /etc/hostname")
	if status != 0 || out != "104857600\nchanged\n" {
		t.Fatalf("status %d, out %q, err %s", status, out, errOut)
	}
	if after := fileSum(t, img); after != before {
		t.Errorf("the base image changed: %s -> %s", before, after)
	}
	assertCleanImage(t, img)
	// And the next run sees none of it.
	host, _ := exec.Command("debugfs", "-R", "cat /etc/hostname", img).Output()
	out, _, status = runKbox(t, "image", "-S", img, "--ephemeral", "--", "/bin/sh", "-c", "test ! -e /big && cat /etc/hostname")
	if status != 0 || out != string(host) || strings.Contains(out, "changed") {
		t.Errorf("a later run sees the earlier ephemeral run's writes: %d %q", status, out)
	}
}

func TestEphemeralConcurrent(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	var wg sync.WaitGroup
	type res struct {
		out, err string
		status   int
	}
	results := make([]res, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each writes its file, waits for the other to have
			// written, and must see only its own.
			mine := []string{"/one", "/two"}[i]
			o, e, s := runKbox(t, "image", "-S", img, "--ephemeral", "--", "/bin/sh", "-c",
				"echo x > "+mine+" && sleep 2 && ls /one /two 2>/dev/null; true")
			results[i] = res{o, e, s}
		}()
	}
	wg.Wait()
	for i, r := range results {
		want := []string{"/one\n", "/two\n"}[i]
		if r.status != 0 || r.out != want {
			t.Errorf("run %d: status %d, out %q (want %q), err %s", i, r.status, r.out, want, r.err)
		}
	}
	if after := fileSum(t, img); after != before {
		t.Errorf("the base image changed")
	}
}

func TestEphemeralBaseShared(t *testing.T) {
	// While an ephemeral run holds the base (shared lock), a read-write
	// run of it is refused, and a read-only one goes ahead.
	img := copyImage(t, imagePath(t))
	k := startKbox(t, "image", "-S", img, "--ephemeral", "--", "/bin/sleep", "3")
	defer k.Wait()
	// Wait for the ephemeral run's lock on this image's inode (other
	// tests' locks may be listed too).
	var st syscall.Stat_t
	if err := syscall.Stat(img, &st); err != nil {
		t.Fatal(err)
	}
	mark := []byte(":" + strconv.FormatUint(st.Ino, 10) + " ")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile("/proc/locks"); bytes.Contains(b, []byte("FLOCK")) && bytes.Contains(b, mark) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ephemeral run never locked its base image")
		}
	}
	_, errOut, status := runKbox(t, "image", "-S", img, "--", "/bin/true")
	if status != 125 || !strings.Contains(errOut, "already opened") {
		t.Errorf("a read-write run beside an ephemeral one: status %d, %s", status, errOut)
	}
	if _, errOut, status := runKbox(t, "image", "-S", img, "--read-only", "--", "/bin/true"); status != 0 {
		t.Errorf("a read-only run beside an ephemeral one: status %d, %s", status, errOut)
	}
}

func TestSnapshot(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	snap := filepath.Join(t.TempDir(), "out.ext4")
	sums, errOut, status := runKbox(t, "image", "-S", img, "--snapshot", snap, "--", "/bin/sh", "-c",
		"mkdir -p /results && echo snapshot-data > /results/a && rm /etc/hostname && head -c 5000000 /dev/urandom > /results/r && sha256sum /results/r")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	// The 5 MB file the guest wrote, as e2fsprogs reads it from the
	// snapshot.
	r, err := exec.Command("debugfs", "-R", "cat /results/r", snap).Output()
	if err != nil || len(r) != 5000000 || !strings.HasPrefix(sums, sha256Hex(r)) {
		t.Errorf("snapshot's /results/r: %d bytes, %v; guest said %s", len(r), err, sums)
	}
	if after := fileSum(t, img); after != before {
		t.Errorf("the base image changed")
	}
	assertCleanImage(t, snap)
	out, errOut, status := runKbox(t, "image", "-S", snap, "--read-only", "--", "/bin/sh", "-c", "cat /results/a; ls /etc/hostname")
	if status == 0 || out != "snapshot-data\n" || !strings.Contains(errOut, "hostname") {
		t.Errorf("snapshot: status %d out %q err %s", status, out, errOut)
	}
	if _, errOut, status := runKbox(t, "image", "-S", img, "--read-only", "--ephemeral", "--", "/bin/true"); status != 2 || !strings.Contains(errOut, "--ephemeral") {
		t.Errorf("--read-only --ephemeral: status %d %s", status, errOut)
	}
}

var headRE = regexp.MustCompile(`kbox: audit head ([0-9a-f]{64})`)

func TestAuditLog(t *testing.T) {
	img := copyImage(t, imagePath(t))
	imgSum := fileSum(t, img)
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	_, errOut, status := runKbox(t, "image", "-S", img, "--ephemeral", "--audit", log, "--", "/bin/sh", "-c", "/bin/true; /opt/tests/hello 2>/dev/null; exit 4")
	m := headRE.FindStringSubmatch(errOut)
	if status != 4 || m == nil {
		t.Fatalf("status %d, no head: %s", status, errOut)
	}
	head := m[1]
	// The records: run start (argv, image hash), each exec with its
	// program's hash, run end with the status.
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var recs []struct {
		Seq  int            `json:"seq"`
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Seq  int            `json:"seq"`
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		recs = append(recs, r)
	}
	if len(recs) < 4 || recs[0].Type != "run_start" || recs[len(recs)-1].Type != "run_end" {
		t.Fatalf("records: %+v", recs)
	}
	if recs[0].Data["image_sha256"] != imgSum || recs[0].Data["ephemeral"] != true {
		t.Errorf("run_start: %v (image %s)", recs[0].Data, imgSum)
	}
	if st, _ := recs[len(recs)-1].Data["status"].(float64); st != 4 {
		t.Errorf("run_end: %v", recs[len(recs)-1].Data)
	}
	// The program's bytes as e2fsprogs reads them from the image.
	prog, err := exec.Command("debugfs", "-R", "cat /bin/true", img).Output()
	if err != nil || len(prog) == 0 {
		t.Fatal(err)
	}
	progSum := sha256Hex(prog)
	var sawTrue bool
	for _, r := range recs {
		if r.Type == "exec" && r.Data["path"] == "/bin/true" {
			sawTrue = true
			if r.Data["sha256"] != progSum {
				t.Errorf("exec /bin/true: hash %v, the file's is %s", r.Data["sha256"], progSum)
			}
			if argv, _ := r.Data["argv"].([]any); len(argv) != 1 || argv[0] != "/bin/true" {
				t.Errorf("exec /bin/true: argv %v", r.Data["argv"])
			}
		}
	}
	if !sawTrue {
		t.Errorf("no exec record of /bin/true: %s", b)
	}
	out, errOut, status := runKbox(t, "audit", "verify", log, "--head", head)
	if status != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("verify: %d %s %s", status, out, errOut)
	}
	// A second run appends to the same chain; the first head still
	// verifies, as a record inside it.
	_, errOut, _ = runKbox(t, "image", "-S", img, "--ephemeral", "--audit", log, "--", "/bin/true")
	head2 := headRE.FindStringSubmatch(errOut)
	if head2 == nil {
		t.Fatalf("second run: %s", errOut)
	}
	for _, h := range []string{head, head2[1]} {
		if out, errOut, status := runKbox(t, "audit", "verify", log, "--head", h); status != 0 {
			t.Errorf("verify --head %s: %d %s %s", h, status, out, errOut)
		}
	}

	// Each kind of tampering is detected, and the record named.
	orig, _ := os.ReadFile(log)
	lines := strings.SplitAfter(strings.TrimSuffix(string(orig), "\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\n")
	}
	join := func(ls []string) string { return strings.Join(ls, "\n") + "\n" }
	cp := func() []string { return append([]string{}, lines...) }
	cases := []struct {
		name, log, head, want string
	}{
		{"edit", join(func() []string {
			l := cp()
			l[1] = strings.Replace(l[1], `"pid":`, `"pid":1`, 1)
			return l
		}()), "", "line 3"},
		{"insert", join(func() []string { l := cp(); return append(l[:2:2], append([]string{l[1]}, l[2:]...)...) }()), "", "line 3"},
		{"remove", join(func() []string { l := cp(); return append(l[:1:1], l[2:]...) }()), "", "line 2"},
		{"reorder", join(func() []string { l := cp(); l[1], l[2] = l[2], l[1]; return l }()), "", "line 2"},
		{"truncate", join(cp()[:len(lines)-1]), head2[1], "truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tampered.jsonl")
			os.WriteFile(p, []byte(c.log), 0o600)
			args := []string{"audit", "verify", p}
			if c.head != "" {
				args = append(args, "--head", c.head)
			}
			_, errOut, status := runKbox(t, args...)
			if status != 1 || !strings.Contains(errOut, c.want) {
				t.Errorf("status %d, %q; want 1 and %q", status, errOut, c.want)
			}
		})
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestKeptOverlay: --overlay DIR keeps the copy-on-write layer across
// runs (kbox mcp's sessions), the base untouched; an overlay left by a
// killed kbox is refused.
func TestKeptOverlay(t *testing.T) {
	img := copyImage(t, imagePath(t))
	before := fileSum(t, img)
	dir := t.TempDir()
	if out, errOut, st := runKbox(t, "image", "-S", img, "--overlay", dir, "--", "/bin/sh", "-c", "echo one > /kept1 && rm /etc/hostname"); st != 0 {
		t.Fatalf("first run: %d %s %s", st, out, errOut)
	}
	out, errOut, st := runKbox(t, "image", "-S", img, "--overlay", dir, "--", "/bin/sh", "-c", "cat /kept1; test -e /etc/hostname || echo gone")
	if st != 0 || out != "one\ngone\n" {
		t.Fatalf("second run: %d %q %s", st, out, errOut)
	}
	if after := fileSum(t, img); after != before {
		t.Errorf("the base changed")
	}
	// Another overlay on the same base sees none of it, at the same time
	// as an ephemeral run.
	if out, _, st := runKbox(t, "image", "-S", img, "--overlay", t.TempDir(), "--", "/bin/sh", "-c", "test -e /kept1 || cat /etc/hostname"); st != 0 || out == "" {
		t.Errorf("a second overlay: %d %q", st, out)
	}
	os.WriteFile(filepath.Join(dir, "busy"), nil, 0o600)
	if _, errOut, st := runKbox(t, "image", "-S", img, "--overlay", dir, "--", "/bin/true"); st != 125 || !strings.Contains(errOut, "did not finish") {
		t.Errorf("a broken overlay: %d %s", st, errOut)
	}
	if _, errOut, st := runKbox(t, "image", "-S", img, "--overlay", dir, "--ephemeral", "--", "/bin/true"); st != 2 {
		t.Errorf("--overlay --ephemeral: %d %s", st, errOut)
	}
}
