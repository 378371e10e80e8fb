//go:build lkl

package tests

import (
	"archive/tar"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// kbox pull (docs/images.md) against Debian's docker-registry on
// 127.0.0.1 (registry_test.go), each test with a cache of its own.

// pullEnv is kbox's environment for a pull: its own cache, and no Docker
// config unless the test gives one.
func pullEnv(t testing.TB, extra ...string) (kboxEnv, string) {
	cache := filepath.Join(t.TempDir(), "cache")
	return kboxEnv{vars: append([]string{"XDG_CACHE_HOME=" + cache, "DOCKER_CONFIG=" + t.TempDir()}, extra...)}, filepath.Join(cache, "kbox")
}

func TestPullLayers(t *testing.T) {
	base := startRegistry(t)
	layers := layeredImage(t)
	pushImage(t, base, "test/layers", "v1", testImage{layers: tarLayers(t, layers), config: map[string]any{}})
	env, cache := pullEnv(t)
	out := filepath.Join(t.TempDir(), "out.ext4")
	ref := strings.TrimPrefix(base, "http://") + "/test/layers:v1"
	so, se, status := runKboxEnv(t, env, "pull", ref, "-o", out)
	if status != 0 {
		t.Fatalf("kbox pull: %d\n%s\n%s", status, so, se)
	}
	for i := 1; i <= 3; i++ {
		if want := "layer " + string(rune('0'+i)) + "/3 sha256:"; !strings.Contains(se, want) || !strings.Contains(se, "downloaded") {
			t.Errorf("no progress line %q...downloaded in:\n%s", want, se)
		}
	}
	checkLayered(t, out, layers)
	// Again: every layer from the cache.
	so, se, status = runKboxEnv(t, env, "pull", ref)
	if status != 0 || strings.Count(se, ", cached") != 3 {
		t.Errorf("second pull: status %d, want 3 layers cached:\n%s%s", status, so, se)
	}
	// --prune keeps what a pulled image uses, removes the rest.
	stray := filepath.Join(cache, "blobs", "sha256", strings.Repeat("ab", 32))
	os.WriteFile(stray, []byte("stray"), 0o644)
	before, _ := filepath.Glob(filepath.Join(cache, "blobs", "sha256", "*"))
	if _, se, status := runKboxEnv(t, env, "pull", "--prune"); status != 0 || !strings.Contains(se, "removed 1 blobs") {
		t.Errorf("--prune: %d %s", status, se)
	}
	after, _ := filepath.Glob(filepath.Join(cache, "blobs", "sha256", "*"))
	if len(after) != len(before)-1 || fileExists(stray) {
		t.Errorf("--prune: %d blobs before, %d after (want one less, the stray one)", len(before), len(after))
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// markerImage is busybox with /marker saying which image this is.
func markerImage(t *testing.T, arch, marker string) testImage {
	return testImage{arch: arch, config: map[string]any{}, layers: tarLayers(t, [][]testEntry{busyboxEntries(t),
		{{name: "./marker", typ: tar.TypeReg, mode: 0o644, data: marker + "\n"}}})}
}

// TestPullPlatform: an index is resolved to the host's platform, or to
// --platform's; a platform the index lacks is a clear error.
func TestPullPlatform(t *testing.T) {
	base := startRegistry(t)
	host := strings.TrimPrefix(base, "http://")
	other := "riscv64"
	pushImage(t, base, "test/multi", "v1", markerImage(t, other, "other"), markerImage(t, "", "host"))
	pushImage(t, base, "test/foreign", "v1", markerImage(t, other, "other"), markerImage(t, "s390x", "s390x"))
	env, _ := pullEnv(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.ext4")
	if so, se, status := runKboxEnv(t, env, "pull", host+"/test/multi:v1", "-o", out); status != 0 {
		t.Fatalf("pull: %d %s %s", status, so, se)
	}
	if so, se, _ := runKbox(t, "image", "-S", out, "--", "/bin/cat", "/marker"); so != "host\n" {
		t.Errorf("default platform: /marker %q, want host (stderr %s)", so, se)
	}
	if so, se, status := runKboxEnv(t, env, "pull", "--platform", "linux/"+other, host+"/test/multi:v1", "-o", out); status != 0 {
		t.Fatalf("pull --platform: %d %s %s", status, so, se)
	}
	if got, _ := debugfsCat(t, out, "/marker"); got != "other\n" {
		t.Errorf("--platform linux/%s: /marker %q, want other", other, got)
	}
	os.Remove(out)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--platform", "linux/mips64le", host + "/test/multi:v1"}, "no image for linux/mips64le: the index has linux/" + other},
		{[]string{host + "/test/foreign:v1"}, "choose one with --platform"},
	} {
		so, se, status := runKboxEnv(t, env, append(append([]string{"pull"}, c.args...), "-o", out)...)
		if status != 125 || !strings.Contains(se, c.want) || fileExists(out) {
			t.Errorf("pull %q: status %d, stderr %q; want 125, %q and no %s (stdout %q)", c.args, status, se, c.want, out, so)
		}
	}
}

// TestPullAuth: a registry that wants a bearer token from its token
// service, anonymously or with Docker's config.json credentials.
func TestPullAuth(t *testing.T) {
	base := startRegistry(t)
	pushImage(t, base, "test/auth", "v1", markerImage(t, "", "auth"))
	p := newRegProxy(t, base)
	p.bearer = true
	ref := p.host() + "/test/auth:v1"
	dir := t.TempDir()
	out := filepath.Join(dir, "out.ext4")
	env, _ := pullEnv(t)
	if so, se, status := runKboxEnv(t, env, "pull", ref, "-o", out); status != 0 {
		t.Fatalf("anonymous token: %d %s %s", status, so, se)
	}
	if got, _ := debugfsCat(t, out, "/marker"); got != "auth\n" {
		t.Errorf("/marker %q", got)
	}
	os.Remove(out)
	// The token service wants credentials: none is a clear error.
	p.user, p.pass = "kbox", "s3cret"
	env, _ = pullEnv(t)
	so, se, status := runKboxEnv(t, env, "pull", ref, "-o", out)
	if status != 125 || !strings.Contains(se, "token service") || !strings.Contains(se, "401") || fileExists(out) {
		t.Errorf("no credentials: status %d, stderr %q (stdout %q); want 125 and a token service 401", status, se, so)
	}
	// Docker's config.json has them.
	cfgDir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("kbox:s3cret"))
	os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(`{"auths":{"`+p.host()+`":{"auth":"`+auth+`"}}}`), 0o600)
	env.vars = append(env.vars, "DOCKER_CONFIG="+cfgDir)
	if so, se, status := runKboxEnv(t, env, "pull", ref, "-o", out); status != 0 || !fileExists(out) {
		t.Errorf("config.json credentials: %d %s %s", status, so, se)
	}
	os.Remove(out)
	// A credential helper named by config.json (credsStore) has them, and
	// wins over a wrong auths entry, as in Docker.
	helperDir, helperCfg := t.TempDir(), t.TempDir()
	helper := "#!/bin/sh\ntest \"$1\" = get || exit 3\nread server\n[ \"$server\" = \"" + p.host() +
		"\" ] || exit 1\necho '{\"ServerURL\":\"'$server'\",\"Username\":\"kbox\",\"Secret\":\"s3cret\"}'\n"
	os.WriteFile(filepath.Join(helperDir, "docker-credential-kboxtest"), []byte(helper), 0o755)
	wrong := base64.StdEncoding.EncodeToString([]byte("kbox:wrong"))
	os.WriteFile(filepath.Join(helperCfg, "config.json"), []byte(`{"credsStore":"kboxtest","auths":{"`+p.host()+`":{"auth":"`+wrong+`"}}}`), 0o600)
	henv, _ := pullEnv(t, "DOCKER_CONFIG="+helperCfg, "PATH="+helperDir+":"+os.Getenv("PATH"))
	if so, se, status := runKboxEnv(t, henv, "pull", ref, "-o", out); status != 0 || !fileExists(out) {
		t.Errorf("credential helper: %d %s %s", status, so, se)
	}
	os.Remove(out)
	// A 401 with no way to a token, and a registry answering 500.
	p.noChallenge = true
	if _, se, status := runKboxEnv(t, env, "pull", ref, "-o", out); status != 125 || !strings.Contains(se, "no way to a token") || fileExists(out) {
		t.Errorf("401 without a challenge: status %d, stderr %q", status, se)
	}
	p.status = 500
	if _, se, status := runKboxEnv(t, env, "pull", ref, "-o", out); status != 125 || !strings.Contains(se, "500 Internal Server Error") || fileExists(out) {
		t.Errorf("500: status %d, stderr %q", status, se)
	}
	if _, se, status := runKboxEnv(t, env, "pull", "Bad/Ref", "-o", out); status != 2 || !strings.Contains(se, "bad image reference") {
		t.Errorf("bad reference: status %d, stderr %q", status, se)
	}
}

// TestPullInterrupted: a layer whose download the registry cuts is kept
// as a partial download, and the next pull resumes it; a layer whose
// bytes do not match its digest is deleted, never kept as complete.
func TestPullInterrupted(t *testing.T) {
	base := startRegistry(t)
	im := markerImage(t, "", "resumed")
	pushImage(t, base, "test/resume", "v1", im)
	_, _, layers := im.blobs(t)
	big := digestOf(layers[0].data) // busybox, gzipped
	p := newRegProxy(t, base)
	p.dropDigest, p.dropAfter = big, int64(len(layers[0].data)/2)
	ref := p.host() + "/test/resume:v1"
	env, cache := pullEnv(t)
	out := filepath.Join(t.TempDir(), "out.ext4")
	blobPath := filepath.Join(cache, "blobs", "sha256", strings.TrimPrefix(big, "sha256:"))
	so, se, status := runKboxEnv(t, env, "pull", ref, "-o", out)
	if status != 125 || !strings.Contains(se, "download interrupted") || fileExists(out) || fileExists(blobPath) {
		t.Fatalf("cut download: status %d, stderr %q (stdout %q); want 125, no image, no complete blob", status, se, so)
	}
	if fi, err := os.Stat(blobPath + ".partial"); err != nil || fi.Size() == 0 {
		t.Fatalf("no partial download kept: %v", err)
	}
	so, se, status = runKboxEnv(t, env, "pull", ref, "-o", out)
	if status != 0 || !strings.Contains(se, "resumed at") {
		t.Fatalf("second pull: status %d, stderr %q; want it resumed", status, se)
	}
	if len(p.ranges) == 0 {
		t.Error("the second pull asked for no Range")
	}
	if got, _ := debugfsCat(t, out, "/marker"); got != "resumed\n" {
		t.Errorf("/marker %q", got)
	}
	// Digest mismatch.
	im2 := markerImage(t, "", "corrupt")
	pushImage(t, base, "test/corrupt", "v1", im2)
	_, _, layers2 := im2.blobs(t)
	bad := digestOf(layers2[1].data)
	p.corrupt = bad
	env2, cache2 := pullEnv(t)
	out2 := filepath.Join(t.TempDir(), "out.ext4")
	so, se, status = runKboxEnv(t, env2, "pull", p.host()+"/test/corrupt:v1", "-o", out2)
	badPath := filepath.Join(cache2, "blobs", "sha256", strings.TrimPrefix(bad, "sha256:"))
	if status != 125 || !strings.Contains(se, "digest mismatch") || fileExists(out2) || fileExists(badPath) || fileExists(badPath+".partial") {
		t.Errorf("corrupt blob: status %d, stderr %q (stdout %q); want 125, a digest mismatch, no image and nothing kept", status, se, so)
	}
	if b, err := exec.Command("find", filepath.Dir(out2)).Output(); err == nil && strings.Count(string(b), "\n") != 1 {
		t.Errorf("files left beside the output: %s", b)
	}
}

// debianLayers downloads Debian packages (apt-get download, cached per
// machine under $TMPDIR/kbox-test-debs) and returns each one's file tree
// (dpkg-deb --fsys-tarfile) as a layer, or skips loudly.
func debianLayers(t *testing.T, pkgs ...string) [][]byte {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "kbox-test-debs")
	os.MkdirAll(dir, 0o755)
	var layers [][]byte
	for _, p := range pkgs {
		debs, _ := filepath.Glob(filepath.Join(dir, p+"_*.deb"))
		if len(debs) == 0 {
			cmd := exec.Command("apt-get", "download", p)
			cmd.Dir = dir
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Skipf("SKIP (needs Debian's %s: apt-get download failed, no mirror?): %v\n%s", p, err, lastLines(string(b), 3))
			}
			debs, _ = filepath.Glob(filepath.Join(dir, p+"_*.deb"))
		}
		if len(debs) == 0 {
			t.Skipf("SKIP (apt-get download %s made no %s_*.deb)", p, p)
		}
		b, err := exec.Command("dpkg-deb", "--fsys-tarfile", debs[0]).Output()
		if err != nil {
			t.Fatalf("dpkg-deb --fsys-tarfile %s: %v", debs[0], err)
		}
		layers = append(layers, b)
	}
	return layers
}

