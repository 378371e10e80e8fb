//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Calls that act on another guest process are checked by the guest's
// credentials, as Linux checks them, and reach the guest's processes
// alone (LTP process_vm_readv01-03, process_vm_writev01-02,
// sched_setaffinity01, sched_setparam05, getpriority01-02,
// setpriority02): process_vm_readv/writev copy between guest processes
// (they were refused, EPERM) and a uid that is not the target's is EPERM;
// a guest whose euid is not the target's may not change its affinity,
// scheduling or nice value (the host judged by kbox's uid and let it);
// getpriority and setpriority by user cover the guest's processes (they
// were refused, EPERM; a user without a process is ESRCH). Each mode of
// tests/guest/procperm.c prints what it prints natively, as root; a host
// process stays out of reach (ESRCH), and so does kbox's own process in
// an in-process tier (EPERM).
func TestProcessPermissions(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIP (the native runs need root: they change uids)")
	}
	img := imagePath(t)
	prog := dumpFromImage(t, img, "/opt/tests/procperm")
	for _, mode := range []string{"vm", "sched", "user"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(prog, mode)
			cmd.Dir = t.TempDir()
			native, err := cmd.Output()
			if err != nil {
				t.Fatalf("native: %v\n%s", err, native)
			}
			out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--", "/opt/tests/procperm", mode)
			if st != 0 || out != string(native) {
				t.Errorf("status %d; under kbox:\n%s\nnatively:\n%s\n%s", st, out, native, stderr)
			}
		})
	}
	host := strconv.Itoa(os.Getpid())
	runCases(t, []string{"image", "-S", img, "--read-only"}, []guestCase{
		{"host process", []string{"--", "/opt/tests/procperm", "host", host}, 0, []string{
			"readv host ESRCH\n", "writev host ESRCH\n", "setpriority user self ok\n",
			"getpriority user self 7 ok\n", "getpriority self 7\n"}, nil},
	})
	// In an in-process tier the guest is kbox's own process, whose
	// memory the memory guard keeps from it: process_vm_* stay refused.
	forTiers(t, []string{"trap"}, func(t *testing.T, tier string) {
		out, stderr, st := runKbox(t, "image", "-S", img, "--read-only", "--trusted", "--syscall-mode="+tier, "--", "/opt/tests/procperm", "host", host)
		if st != 0 || !strings.Contains(out, "readv host EPERM\nwritev host EPERM\n") {
			t.Errorf("status %d:\n%s\n%s", st, out, stderr)
		}
	})
}
