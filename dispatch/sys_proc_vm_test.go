package dispatch

import "testing"

// ptraceDenied follows Linux's ptrace_may_access by real ids: the
// caller's uid and gid must match all three of the target's, or it has
// CAP_SYS_PTRACE.
func TestPtraceDenied(t *testing.T) {
	id := func(u, g uint32) Cred { return Cred{UID: u, EUID: u, SUID: u, GID: g, EGID: g, SGID: g} }
	root := id(0, 0)
	root.Eff = 1 << capSysPtrace
	setuidRoot := id(1000, 1000)
	setuidRoot.EUID = 0
	realOnly := id(1000, 1000)
	realOnly.EUID = 65534
	for _, c := range []struct {
		name         string
		caller, task Cred
		denied       bool
	}{
		{"same user", id(1000, 1000), id(1000, 1000), false},
		{"other user", id(65534, 65534), id(0, 0), true},
		{"other group", id(1000, 1000), id(1000, 100), true},
		{"target's euid differs", id(1000, 1000), setuidRoot, true},
		{"caller's real ids count", realOnly, id(1000, 1000), false},
		{"CAP_SYS_PTRACE", root, id(1000, 1000), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ptraceDenied(&procCred{Cred: c.caller}, &procCred{Cred: c.task}); got != c.denied {
				t.Errorf("ptraceDenied = %v, want %v", got, c.denied)
			}
		})
	}
}