// TestPullDebianPython: an image of Debian's busybox-static and python3
// packages, a layer per package, pushed, pulled and run: python3 -c by
// the image's Cmd, busybox sh by the command line.
func TestPullDebianPython(t *testing.T) {
	base := startRegistry(t)
	layers := debianLayers(t, "libc6", "libgcc-s1", "zlib1g", "libexpat1", "libpython3.11-minimal", "python3.11-minimal", "python3-minimal", "busybox-static")
	pushImage(t, base, "test/python", "3", testImage{layers: layers, config: map[string]any{
		"Env": []string{"PATH=/usr/bin:/bin", "GREETING=hello"},
		"Cmd": []string{"python3", "-c", "import os, sys; print('python', sys.version_info[0], os.environ['GREETING'], os.getcwd())"},
	}})
	env, _ := pullEnv(t)
	out := filepath.Join(t.TempDir(), "python.ext4")
	if so, se, status := runKboxEnv(t, env, "pull", strings.TrimPrefix(base, "http://")+"/test/python:3", "-o", out); status != 0 {
		t.Fatalf("pull: %d %s %s", status, so, se)
	}
	assertCleanImage(t, out)
	if so, se, status := runKbox(t, "image", "-S", out); status != 0 || so != "python 3 hello /\n" {
		t.Errorf("python3 by the image's Cmd: status %d, stdout %q, stderr %s", status, so, se)
	}
	if so, se, status := runKbox(t, "image", "-S", out, "--", "busybox", "sh", "-c", "echo $GREETING from $0; id -u"); status != 0 || so != "hello from sh\n0\n" {
		t.Errorf("busybox sh: status %d, stdout %q, stderr %s", status, so, se)
	}
}

