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
// and calls it to read a host file (tests/guest/hostile/hostile.c). The
// default tier must confine it, static or dynamic: it reads nothing of
// the host. Where the user opted in to an in-process tier (--trusted, or
// --syscall-mode=trap|rewrite) it gets out, as docs/security.md says; the
// test checks that too, so that it can tell confined from a program that
// found nothing to call.
func TestHostileDefault(t *testing.T) {
	img := imagePath(t)
	progs := buildHostile(t)
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

// buildHostile compiles the hostile program static (musl-gcc, else gcc)
// and dynamic (gcc, against the host's glibc, which the Debian image has
// too) into a directory of its own, bound into the guest.
func buildHostile(t *testing.T) map[string]string {
	dir := t.TempDir()
	src := filepath.Join(repoRoot(), "tests", "guest", "hostile", "hostile.c")
	inc := "-I" + filepath.Join(repoRoot(), "probe", "guest")
	progs := map[string]string{}
	build := func(kind, cc string, flags ...string) {
		out := filepath.Join(dir, "gadget-"+kind)
		args := append([]string{"-O2", "-Wall", inc, "-o", out, src}, flags...)
		if _, err := exec.LookPath(cc); err != nil {
			t.Logf("SKIP (%s hostile program): no %s", kind, cc)
			return
		}
		if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("building the %s hostile program with %s: %v\n%s", kind, cc, err, b)
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
