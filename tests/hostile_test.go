//go:build lkl

package tests

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileDefault runs a hostile program, written for the test, under
// kbox's default command line (no option at all): it looks for a
// `syscall; ret` sequence in every executable mapping that is not its own
// and calls it to read a host file (tests/guest/local/hostile.c). The
// default tier must confine it, static or dynamic: it reads nothing of
// the host. Where the user opted in to an in-process tier (--trusted, or
// --syscall-mode=trap|rewrite) it gets out, as docs/security.md says; the
// test checks that too, so that it can tell confined from a program that
// found nothing to call.
func TestHostileDefault(t *testing.T) {
	img := imagePath(t)
	progs := buildLocal(t, "hostile")
	var tok [16]byte
	rand.Read(tok[:])
	token := "kbox-hostile-" + hex.EncodeToString(tok[:])
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		opts    []string
		escapes bool
		warns   bool // the "not confined" line on stderr
	}{
		{"default", nil, false, false},
		{"seccomp", []string{"--syscall-mode=seccomp"}, false, false},
		{"auto-trusted", []string{"--trusted"}, true, false},
		{"trap", []string{"--syscall-mode=trap"}, true, true},
		{"rewrite-trusted", []string{"--syscall-mode=rewrite", "--trusted"}, true, false},
	} {
		for _, kind := range []string{"static", "dynamic"} {
			t.Run(c.name+"/"+kind, func(t *testing.T) {
				prog, ok := progs[kind]
				if !ok {
					t.Skipf("SKIP: no %s build of the hostile program (see the test's log)", kind)
				}
				args := append([]string{"image", "-S", img, "--ephemeral", "-b", filepath.Dir(prog) + ":/hostile:ro"}, c.opts...)
				args = append(args, "--", "/hostile/"+filepath.Base(prog), secret)
				out, errOut, status := runKbox(t, args...)
				got := strings.Contains(out, token)
				switch {
				case c.escapes && (!got || status != 0):
					t.Errorf("opted in, the program should reach the host file (else the test cannot tell): status %d\n%s%s", status, out, errOut)
				case !c.escapes && (got || status != 3):
					t.Errorf("the host file was read, or the program did not run: status %d\n%s%s", status, out, errOut)
				}
				if warned := strings.Contains(errOut, "not confined"); warned != c.warns {
					t.Errorf("\"not confined\" warning %v, want %v: %s", warned, c.warns, errOut)
				}
			})
		}
	}
}

// buildLocal compiles tests/guest/local/NAME.c static (musl-gcc, else
// gcc) and dynamic (gcc, against the host's glibc, which the Debian image
// has too) into a directory of its own, to be bound into the guest.
func buildLocal(t *testing.T, name string) map[string]string {
	dir := t.TempDir()
	src := filepath.Join(repoRoot(), "tests", "guest", "local", name+".c")
	inc := "-I" + filepath.Join(repoRoot(), "probe", "guest")
	progs := map[string]string{}
	build := func(kind, cc string, flags ...string) {
		out := filepath.Join(dir, name+"-"+kind)
		args := append([]string{"-O2", "-Wall", inc, "-o", out, src}, flags...)
		if _, err := exec.LookPath(cc); err != nil {
			t.Logf("SKIP (%s %s): no %s", kind, name, cc)
			return
		}
		if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("building %s %s with %s: %v\n%s", kind, name, cc, err, b)
		}
		progs[kind] = out
	}
	static := "musl-gcc"
	if _, err := exec.LookPath(static); err != nil {
		static = "gcc"
	}
	build("static", static, "-static")
	build("dynamic", "gcc")
	return progs
}

// TestWXAlias: the in-process tiers refuse one mapping both writable and
// executable, and allow the dual mapping JITs use (a writable and an
// executable shared view of one memfd), as Linux does: code written
// through the one view runs through the other, each time as written
// (getpid, then getuid: no stale patch of the rewrite tier), the calls
// served as the libc calls are (docs/security.md, "W^X"). Natively and
// in the seccomp tier the single writable-and-executable mapping is
// allowed.
func TestWXAlias(t *testing.T) {
	img := imagePath(t)
	prog := buildLocal(t, "wxalias")["static"]
	if prog == "" {
		t.Skip("SKIP: no static build of wxalias")
	}
	const ok = "alias: getpid and getuid ok; one mapping writable and executable: "
	native, err := exec.Command(prog).CombinedOutput()
	if err != nil || string(native) != ok+"mapped\n" {
		t.Fatalf("natively: %v: %s", err, native)
	}
	for _, c := range []struct{ mode, wx string }{
		{"seccomp", "mapped"}, {"trap", "Permission denied"}, {"rewrite", "Permission denied"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			out, errOut, status := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+c.mode,
				"-b", filepath.Dir(prog)+":/local:ro", "--", "/local/"+filepath.Base(prog))
			if status != 0 || out != ok+c.wx+"\n" {
				t.Errorf("status %d: %s%s", status, out, errOut)
			}
		})
	}
}

// TestGuestEnvNotHostLoader: the guest's environment (--env, an image's
// Env) is the guest's: LD_PRELOAD naming a library that exists on the
// host must not load it into any host process of kbox's (kbox's start-up
// process for the guest, the keeper and the socket binder run outside the
// filter). The library, built for the test, leaves a file when loaded;
// the guest's own loader does not find it in the image, and says so.
func TestGuestEnvNotHostLoader(t *testing.T) {
	img := imagePath(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "loaded")
	src := filepath.Join(dir, "evil.c")
	lib := filepath.Join(dir, "evil.so")
	code := `#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) { close(open("` + mark + `", O_CREAT | O_WRONLY, 0600)); }
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Skipf("SKIP (no C compiler for the test's library: %v: %s)", err, out)
	}
	// The library works: a host program loads it.
	if err := exec.Command("env", "LD_PRELOAD="+lib, "true").Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the test's library does not leave its mark on the host: %v", err)
	}
	os.Remove(mark)
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--env", "LD_PRELOAD="+lib, "--env", "LD_LIBRARY_PATH="+dir, "--", "/bin/echo", "ran")
	if status != 0 || stdout != "ran\n" {
		t.Fatalf("status %d, stdout %q, stderr %s", status, stdout, stderr)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the guest's LD_PRELOAD loaded a host library into a host process of kbox's")
	}
	// Nor can the guest's environment name kbox's own settings: the
	// program run is the one asked for.
	stdout, stderr, status = runKbox(t, "image", "-S", img, "--read-only", "--env", "KBOX_GUEST_EXEC=/bin/false", "--", "/bin/echo", "ran")
	if status != 0 || stdout != "ran\n" {
		t.Errorf("with KBOX_GUEST_EXEC in the guest's environment: status %d, stdout %q, stderr %s", status, stdout, stderr)
	}
}