// TestImageDockerRef: kbox image -S docker://REF pulls into the cache,
// runs on a temporary image with the image's config, and removes it.
func TestImageDockerRef(t *testing.T) {
	base := startRegistry(t)
	im := markerImage(t, "", "docker-ref")
	im.config = map[string]any{"Cmd": []string{"/bin/cat", "/marker"}}
	pushImage(t, base, "test/run", "v1", im)
	env, cache := pullEnv(t)
	tmp := t.TempDir()
	env.vars = append(env.vars, "TMPDIR="+tmp)
	ref := "docker://" + strings.TrimPrefix(base, "http://") + "/test/run:v1"
	so, se, status := runKboxEnv(t, env, "image", "-S", ref)
	if status != 0 || so != "docker-ref\n" {
		t.Errorf("kbox image -S %s: status %d, stdout %q, stderr %s", ref, status, so, se)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "kbox-docker-*")); len(left) != 0 {
		t.Errorf("temporary image left behind: %v", left)
	}
	if blobs, _ := filepath.Glob(filepath.Join(cache, "blobs", "sha256", "*")); len(blobs) != 3 {
		t.Errorf("the cache holds %d blobs, want 3 (two layers, the config)", len(blobs))
	}
	if _, se, status := runKboxEnv(t, env, "image", "-S", "docker://Bad/Ref"); status != 2 || !strings.Contains(se, "bad image reference") {
		t.Errorf("bad reference: status %d, stderr %q", status, se)
	}
}

