//go:build lkl

package tests

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Bad programs given to kbox, or exec'd by a guest: each gets a clear
// error and the shell's statuses (126: found but cannot run, 127: not
// found), never a crash, hang or a guest killed half-way.
func TestBadPrograms(t *testing.T) {
	cc, err := exec.LookPath("musl-gcc")
	if err != nil {
		t.Skip("SKIP: musl-gcc missing (apt-get install musl-tools): cannot build the ELF to corrupt")
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if out, err := exec.Command(cc, "-static", "-O2", "-o", good, "guest/hello.c").CombinedOutput(); err != nil {
		t.Fatalf("musl-gcc: %v\n%s", err, out)
	}
	elf, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	phoff := le.Uint64(elf[32:])
	phnum := int(le.Uint16(elf[56:]))
	// loads returns the file offsets of the PT_LOAD headers.
	var loads []int
	for i := 0; i < phnum; i++ {
		h := int(phoff) + i*56
		if le.Uint32(elf[h:]) == 1 {
			loads = append(loads, h)
		}
	}
	if len(loads) < 2 {
		t.Fatalf("hello has %d PT_LOAD segments, want 2 or more", len(loads))
	}
	mutate := func(f func(b []byte)) []byte {
		b := append([]byte(nil), elf...)
		f(b)
		return b
	}
	progs := map[string][]byte{
		"empty":     nil,
		"truncated": elf[:40],
		"bad-phnum": mutate(func(b []byte) { le.PutUint16(b[56:], 0) }),
		"phdrs-out": mutate(func(b []byte) { le.PutUint64(b[32:], uint64(len(b))-8) }),
		// the second loadable segment at the address of the first
		"overlap": mutate(func(b []byte) {
			le.PutUint64(b[loads[1]+16:], le.Uint64(b[loads[0]+16:]))
			le.PutUint64(b[loads[1]+24:], le.Uint64(b[loads[0]+24:]))
			le.PutUint64(b[loads[1]+8:], le.Uint64(b[loads[0]+8:]))
		}),
		"huge-memsz":    mutate(func(b []byte) { le.PutUint64(b[loads[len(loads)-1]+40:], 1<<62) }),
		"wrong-machine": mutate(func(b []byte) { le.PutUint16(b[18:], 183) }),
		"self-shebang":  []byte("#!/bad/self-shebang\n"),
		"loop-a":        []byte("#!/bad/loop-b\n"),
		"loop-b":        []byte("#!/bad/loop-a\n"),
		"no-interp":     []byte("#!/no/such/interpreter\necho never\n"),
	}
	for name, b := range progs {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img := imagePath(t)
	bind := dir + ":/bad:ro"
	const enoexec, eloop, enoent = "errno 8 ", "errno 40 ", "errno 2 "
	// What a guest's execve gets: Linux's errno, and ENOEXEC where Linux
	// would kill the process after the point of no return (overlapping
	// segments, a huge p_memsz: SIGSEGV natively, checked here by hand).
	want := map[string][]string{
		"empty": {enoexec}, "truncated": {enoexec}, "bad-phnum": {enoexec}, "phdrs-out": {enoexec},
		"overlap": {enoexec}, "huge-memsz": {enoexec}, "wrong-machine": {enoexec},
		"self-shebang": {eloop}, "loop-a": {eloop, enoent}, "loop-b": {eloop, enoent}, "no-interp": {enoent},
	}
	for name := range progs {
		name := name
		t.Run(name, func(t *testing.T) {
			// kbox's own command: one line of error, 126 or 127.
			_, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "-b", bind, "--", "/bad/"+name)
			if st != 126 && st != 127 {
				t.Errorf("kbox -- /bad/%s: status %d, want 126 or 127; stderr %q", name, st, stderr)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("want one line of error, got %q", stderr)
			}
			// execve'd by a guest program, which survives to report the
			// errno.
			out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "-b", bind, "--", "/opt/tests/execerr", "/bad/"+name)
			ok := false
			for _, w := range want[name] {
				ok = ok || strings.Contains(out, w)
			}
			if !ok || (st != 126 && st != 127) {
				t.Errorf("execerr /bad/%s: status %d, output %q, want one of %q\nstderr %q", name, st, out, want[name], stderr)
			}
		})
	}
	if out, _ := exec.Command(good).Output(); !strings.Contains(string(out), "hello") {
		t.Fatalf("the uncorrupted program does not run natively: %q", out)
	}
}

// TestProgramNames: programs whose names are those of the seccomp tier's
// own entries in its staging directory run as any other (the binder's
// socket root was "sock" there, the script interpreters' links "i/": a
// program named "sock" got EACCES, one named "i" too once a script had
// run). A static program and a script under each name, from a bind, by
// path and through PATH, after a script has run.
func TestProgramNames(t *testing.T) {
	img := imagePath(t)
	dir := t.TempDir()
	for _, n := range []string{"sock", "i", "p", "e"} {
		dumpFromImageTo(t, img, "/opt/tests/hello", filepath.Join(dir, n))
		if err := os.WriteFile(filepath.Join(dir, n+".sh"), []byte("#!/bin/sh\necho script "+n+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := "PATH=/x:$PATH; for n in sock i p e; do /x/$n.sh; /x/$n; $n; $n.sh; done"
	out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode=seccomp", "-b", dir+":/x:ro", "--", "/bin/sh", "-c", script)
	if st != 0 || stderr != "" {
		t.Errorf("status %d\nstdout: %s\nstderr: %s", st, out, stderr)
	}
	for _, n := range []string{"sock", "i", "p", "e"} {
		if strings.Count(out, "script "+n+"\n") != 2 {
			t.Errorf("the script %s.sh did not run twice:\n%s\nstderr: %s", n, out, stderr)
		}
	}
	if c := strings.Count(out, "hello from kbox guest\n"); c != 8 {
		t.Errorf("the programs ran %d times, want 8:\n%s\nstderr: %s", c, out, stderr)
	}
}

// TestProgramRewritten: a program run, then rewritten in place (same
// inode) or replaced, runs as it is now. kbox keeps what it learned of a
// program it ran (its inspection, a sealed copy) by device, inode, size
// and change time, and does not read it again while they stay.
func TestProgramRewritten(t *testing.T) {
	script := "cp /opt/tests/hello /tmp/p && /tmp/p && /tmp/p && cat /opt/tests/inflight > /tmp/p; /tmp/p; echo in-place $?; " +
		"cp /opt/tests/hello /tmp/q && /tmp/q && cp /opt/tests/inflight /tmp/q.new && mv /tmp/q.new /tmp/q; /tmp/q; echo replaced $?"
	// Seccomp: the script forks.
	out, stderr, st := runKbox(t, "image", "-S", imagePath(t), "--read-only", "--syscall-mode=seccomp", "--", "/bin/sh", "-c", script)
	want := "hello from kbox guest\nhello from kbox guest\nin-place 2\nhello from kbox guest\nreplaced 2\n"
	if st != 0 || out != want {
		t.Errorf("status %d: %q, want %q\n%s", st, out, want, lastLines(stderr, 5))
	}
}
