package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestForkSyscall(t *testing.T) {
	cases := []struct {
		name  string
		code  []byte
		clone bool
		want  bool
	}{
		{"fork", []byte{0xB8, 57, 0, 0, 0, 0x0F, 0x05}, false, true},
		{"execve via rax", []byte{0x48, 0xC7, 0xC0, 59, 0, 0, 0, 0x0F, 0x05}, false, true},
		{"getpid", []byte{0xB8, 39, 0, 0, 0, 0x0F, 0x05}, false, false},
		{"clone via al, counted", []byte{0x31, 0xC0, 0xB0, 56, 0x0F, 0x05}, true, true},
		{"clone via al, threads", []byte{0x31, 0xC0, 0xB0, 56, 0x0F, 0x05}, false, false},
		{"number lost at a jump", []byte{0xB8, 57, 0, 0, 0, 0xEB, 0x00, 0x0F, 0x05}, false, false},
		{"number from a register", []byte{0x89, 0xF8, 0x0F, 0x05}, false, false},
	}
	for _, c := range cases {
		if _, got := forkSyscall(c.code, c.clone); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTierChoiceRefusals(t *testing.T) {
	noLib := func(string) (io.ReaderAt, error) { return nil, errors.New("none") }
	cases := []struct {
		command string
		prog    []byte
		want    string
		why     string
	}{
		{"/bin/sh", nil, "seccomp", "shell"},
		{"bash", nil, "seccomp", "shell"},
		{"/usr/bin/env", nil, "seccomp", "launcher"},
		{"/opt/x", []byte("#!/bin/sh\n"), "seccomp", "not an ELF"},
		{"/opt/y", []byte{0x7f, 'E', 'L', 'F'}, "seccomp", "not an ELF"},
	}
	for _, c := range cases {
		mode, why := tierChoice(c.command, bytes.NewReader(c.prog), noLib)
		if mode != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: %s (%s), want %s (%s)", c.command, mode, why, c.want, c.why)
		}
	}
}

// TestTierChoiceGo: a Go program that can start processes (os/exec) goes
// to the seccomp tier, stripped or not, static or with cgo's
// interpreter; one that cannot stays in the rewrite tier. Go forks and
// execs with its own syscalls, which the code scan and the imports miss.
func TestTierChoiceGo(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("SKIP: no go tool: %v", err)
	}
	dir := t.TempDir()
	src := map[string]string{
		"spawn": "package main\nimport (\"os\"; \"os/exec\")\nfunc main() { exec.Command(\"/bin/true\").Run(); os.Exit(0) }\n",
		"plain": "package main\nimport \"fmt\"\nfunc main() { fmt.Println(\"hi\") }\n",
	}
	noLib := func(string) (io.ReaderAt, error) { return nil, errors.New("none") }
	for name, code := range src {
		d := filepath.Join(dir, name)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "main.go"), []byte(code), 0o644)
		os.WriteFile(filepath.Join(d, "go.mod"), []byte("module "+name+"\ngo 1.21\n"), 0o644)
		for _, flags := range [][]string{nil, {"-ldflags=-s -w"}} {
			bin := filepath.Join(d, "bin")
			cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), ".")...)
			// x86_64 programs (auto analyses those), whatever GOARCH the
			// test runs under (make test-arm64 sets arm64).
			cmd.Dir, cmd.Env = d, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOOS=linux", "GOARCH=amd64")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build %s: %v\n%s", name, err, out)
			}
			b, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"spawn": "seccomp", "plain": "rewrite"}[name]
			if mode, why := tierChoice("/opt/"+name, bytes.NewReader(b), noLib); mode != want {
				t.Errorf("%s %v: %s (%s), want %s", name, flags, mode, why, want)
			}
		}
	}
}

func TestMayRunInProcess(t *testing.T) {
	cases := []struct {
		args []string
		want bool
	}{
		{[]string{"image", "-S", "a.ext4", "--syscall-mode=trap"}, true},
		{[]string{"image", "-S", "a.ext4", "--syscall-mode=rewrite"}, true},
		{[]string{"image", "-S", "a.ext4", "--syscall-mode", "rewrite", "--", "/bin/true"}, true},
		{[]string{"image", "-S", "a.ext4", "--syscall-mode", "trap"}, true},
		{[]string{"image", "-S", "a.ext4", "--trusted"}, true},
		{[]string{"image", "-S", "a.ext4"}, false},
		{[]string{"image", "-S", "a.ext4", "--syscall-mode=seccomp"}, false},
		{[]string{"image", "-S", "a.ext4", "--syscall-mode", "seccomp"}, false},
		{[]string{"image", "-S", "a.ext4", "--", "prog", "--trusted", "--syscall-mode=trap"}, false},
		{[]string{"image", "-S", "a.ext4", "--syscall-mode"}, false},
	}
	for _, c := range cases {
		if got := mayRunInProcess(c.args); got != c.want {
			t.Errorf("mayRunInProcess(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