// TestPullProgressTerminal: on a terminal (a pty from script(1)) each
// layer's download is a bar redrawn in place, then cleared for its line;
// TestPullLayers covers the plain lines of a pipe.
func TestPullProgressTerminal(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("SKIP (needs script(1) for a pty): apt-get install bsdutils")
	}
	base := startRegistry(t)
	pushImage(t, base, "test/bar", "v1", markerImage(t, "", "bar"))
	env, _ := pullEnv(t)
	out := filepath.Join(t.TempDir(), "out.ext4")
	cmd := exec.Command("script", "-qefc", kboxBin(t)+" pull "+strings.TrimPrefix(base, "http://")+"/test/bar:v1 -o "+out, "/dev/null")
	cmd.Env = append(os.Environ(), env.vars...)
	b, err := cmd.CombinedOutput()
	so := string(b)
	if err != nil || !fileExists(out) {
		t.Fatalf("pull on a pty: %v\n%q", err, so)
	}
	for i := 1; i <= 2; i++ {
		bar := regexp.MustCompile(`\rkbox: layer ` + string(rune('0'+i)) + `/2 sha256:[0-9a-f]+ \[[= ]{30}\] [0-9.]+ MB / [0-9.]+ MB`)
		if !bar.MatchString(so) {
			t.Errorf("no progress bar for layer %d/2 in %q", i, so)
		}
	}
	if strings.Count(so, "\r\x1b[K") != 2 || strings.Count(so, ", downloaded") != 2 {
		t.Errorf("want each bar cleared, then its line (2 layers): %q", so)
	}
}
