package elfload

// Programs loaded by Load and started (package nativerun, in the loadrun
// command, built as PIE like kbox) must do exactly what they do when the
// kernel starts them: same output, same exit status. testdata/auxv.c
// prints its auxv and stack layout, so its output compares the loader's
// initial stack with the kernel's, entry by entry.

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	runDirOnce sync.Once
	runDir     string
	runDirErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if runDir != "" {
		os.RemoveAll(runDir)
	}
	os.Exit(code)
}

// canRun skips where programs cannot be compiled or started here.
func canRun(t *testing.T) {
	t.Helper()
	if os.Getenv("KBOX_EMULATED") != "" {
		t.Skip("SKIP: under qemu-user: programs are not started")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("SKIP: no gcc: loaded programs are not run (apt-get install gcc)")
	}
}

// loadrun builds elfload/internal/loadrun as PIE, once per test binary.
func loadrun(t *testing.T) string {
	t.Helper()
	canRun(t)
	runDirOnce.Do(func() {
		if runDir, runDirErr = os.MkdirTemp("", "elfload-test-"); runDirErr != nil {
			return
		}
		goCmd, err := exec.LookPath("go")
		if err != nil {
			goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		cmd := exec.Command(goCmd, "build", "-buildmode=pie", "-o", filepath.Join(runDir, "loadrun"), "./internal/loadrun")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			runDirErr = errors.New("building loadrun: " + err.Error() + "\n" + string(out))
		}
	})
	if runDirErr != nil {
		t.Fatal(runDirErr)
	}
	return filepath.Join(runDir, "loadrun")
}

// compile builds src with cc and flags into the test's directory; it skips
// when the compiler or the link mode is not available here.
func compile(t *testing.T, src, cc string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("SKIP: no %s", cc)
	}
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	args := append(append([]string{"-O2", "-o", out}, flags...), src)
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Skipf("SKIP: %s %s cannot build here: %v\n%s", cc, strings.Join(flags, " "), err, b)
	}
	return out
}

type runResult struct {
	out    string
	status int
}

func run(t *testing.T, cmd *exec.Cmd) runResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v hangs", cmd.Args)
	}
	if stderr.Len() > 0 {
		t.Logf("%s stderr: %s", filepath.Base(cmd.Args[0]), stderr.String())
	}
	return runResult{stdout.String(), cmd.ProcessState.ExitCode()}
}

// compareRuns runs path with args (args[0] is argv[0]) and env natively,
// then loaded, and wants the same output and status.
func compareRuns(t *testing.T, path string, args, env []string) runResult {
	t.Helper()
	lr := loadrun(t)
	native := &exec.Cmd{Path: path, Args: args, Env: env}
	nat := run(t, native)
	loaded := exec.Command(lr, append([]string{"-argv0", args[0], "-execfn", path, path}, args[1:]...)...)
	loaded.Env = env
	got := run(t, loaded)
	if got != nat {
		t.Errorf("%s %q:\nnative (status %d):\n%s\nloaded (status %d):\n%s", path, args[1:], nat.status, nat.out, got.status, got.out)
		if a, b := strings.Split(nat.out, "\n"), strings.Split(got.out, "\n"); len(a) == len(b) {
			for i := range a {
				if a[i] != b[i] {
					t.Errorf("first difference: native %q, loaded %q", a[i], b[i])
					break
				}
			}
		}
	}
	return got
}

var guestEnv = []string{"PATH=/usr/bin:/bin", "KBOX_TEST=one two", "EMPTY="}

// TestAuxvMatchesNative: testdata/auxv.c built every way the compilers
// here allow (musl and glibc; static, static-pie, dynamic PIE and non-PIE)
// sees the same argc, argv, envp, auxv and stack layout loaded as when
// the kernel starts it.
func TestAuxvMatchesNative(t *testing.T) {
	src, err := filepath.Abs("testdata/auxv.c")
	if err != nil {
		t.Fatal(err)
	}
	builds := []struct {
		name, cc string
		flags    []string
	}{
		{"musl static", "musl-gcc", []string{"-static"}},
		{"musl dynamic", "musl-gcc", nil},
		{"glibc dynamic PIE", "gcc", []string{"-fPIE", "-pie"}},
		{"glibc dynamic non-PIE", "gcc", []string{"-fno-pie", "-no-pie"}},
		{"glibc static-pie", "gcc", []string{"-static-pie"}},
		{"glibc static", "gcc", []string{"-static"}},
	}
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			bin := compile(t, src, b.cc, b.flags...)
			if f, err := elf.Open(bin); err == nil {
				for _, p := range f.Progs {
					if p.Type == elf.PT_INTERP {
						interp, _ := readInterp(bin)
						if _, err := os.Stat(interp); err != nil {
							t.Skipf("SKIP: %s needs %s, not installed", b.name, interp)
						}
					}
				}
				f.Close()
			}
			got := compareRuns(t, bin, []string{"auxv", "first arg", ""}, guestEnv)
			if got.status != 3 || !strings.Contains(got.out, "AT_PHDR") {
				t.Errorf("auxv printed (status %d):\n%s", got.status, got.out)
			}
		})
	}
}

