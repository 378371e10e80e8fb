package dispatch

import (
	"os"
	"os/exec"
	"strconv"
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
