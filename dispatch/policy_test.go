package dispatch

import (
	"strings"
	"testing"

	"github.com/kbox-project/kbox/policy"
	"golang.org/x/sys/unix"
)

func TestCompilePolicy(t *testing.T) {
	cases := []struct {
		src, err string
	}{
		{`[syscalls]
deny = ["ptrace=EACCES", "family:net"]
quota = { execve = 2, "family:file" = 100 }`, ""},
		{"[syscalls]\ndeny = [\"nosuch\"]\n", `unknown syscall "nosuch"`},
		{"[syscalls]\ndeny = [\"family:nosuch\"]\n", `unknown family "nosuch"`},
		{"[syscalls]\nquota = { getpid = 3 }\n", "getpid runs natively"},
	}
	for _, c := range cases {
		p, err := policy.Parse([]byte(c.src))
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		_, err = CompilePolicy(p)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.src, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, want %q", c.src, err, c.err)
		}
	}
}

func TestPolicyCallRules(t *testing.T) {
	p, _ := policy.Parse([]byte("[syscalls]\ndeny = [\"mkdirat=EACCES\"]\nquota = { execve = 2 }\n"))
	c, err := CompilePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	e := New(Options{Policy: c})
	var seen []string
	e.OnRefuse = func(x *Refusal) { seen = append(seen, x.Rule+" "+x.Syscall+" "+unix.ErrnoName(x.Errno)) }
	call := func(nr int) (Result, bool) { return e.policyCall(&Request{Nr: nr}) }
	if res, refused := call(unix.SYS_MKDIRAT); !refused || res.Errno != unix.EACCES || res.Disp != Denied {
		t.Errorf("mkdirat: %v %+v", refused, res)
	}
	for i, want := range []bool{false, false, true, true} {
		if _, refused := call(unix.SYS_EXECVE); refused != want {
			t.Errorf("execve %d: refused %v, want %v", i+1, refused, want)
		}
	}
	if _, refused := call(unix.SYS_READ); refused {
		t.Error("read refused")
	}
	if got := c.Refusals(); got["deny:mkdirat"] != 1 || got["quota:execve"] != 2 {
		t.Errorf("refusals %v", got)
	}
	if len(seen) != 3 || seen[0] != "deny:mkdirat mkdirat EACCES" || seen[1] != "quota:execve execve EPERM" {
		t.Errorf("OnRefuse saw %q", seen)
	}
}