func readInterp(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	info, err := Inspect(b, hostTestMachine())
	if err != nil {
		return "", err
	}
	return info.Interp, nil
}

// TestHostProgramsMatchNative: the host's own dynamic glibc programs, with
// arguments and environment.
func TestHostProgramsMatchNative(t *testing.T) {
	cases := []struct {
		path string
		args []string
	}{
		{"/bin/true", []string{"true"}},
		{"/bin/false", []string{"false"}},
		{"/bin/echo", []string{"echo", "hello", "from", "the loader"}},
		{"/usr/bin/env", []string{"env"}},
		{"/usr/bin/env", []string{"env", "-u", "PATH", "X=y", "/bin/echo", "nested"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			if _, err := os.Stat(c.path); err != nil {
				t.Skipf("SKIP: no %s", c.path)
			}
			compareRuns(t, c.path, c.args, guestEnv)
		})
	}
}

// TestHelloMatchesNative: tests/guest/hello.c, musl static as in the
// image, and the other link modes.
func TestHelloMatchesNative(t *testing.T) {
	src, err := filepath.Abs("../tests/guest/hello.c")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		name, cc string
		flags    []string
	}{
		{"musl static", "musl-gcc", []string{"-static"}},
		{"glibc static-pie", "gcc", []string{"-static-pie"}},
		{"glibc non-PIE", "gcc", []string{"-no-pie"}},
	} {
		t.Run(b.name, func(t *testing.T) {
			bin := compile(t, src, b.cc, b.flags...)
			if got := compareRuns(t, bin, []string{"hello"}, nil); got.out != "hello from kbox guest\n" || got.status != 0 {
				t.Errorf("hello: %+v", got)
			}
		})
	}
}

// TestHandMadeELFRuns: the test ELF (no libc: two syscalls), ET_DYN and
// ET_EXEC. Its status is 42 only if the bss after the data's file part was
// zeroed.
func TestHandMadeELFRuns(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("SKIP: the hand-made program is x86_64 code")
	}
	loadrun(t)
	for _, e := range []*testELF{
		{typ: elf.ET_DYN, machine: elf.EM_X86_64},
		{typ: elf.ET_EXEC, machine: elf.EM_X86_64, base: 0x20000000},
	} {
		bin := filepath.Join(t.TempDir(), "handmade")
		if err := os.WriteFile(bin, e.build(), 0o755); err != nil {
			t.Fatal(err)
		}
		got := compareRuns(t, bin, []string{"handmade"}, nil)
		if got.out != string(tMessage) || got.status != 42 {
			t.Errorf("%v: %+v", e.typ, got)
		}
	}
}

// TestNonPIEOverTheTestBinary: this test binary is not PIE (go test's
// default on amd64): a non-PIE program at its address gets the clear
// error, and nothing of it stays mapped.
func TestNonPIEOverTheTestBinary(t *testing.T) {
	canRun(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	typ := f.Type
	f.Close()
	if typ != elf.ET_EXEC {
		t.Skip("SKIP: this test binary is PIE: no fixed address to collide with")
	}
	bin := compile(t, mustAbs(t, "../tests/guest/hello.c"), "gcc", "-static", "-no-pie")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	leakCheck(t, "non-PIE", func() {
		_, err := Load(&Spec{Prog: Image{Name: "hello", Bytes: b}, Argv: []string{"hello"}})
		if err == nil || !strings.Contains(err.Error(), "cannot load hello at 0x400000: address in use") {
			t.Errorf("loading a non-PIE program over the test binary: %v", err)
		}
	})
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
