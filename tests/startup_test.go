//go:build lkl

package tests

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartupProgram: the seccomp tier's guest start-up process (the
// keeper, and the socket binder it forks) and the content store's helper
// (KBOX_STORE=helper: a writable run by a user who may not mount) run
// kbox's start-up program from a memfd (seccomp/startup), not kbox
// re-executed, and none of that memfd reaches a process below kbox: not
// the keeper, the binder, the helper or the guest. With
// KBOX_GUEST_REEXEC=1, kbox re-executes itself instead, as a kbox built
// without the program does; either way the guest runs, its writes through
// the helper's mounts are read back, and its exit status comes back.
func TestStartupProgram(t *testing.T) {
	img := imagePath(t)
	ver, err := exec.Command(kboxBin(t), "version").Output()
	if err != nil {
		t.Fatalf("kbox version: %v", err)
	}
	built := strings.Contains(string(ver), "guest start-up: its own program")
	self, err := filepath.EvalSymlinks(kboxBin(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, env, exe string
	}{
		{"program", "", "/memfd:kbox-guest (deleted)"},
		{"reexec", "KBOX_GUEST_REEXEC=1", self},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env == "" && !built {
				// make builds the program wherever musl-gcc is.
				if _, err := exec.LookPath("musl-gcc"); err == nil {
					t.Fatalf("this kbox was built without its start-up program, though musl-gcc is here (kbox version: %s)", strings.TrimSpace(string(ver)))
				}
				t.Skipf("SKIP: this kbox was built without its start-up program: no musl-gcc (kbox version: %s)", strings.TrimSpace(string(ver)))
			}
			cmd := exec.Command(kboxBin(t), "image", "-S", copyImage(t, img), "--", "/bin/sh", "-c",
				"echo written > /root/startup; echo up $(cat /root/startup); read x; exit 7")
			cmd.Env = append(os.Environ(), c.env, "KBOX_STORE=helper")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			line := make(chan string, 1)
			go func() {
				l, _ := bufio.NewReader(stdout).ReadString('\n')
				line <- l
			}()
			select {
			case l := <-line:
				if l != "up written\n" {
					t.Fatalf("first line %q, want %q", l, "up written\n")
				}
			case <-time.After(time.Minute):
				t.Fatal("the guest did not start within a minute")
			}
			kids := descendants(cmd.Process.Pid)
			if len(kids) < 2 {
				t.Fatalf("kbox has %d descendants (%v), want the keeper and the guest at least", len(kids), kids)
			}
			helpers := 0
			for _, k := range kids {
				args, _ := os.ReadFile("/proc/" + strconv.Itoa(k) + "/cmdline")
				exe, _ := os.Readlink("/proc/" + strconv.Itoa(k) + "/exe")
				switch name, _, _ := strings.Cut(string(args), "\x00"); {
				case name == "kbox-store-helper" || k == kids[0]: // the store helper, the keeper
					if exe != c.exe {
						t.Errorf("pid %d (%s) runs %q, want %q", k, name, exe, c.exe)
					}
					helpers++
				}
			}
			if helpers != 2 {
				t.Errorf("found %d of the keeper and the store helper among kbox's descendants %v", helpers, kids)
			}
			for _, k := range kids {
				fds, _ := filepath.Glob("/proc/" + strconv.Itoa(k) + "/fd/*")
				for _, fd := range fds {
					if l, _ := os.Readlink(fd); strings.Contains(l, "memfd:kbox-guest") {
						t.Errorf("pid %d holds the start-up program's memfd as fd %s", k, filepath.Base(fd))
					}
				}
			}
			stdin.Write([]byte("go\n"))
			stdin.Close()
			err = cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
				t.Errorf("kbox ended with %v, want exit status 7 (the guest's)", err)
			}
		})
	}
}
