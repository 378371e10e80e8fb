package supervisor

import (
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// execImageOK tells a program kbox prepared (a kbox-exec memfd) from one
// the host kernel loaded from a host path.
func TestExecImageOK(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep on the host")
	}
	start := func(cmd *exec.Cmd) int {
		t.Helper()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		// Wait until the exec has happened (the child's exe changes).
		self, _ := os.Readlink("/proc/self/exe")
		for i := 0; i < 200; i++ {
			if exe, _ := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe"); exe != "" && exe != self {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		return cmd.Process.Pid
	}

	host := start(exec.Command(sleep, "5"))
	if execImageOK(host) {
		t.Errorf("a program exec'd from a host path passed the check")
	}

	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Skip(err)
	}
	fd, err := unix.MemfdCreate("kbox-exec:/bin/sleep", 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/fd/3", "5")
	cmd.ExtraFiles = []*os.File{f}
	prepared := start(cmd)
	if !execImageOK(prepared) {
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(prepared) + "/exe")
		t.Errorf("a program exec'd from a kbox-exec memfd failed the check (exe %q)", exe)
	}
	if execImageOK(999999999) {
		t.Errorf("a missing task passed the check")
	}
}

// sameLengthStage maps a script's path to a staging path of the same
// length with the same base name, or refuses.
func TestSameLengthStage(t *testing.T) {
	for _, c := range []struct {
		given, want string
		ok          bool
	}{
		{"/opt/x/s.sh", "opt//x/s.sh", true},
		{"//opt/s.sh", "opt///s.sh", true},
		{"../x/s.sh", "__/x/s.sh", true},
		{"a/../s.sh", "a/__/s.sh", true},
		{"./s.sh", "./s.sh", true},
		{"s.sh", "s.sh", true},
		{"/s.sh", "", false},     // no slash to double
		{"/i/sh", "i//sh", true}, // the interpreters' links are not in the staging directory
		{"i/x.sh", "i/x.sh", true},
		{"/x/..", "", false}, // not a file name
		{"dir/", "", false},  // likewise
		{"/usr/bin/env", "usr//bin/env", true},
	} {
		got, ok := sameLengthStage(c.given)
		if got != c.want || ok != c.ok {
			t.Errorf("sameLengthStage(%q) = %q, %v; want %q, %v", c.given, got, ok, c.want, c.ok)
		}
		if ok && (len(got) != len(c.given) || path.Base(got) != path.Base(c.given) && !strings.Contains(c.given, "..")) {
			t.Errorf("sameLengthStage(%q) = %q: length or base name differs", c.given, got)
		}
	}
}
