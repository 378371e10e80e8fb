package supervisor

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestKillGuests: killGuests ends every child of the process, the
// group's and any other, and reaps them; hasChildren sees a child alive
// and dead (unreaped), and none once it is reaped.
func TestKillGuests(t *testing.T) {
	if hasChildren() {
		t.Skip("the test process has children already")
	}
	group := exec.Command("sleep", "60")
	group.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	other := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{group, other} {
		if err := c.Start(); err != nil {
			t.Skipf("no sleep: %v", err)
		}
	}
	if !hasChildren() {
		t.Fatal("hasChildren: false with two children alive")
	}
	killGuests(group.Process.Pid)
	if hasChildren() || len(children()) != 0 {
		t.Fatalf("children left after killGuests: %v", children())
	}
	for _, c := range []*exec.Cmd{group, other} {
		if err := unix.Kill(c.Process.Pid, 0); err != unix.ESRCH {
			t.Errorf("pid %d: kill 0 = %v after killGuests, want ESRCH (reaped)", c.Process.Pid, err)
		}
	}

	dead := exec.Command("true")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, dead.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if !hasChildren() {
		t.Error("hasChildren: false with a dead child not reaped")
	}
	dead.Wait()
	if hasChildren() {
		t.Error("hasChildren: true once every child is reaped")
	}
}
