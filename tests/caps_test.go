//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCapsPrctl: the bounding and ambient sets, securebits and
// no_new_privs are the guest's own: prctl answers and changes them with
// Linux's errors, execve and setuid follow them, a seccomp filter needs
// the guest's no_new_privs or CAP_SYS_ADMIN, and /proc/self/status shows
// them. The guest program's output equals its native run's (as root).
func TestCapsPrctl(t *testing.T) {
	cases := []struct {
		name string
		kbox []string // the image's option (-S, -R), then kbox's others
		mode string
		want []string // in order
	}{
		{"root", []string{"-S"}, "root", []string{
			"start CapInh:\t0000000000000000\nstart CapPrm:\t0000000000ffffff\nstart CapEff:\t0000000000ffffff\n" +
				"start CapBnd:\t0000000000ffffff\nstart CapAmb:\t0000000000000000\nstart NoNewPrivs:\t0\n",
			"get no_new_privs: 0\n",
			"PR_CAPBSET_READ 30: 0\nPR_CAPBSET_READ 41: EINVAL\n",
			"capset inh 30 (not bounding): EPERM\n",
			"ambient is_set 1: 1\n",
			"set securebits 1<<12: EPERM\n",
			"get keepcaps: 1\nget securebits: 16\n",
			"root CapAmb:\t0000000000000002\n",
			"keepcaps CapPrm:\t0000000000ffffff\nkeepcaps CapEff:\t0000000000000000\n",
			"-- after keepcaps: uid 1000 euid 1000\n",
			"keepcaps CapPrm:\t0000000000000002\nkeepcaps CapEff:\t0000000000000002\n",
			"PR_SET_SECUREBITS: EPERM\nPR_CAPBSET_DROP 1: EPERM\nPR_SET_SECCOMP bad address: EFAULT\nPR_SET_SECCOMP: EACCES\nseccomp filter: EACCES\n",
			"nnp NoNewPrivs:\t1\nPR_SET_SECCOMP with no_new_privs: 0\nseccomp filter with no_new_privs: 0\n",
			"nnp CapPrm:\t0000000000dffeff\n", // after the exec: nothing gained
			"capset inheritable 2 (not bounding): EPERM\n",
			"bounding CapPrm:\t0000000000fffffb\n", // after the exec
			"set keepcaps 1 (locked): EPERM\nunlock: EPERM\n",
			"noroot CapPrm:\t0000000000000002\n",
			"nofixup CapPrm:\t0000000000ffffff\nnofixup CapEff:\t0000000000ffffff\n",
			"trimmed CapAmb:\t0000000000000000\n",
		}},
		{"user", []string{"-S"}, "user", []string{
			"user CapPrm:\t0000000000000000\n",
			"get no_new_privs: 0\n",
			"PR_CAPBSET_DROP 1: EPERM\nPR_SET_SECUREBITS 0: EPERM\nset keepcaps 1: 0\nambient raise 1: EPERM\nPR_SET_SECCOMP: EACCES\n",
			"PR_SET_SECCOMP with no_new_privs: 0\n",
			"name capsname\n",
			"user NoNewPrivs:\t1\n",
		}},
		// Started as a user: the bounding set is full, nothing else.
		{"--change-id", []string{"-R", "--change-id", "1000:1000"}, "user", []string{
			"user CapInh:\t0000000000000000\nuser CapPrm:\t0000000000000000\nuser CapEff:\t0000000000000000\n" +
				"user CapBnd:\t000001ffffffffff\nuser CapAmb:\t0000000000000000\nuser NoNewPrivs:\t0\n",
			"PR_CAPBSET_READ 0: 1\nPR_CAPBSET_DROP 1: EPERM\nPR_SET_SECUREBITS 0: EPERM\n",
			"PR_SET_SECCOMP: EACCES\nset no_new_privs: 0\nPR_SET_SECCOMP with no_new_privs: 0\n",
			"-- after user: uid 1000 euid 1000\nget keepcaps: 0\nget securebits: 0\nget no_new_privs: 1\n",
		}},
	}
	var bin string
	if os.Geteuid() == 0 {
		bin = dumpFromImage(t, imagePath(t), "/opt/tests/capsprctl")
		for _, d := range []string{filepath.Dir(bin), filepath.Dir(filepath.Dir(bin))} {
			if err := os.Chmod(d, 0o755); err != nil { // user 65534 execs it again
				t.Fatal(err)
			}
		}
	} else {
		t.Log("not root: no native run to compare with")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"image", "--read-only", c.kbox[0], imagePath(t)}, c.kbox[1:]...)
			args = append(args, "--", "/opt/tests/capsprctl", c.mode)
			out, stderr, st := runKbox(t, args...)
			if st != 0 || strings.Contains(out, "FAIL") {
				t.Fatalf("status %d\n%s%s", st, out, stderr)
			}
			rest := out
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order):\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			if bin == "" || c.kbox[0] != "-S" {
				return
			}
			native, err := exec.Command(bin, c.mode).CombinedOutput()
			if err != nil {
				t.Fatalf("native: %v\n%s", err, native)
			}
			if string(native) != out {
				t.Errorf("differs from the native run\nkbox:\n%s\nnative:\n%s", out, native)
			}
		})
	}
}
