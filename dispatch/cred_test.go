package dispatch

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// ids builds a Cred from r/e/s/fs uids and gids and capability sets.
func ids(u [4]uint32, g [4]uint32, eff, perm uint64) Cred {
	return Cred{UID: u[0], EUID: u[1], SUID: u[2], FSUID: u[3], GID: g[0], EGID: g[1], SGID: g[2], FSGID: g[3],
		Groups: []uint32{g[0]}, Eff: eff, Perm: perm, Bnd: CapFull}
}

const (
	nob  = 65534
	noFS = CapFull &^ capFSSet
	none = uint64(0)
)

var (
	root    = ids([4]uint32{0, 0, 0, 0}, [4]uint32{0, 0, 0, 0}, CapFull, CapFull)
	nobody  = ids([4]uint32{nob, nob, nob, nob}, [4]uint32{nob, nob, nob, nob}, none, none)
	savedRt = ids([4]uint32{nob, nob, 0, nob}, [4]uint32{nob, nob, nob, nob}, none, CapFull) // setresuid(65534, 65534, 0) from root
	eRoot   = ids([4]uint32{1000, 0, 1000, 0}, [4]uint32{1000, 1000, 1000, 1000}, CapFull, CapFull)
)

func TestCredTransitions(t *testing.T) {
	type op func(Cred) (Cred, unix.Errno)
	uid := func(u uint32) op { return func(c Cred) (Cred, unix.Errno) { return c.SetUID(u) } }
	gid := func(g uint32) op { return func(c Cred) (Cred, unix.Errno) { return c.SetGID(g) } }
	reuid := func(r, e uint32) op { return func(c Cred) (Cred, unix.Errno) { return c.SetREUID(r, e) } }
	regid := func(r, e uint32) op { return func(c Cred) (Cred, unix.Errno) { return c.SetREGID(r, e) } }
	resuid := func(r, e, s uint32) op { return func(c Cred) (Cred, unix.Errno) { return c.SetRESUID(r, e, s) } }
	resgid := func(r, e, s uint32) op { return func(c Cred) (Cred, unix.Errno) { return c.SetRESGID(r, e, s) } }
	fsuid := func(u uint32) op { return func(c Cred) (Cred, unix.Errno) { n, _ := c.SetFSUID(u); return n, 0 } }
	fsgid := func(g uint32) op { return func(c Cred) (Cred, unix.Errno) { n, _ := c.SetFSGID(g); return n, 0 } }
	groups := func(g ...uint32) op { return func(c Cred) (Cred, unix.Errno) { return c.SetGroups(g) } }
	caps := func(e, p, i uint64) op { return func(c Cred) (Cred, unix.Errno) { return c.SetCaps(e, p, i) } }
	exec := func(c Cred) (Cred, unix.Errno) { return c.Exec(), 0 }
	access := func(c Cred) (Cred, unix.Errno) { return c.Access(), 0 }
	with := func(c Cred, f func(*Cred)) Cred { f(&c); return c }
	const x = noID

	cases := []struct {
		name string
		from Cred
		do   op
		want Cred
		en   unix.Errno
	}{
		// setuid(2)
		{"root setuid(65534): every uid, no capabilities", root, uid(nob),
			with(root, func(c *Cred) { c.UID, c.EUID, c.SUID, c.FSUID, c.Eff, c.Perm = nob, nob, nob, nob, 0, 0 }), 0},
		{"root setuid(0): nothing changes", root, uid(0), root, 0},
		{"setuid(-1) EINVAL", root, uid(x), root, unix.EINVAL},
		{"nobody setuid(0) EPERM", nobody, uid(0), nobody, unix.EPERM},
		{"nobody setuid(1000) EPERM", nobody, uid(1000), nobody, unix.EPERM},
		{"nobody setuid(65534) allowed", nobody, uid(nob), nobody, 0},
		{"saved 0: setuid(0) sets euid only, effective back from permitted", savedRt, uid(0),
			with(savedRt, func(c *Cred) { c.EUID, c.FSUID, c.Eff = 0, 0, CapFull }), 0},
		{"euid 0 ruid 1000: setuid(1000) sets all, drops caps", eRoot, uid(1000),
			with(eRoot, func(c *Cred) { c.EUID, c.FSUID, c.Eff, c.Perm = 1000, 1000, 0, 0 }), 0},
		{"SECBIT_KEEP_CAPS: leaving root keeps permitted, clears effective and ambient",
			with(root, func(c *Cred) { c.Secure, c.Inh, c.Amb = secKeepCaps, 1, 1 }), uid(nob),
			with(root, func(c *Cred) {
				c.UID, c.EUID, c.SUID, c.FSUID, c.Eff, c.Secure, c.Inh, c.Amb = nob, nob, nob, nob, 0, secKeepCaps, 1, 0
			}), 0},
		{"SECBIT_NO_SETUID_FIXUP: capabilities stay", with(root, func(c *Cred) { c.Secure, c.Inh, c.Amb = secNoSetuidFixup, 1, 1 }), uid(nob),
			with(root, func(c *Cred) {
				c.UID, c.EUID, c.SUID, c.FSUID, c.Secure, c.Inh, c.Amb = nob, nob, nob, nob, secNoSetuidFixup, 1, 1
			}), 0},
		{"SECBIT_NO_SETUID_FIXUP: setfsuid keeps the fs capabilities", with(root, func(c *Cred) { c.Secure = secNoSetuidFixup }), fsuid(1000),
			with(root, func(c *Cred) { c.Secure, c.FSUID = secNoSetuidFixup, 1000 }), 0},
		// setgid(2)
		{"root setgid(65534): every gid", root, gid(nob),
			with(root, func(c *Cred) { c.GID, c.EGID, c.SGID, c.FSGID = nob, nob, nob, nob }), 0},
		{"nobody setgid(0) EPERM", nobody, gid(0), nobody, unix.EPERM},
		{"setgid(-1) EINVAL", root, gid(x), root, unix.EINVAL},
		{"unprivileged setgid to saved gid sets egid and fsgid",
			ids([4]uint32{nob, nob, nob, nob}, [4]uint32{nob, nob, 5, nob}, 0, 0), gid(5),
			ids([4]uint32{nob, nob, nob, nob}, [4]uint32{nob, 5, 5, 5}, 0, 0), 0},
		// setreuid(2)
		{"root setreuid(65534, 65534): saved too, no caps", root, reuid(nob, nob),
			with(root, func(c *Cred) { c.UID, c.EUID, c.SUID, c.FSUID, c.Eff, c.Perm = nob, nob, nob, nob, 0, 0 }), 0},
		{"root setreuid(-1, 1000): saved follows a new euid, permitted kept (ruid 0)", root, reuid(x, 1000),
			with(root, func(c *Cred) { c.EUID, c.SUID, c.FSUID, c.Eff = 1000, 1000, 1000, 0 }), 0},
		{"root setreuid(-1, 0): no change to saved (euid == ruid)", root, reuid(x, 0), root, 0},
		{"nobody setreuid(0, -1) EPERM", nobody, reuid(0, x), nobody, unix.EPERM},
		{"nobody setreuid(-1, 0) EPERM", nobody, reuid(x, 0), nobody, unix.EPERM},
		{"saved 0: setreuid(-1, 0) allowed", savedRt, reuid(x, 0),
			with(savedRt, func(c *Cred) { c.EUID, c.SUID, c.FSUID, c.Eff = 0, 0, 0, CapFull }), 0},
		{"saved 0: setreuid(0, -1) EPERM (ruid must be real or effective)", savedRt, reuid(0, x), savedRt, unix.EPERM},
		{"swap real and effective", eRoot, reuid(0, 1000),
			with(eRoot, func(c *Cred) { c.UID, c.EUID, c.SUID, c.FSUID, c.Eff = 0, 1000, 1000, 1000, 0 }), 0},
		// setregid(2)
		{"root setregid(-1, 7): egid, saved, fsgid", root, regid(x, 7),
			with(root, func(c *Cred) { c.EGID, c.SGID, c.FSGID = 7, 7, 7 }), 0},
		{"nobody setregid(0, -1) EPERM", nobody, regid(0, x), nobody, unix.EPERM},
		// setresuid(2)
		{"root setresuid(65534, 65534, 65534)", root, resuid(nob, nob, nob),
			with(root, func(c *Cred) { c.UID, c.EUID, c.SUID, c.FSUID, c.Eff, c.Perm = nob, nob, nob, nob, 0, 0 }), 0},
		{"root setresuid(-1, 65534, 0): permitted kept, effective cleared", root, resuid(x, nob, 0),
			with(root, func(c *Cred) { c.EUID, c.FSUID, c.Eff = nob, nob, 0 }), 0},
		{"then seteuid(0) through the saved uid", with(root, func(c *Cred) { c.EUID, c.FSUID, c.Eff = nob, nob, 0 }),
			resuid(x, 0, x), root, 0},
		{"root setresuid(65534, 65534, 0) keeps permitted", with(root, func(c *Cred) { *c = withGID(*c, nob) }),
			resuid(nob, nob, 0), savedRt, 0},
		{"saved 0: setresuid(-1, 0, -1) allowed", savedRt, resuid(x, 0, x),
			with(savedRt, func(c *Cred) { c.EUID, c.FSUID, c.Eff = 0, 0, CapFull }), 0},
		{"saved 0: setresuid(-1, -1, 65534) drops the last root id", savedRt, resuid(x, x, nob), nobody, 0},
		{"nobody setresuid(0, -1, -1) EPERM", nobody, resuid(0, x, x), nobody, unix.EPERM},
		{"nobody setresuid(-1, -1, 0) EPERM", nobody, resuid(x, x, 0), nobody, unix.EPERM},
		{"nobody setresuid(-1, -1, -1) no-op", nobody, resuid(x, x, x), nobody, 0},
		{"unprivileged permutation allowed", ids([4]uint32{1, 2, 3, 2}, [4]uint32{}, 0, 0), resuid(3, 1, 2),
			ids([4]uint32{3, 1, 2, 1}, [4]uint32{}, 0, 0), 0},
		{"setresuid resets fsuid to euid", ids([4]uint32{1, 1, 1, 2}, [4]uint32{}, 0, 0), resuid(x, 1, x),
			ids([4]uint32{1, 1, 1, 1}, [4]uint32{}, 0, 0), 0},
		// setresgid(2)
		{"root setresgid(65534, 65534, 65534)", root, resgid(nob, nob, nob),
			with(root, func(c *Cred) { c.GID, c.EGID, c.SGID, c.FSGID = nob, nob, nob, nob }), 0},
		{"nobody setresgid(0, 0, 0) EPERM", nobody, resgid(0, 0, 0), nobody, unix.EPERM},
		{"nobody setresgid to its own ids no-op", nobody, resgid(nob, nob, nob), nobody, 0},
		// setfsuid(2), setfsgid(2)
		{"root setfsuid(1000): fs capabilities leave effective", root, fsuid(1000),
			with(root, func(c *Cred) { c.FSUID, c.Eff = 1000, noFS }), 0},
		{"and back to 0: raised again", with(root, func(c *Cred) { c.FSUID, c.Eff = 1000, noFS }), fsuid(0), root, 0},
		{"nobody setfsuid(0) ignored", nobody, fsuid(0), nobody, 0},
		{"saved 0: setfsuid(0) allowed, fs caps from permitted", savedRt, fsuid(0),
			with(savedRt, func(c *Cred) { c.FSUID, c.Eff = 0, capFSSet }), 0},
		{"setfsuid(-1) ignored", root, fsuid(x), root, 0},
		{"root setfsgid(9)", root, fsgid(9), with(root, func(c *Cred) { c.FSGID = 9 }), 0},
		{"nobody setfsgid(0) ignored", nobody, fsgid(0), nobody, 0},
		// setgroups(2)
		{"root setgroups sorts", root, groups(5, 1, 3), with(root, func(c *Cred) { c.Groups = []uint32{1, 3, 5} }), 0},
		{"root setgroups()", root, groups(), with(root, func(c *Cred) { c.Groups = []uint32{} }), 0},
		{"nobody setgroups EPERM", nobody, groups(0), nobody, unix.EPERM},
		{"setgroups(-1) EINVAL", root, groups(1, x), root, unix.EINVAL},
		{"euid 0 without CAP_SETGID EPERM", with(root, func(c *Cred) { c.Eff = 0 }), groups(1), with(root, func(c *Cred) { c.Eff = 0 }), unix.EPERM},
		// capset(2)
		{"root drops effective", root, caps(0, CapFull, 0), with(root, func(c *Cred) { c.Eff = 0 }), 0},
		{"root drops permitted", root, caps(1<<capChown, 1<<capChown, 0), with(root, func(c *Cred) { c.Eff, c.Perm = 1<<capChown, 1<<capChown }), 0},
		{"cannot raise permitted", with(root, func(c *Cred) { c.Perm, c.Eff = 1, 1 }), caps(3, 3, 0), with(root, func(c *Cred) { c.Perm, c.Eff = 1, 1 }), unix.EPERM},
		{"effective must be in permitted", root, caps(3, 1, 0), root, unix.EPERM},
		{"inheritable from permitted without SETPCAP", with(root, func(c *Cred) { c.Eff = 0 }), caps(0, CapFull, 1<<capKillBit),
			with(root, func(c *Cred) { c.Eff, c.Inh = 0, 1<<capKillBit }), 0},
		{"inheritable beyond permitted needs SETPCAP", nobody, caps(0, 0, 1), nobody, unix.EPERM},
		{"root may set inheritable", root, caps(CapFull, CapFull, CapFull), with(root, func(c *Cred) { c.Inh = CapFull }), 0},
		{"nobody empty capset ok", nobody, caps(0, 0, 0), nobody, 0},
		{"bits above the last capability are dropped", root, caps(^uint64(0), ^uint64(0), 0), root, 0},
		{"inheritable beyond the bounding set EPERM, even with SETPCAP", with(root, func(c *Cred) { c.Bnd = 0xff }), caps(CapFull, CapFull, 0x1ff),
			with(root, func(c *Cred) { c.Bnd = 0xff }), unix.EPERM},
		{"inheritable kept outside the bounding set", with(root, func(c *Cred) { c.Bnd, c.Inh = 0xff, 0x100 }), caps(CapFull, CapFull, 0x1ff),
			with(root, func(c *Cred) { c.Bnd, c.Inh = 0xff, 0x1ff }), 0},
		{"ambient keeps what stays permitted and inheritable", with(root, func(c *Cred) { c.Inh, c.Amb = 0x7, 0x7 }), caps(0x3, 0x3, 0x6),
			with(root, func(c *Cred) { c.Eff, c.Perm, c.Inh, c.Amb = 0x3, 0x3, 0x6, 0x2 }), 0},
		// execve(2) of a program without set-id bits or file capabilities
		{"exec as root keeps every capability", root, exec, root, 0},
		{"exec as nobody: none", nobody, exec, nobody, 0},
		{"exec with saved uid 0: saved becomes euid, no caps", savedRt, exec, nobody, 0},
		{"exec with euid 0, ruid 1000: keeps effective", eRoot, exec,
			with(eRoot, func(c *Cred) { c.SUID = 0 }), 0},
		{"exec with ruid 0, euid 1000: permitted, no effective",
			ids([4]uint32{0, 1000, 0, 1000}, [4]uint32{0, 0, 0, 0}, 0, CapFull), exec,
			ids([4]uint32{0, 1000, 1000, 1000}, [4]uint32{0, 0, 0, 0}, 0, CapFull), 0},
		{"exec of root with dropped caps gets the bounding set back", with(root, func(c *Cred) { c.Eff, c.Perm = 0, 0 }), exec, root, 0},
		{"under no_new_privs it gains nothing", with(root, func(c *Cred) { c.Eff, c.Perm, c.NoNewPrivs = 0, 0, true }), exec,
			with(root, func(c *Cred) { c.Eff, c.Perm, c.NoNewPrivs = 0, 0, true }), 0},
		{"no_new_privs downgrade resets euid to ruid",
			with(ids([4]uint32{1000, 0, 0, 0}, [4]uint32{1000, 1000, 1000, 1000}, 0, 0), func(c *Cred) { c.NoNewPrivs = true }), exec,
			with(ids([4]uint32{1000, 1000, 1000, 1000}, [4]uint32{1000, 1000, 1000, 1000}, 0, 0), func(c *Cred) { c.NoNewPrivs = true }), 0},
		{"exec as root: permitted is bounding | inheritable", with(root, func(c *Cred) { c.Bnd, c.Inh = 0xf0, 0x3 }), exec,
			with(root, func(c *Cred) { c.Bnd, c.Inh, c.Perm, c.Eff = 0xf0, 0x3, 0xf3, 0xf3 }), 0},
		{"SECBIT_NOROOT: root gets its ambient set alone",
			with(root, func(c *Cred) { c.Secure, c.Inh, c.Amb = secNoRoot, 0x3, 0x1 }), exec,
			with(root, func(c *Cred) { c.Secure, c.Inh, c.Amb, c.Perm, c.Eff = secNoRoot, 0x3, 0x1, 0x1, 0x1 }), 0},
		{"non-root exec: ambient becomes permitted and effective",
			with(nobody, func(c *Cred) { c.Perm, c.Inh, c.Amb = 0x7, 0x3, 0x3 }), exec,
			with(nobody, func(c *Cred) { c.Perm, c.Eff, c.Inh, c.Amb = 0x3, 0x3, 0x3, 0x3 }), 0},
		{"exec clears SECBIT_KEEP_CAPS, keeps the rest", with(root, func(c *Cred) { c.Secure = secKeepCaps | secNoCapAmbRaise }), exec,
			with(root, func(c *Cred) { c.Secure = secNoCapAmbRaise }), 0},
		{"exec makes fsuid the euid", with(root, func(c *Cred) { c.FSUID, c.Eff = 5, noFS }), exec, root, 0},
		// access(2) without AT_EACCESS
		{"access as real root: permitted", eRoot.withReal(0), access, with(eRoot.withReal(0), func(c *Cred) { c.FSUID, c.FSGID = 0, 1000 }), 0},
		{"access with ruid 1000, euid 0: no caps, real ids", eRoot, access,
			with(eRoot, func(c *Cred) { c.FSUID, c.FSGID, c.Eff = 1000, 1000, 0 }), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, en := c.do(c.from)
			if en != c.en {
				t.Errorf("errno %v, want %v", en, c.en)
			}
			if !got.Equal(&c.want) {
				t.Errorf("got  %s\nwant %s", fmtCred(&got), fmtCred(&c.want))
			}
		})
	}
}

const capKillBit = 5

func (c Cred) withReal(uid uint32) Cred { c.UID = uid; return c }

func withGID(c Cred, g uint32) Cred {
	c.GID, c.EGID, c.SGID, c.FSGID, c.Groups = g, g, g, g, []uint32{g}
	return c
}

func fmtCred(c *Cred) string {
	return fmt.Sprintf("uid %d/%d/%d/%d gid %d/%d/%d/%d groups %v eff %#x perm %#x inh %#x bnd %#x amb %#x secure %#x nnp %v",
		c.UID, c.EUID, c.SUID, c.FSUID, c.GID, c.EGID, c.SGID, c.FSGID, c.Groups, c.Eff, c.Perm, c.Inh, c.Bnd, c.Amb, c.Secure, c.NoNewPrivs)
}

func TestCredStart(t *testing.T) {
	if r := RootCred(); !r.Equal(&root) {
		t.Errorf("RootCred %s", fmtCred(&r))
	}
	u := UserCred(1000, 100, []uint32{7, 3})
	want := Cred{UID: 1000, EUID: 1000, SUID: 1000, FSUID: 1000, GID: 100, EGID: 100, SGID: 100, FSGID: 100, Groups: []uint32{3, 7}, Bnd: CapFull}
	if !u.Equal(&want) {
		t.Errorf("UserCred %s", fmtCred(&u))
	}
	if z := UserCred(0, 0, nil); z.Eff != CapFull || z.Perm != CapFull {
		t.Errorf("UserCred(0) has no capabilities: %s", fmtCred(&z))
	}
}

// TestSetFSUIDReturnsOld: setfsuid and setfsgid return the previous id,
// whether or not the change is allowed.
func TestSetFSUIDReturnsOld(t *testing.T) {
	if _, old := root.SetFSUID(1000); old != 0 {
		t.Errorf("old fsuid %d", old)
	}
	if n, old := nobody.SetFSUID(0); old != nob || n.FSUID != nob {
		t.Errorf("nobody setfsuid(0): old %d, now %d", old, n.FSUID)
	}
	if _, old := nobody.SetFSGID(0); old != nob {
		t.Errorf("old fsgid %d", old)
	}
}

// TestCredNoSharedGroups: a change of groups never writes into a slice
// another Cred shares.
func TestCredNoSharedGroups(t *testing.T) {
	in := []uint32{9, 8}
	a, _ := root.SetGroups(in)
	in[0] = 1
	if a.Groups[0] != 8 || a.Groups[1] != 9 {
		t.Errorf("groups follow the caller's slice: %v", a.Groups)
	}
	b := a
	c, _ := b.SetGroups([]uint32{4})
	if a.Groups[0] != 8 || c.Groups[0] != 4 {
		t.Errorf("shared groups changed: %v %v", a.Groups, c.Groups)
	}
}

// TestCredPrctl: prctl's rules on the bounding and ambient sets and the
// securebits, with Linux's errnos.
func TestCredPrctl(t *testing.T) {
	type op func(Cred) (Cred, unix.Errno)
	drop := func(n uint64) op { return func(c Cred) (Cred, unix.Errno) { return c.CapbsetDrop(n) } }
	secure := func(b uint64) op { return func(c Cred) (Cred, unix.Errno) { return c.SetSecurebits(b) } }
	keep := func(v uint64) op { return func(c Cred) (Cred, unix.Errno) { return c.SetKeepCaps(v) } }
	amb := func(o, n, a4, a5 uint64) op {
		return func(c Cred) (Cred, unix.Errno) { _, n, en := c.Ambient(o, n, a4, a5); return n, en }
	}
	with := func(c Cred, f func(*Cred)) Cred { f(&c); return c }
	noPcap := with(root, func(c *Cred) { c.Eff &^= 1 << capSetpcap })
	inh := with(root, func(c *Cred) { c.Inh = 0x6 })
	cases := []struct {
		name string
		from Cred
		do   op
		want Cred
		en   unix.Errno
	}{
		{"drop from the bounding set", root, drop(1), with(root, func(c *Cred) { c.Bnd = CapFull &^ 2 }), 0},
		{"drop without CAP_SETPCAP EPERM (before the number)", noPcap, drop(99), noPcap, unix.EPERM},
		{"drop of an unknown capability EINVAL", root, drop(CapLast + 1), root, unix.EINVAL},
		{"set securebits", root, secure(secKeepCaps | secKeepCapsLocked), with(root, func(c *Cred) { c.Secure = secKeepCaps | secKeepCapsLocked }), 0},
		{"securebits without CAP_SETPCAP EPERM", noPcap, secure(0), noPcap, unix.EPERM},
		{"unknown securebit EPERM", root, secure(1 << 8), root, unix.EPERM},
		{"locked bit cannot change", with(root, func(c *Cred) { c.Secure = secKeepCapsLocked }), secure(secKeepCaps | secKeepCapsLocked),
			with(root, func(c *Cred) { c.Secure = secKeepCapsLocked }), unix.EPERM},
		{"a lock cannot be undone", with(root, func(c *Cred) { c.Secure = secKeepCapsLocked }), secure(0),
			with(root, func(c *Cred) { c.Secure = secKeepCapsLocked }), unix.EPERM},
		{"keepcaps 1", nobody, keep(1), with(nobody, func(c *Cred) { c.Secure = secKeepCaps }), 0},
		{"keepcaps 0", with(nobody, func(c *Cred) { c.Secure = secKeepCaps | secNoRoot }), keep(0), with(nobody, func(c *Cred) { c.Secure = secNoRoot }), 0},
		{"keepcaps 2 EINVAL", root, keep(2), root, unix.EINVAL},
		{"keepcaps locked EPERM", with(nobody, func(c *Cred) { c.Secure = secKeepCapsLocked }), keep(1),
			with(nobody, func(c *Cred) { c.Secure = secKeepCapsLocked }), unix.EPERM},
		{"ambient raise of a permitted inheritable capability", inh, amb(ambRaise, 1, 0, 0), with(inh, func(c *Cred) { c.Amb = 2 }), 0},
		{"ambient raise of a capability not inheritable EPERM", inh, amb(ambRaise, 3, 0, 0), inh, unix.EPERM},
		{"ambient raise of a capability not permitted EPERM", with(nobody, func(c *Cred) { c.Inh = 2 }), amb(ambRaise, 1, 0, 0),
			with(nobody, func(c *Cred) { c.Inh = 2 }), unix.EPERM},
		{"ambient raise under SECBIT_NO_CAP_AMBIENT_RAISE EPERM", with(inh, func(c *Cred) { c.Secure = secNoCapAmbRaise }), amb(ambRaise, 1, 0, 0),
			with(inh, func(c *Cred) { c.Secure = secNoCapAmbRaise }), unix.EPERM},
		{"ambient lower", with(inh, func(c *Cred) { c.Amb = 6 }), amb(ambLower, 1, 0, 0), with(inh, func(c *Cred) { c.Amb = 4 }), 0},
		{"ambient clear all", with(inh, func(c *Cred) { c.Amb = 6 }), amb(ambClearAll, 0, 0, 0), inh, 0},
		{"ambient clear all with an argument EINVAL", with(inh, func(c *Cred) { c.Amb = 6 }), amb(ambClearAll, 1, 0, 0),
			with(inh, func(c *Cred) { c.Amb = 6 }), unix.EINVAL},
		{"ambient of an unknown capability EINVAL", inh, amb(ambIsSet, CapLast+1, 0, 0), inh, unix.EINVAL},
		{"ambient with a fourth argument EINVAL", inh, amb(ambLower, 1, 1, 0), inh, unix.EINVAL},
		{"ambient unknown operation EINVAL", inh, amb(9, 1, 0, 0), inh, unix.EINVAL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, en := c.do(c.from)
			if en != c.en {
				t.Errorf("errno %v, want %v", en, c.en)
			}
			if !got.Equal(&c.want) {
				t.Errorf("got  %s\nwant %s", fmtCred(&got), fmtCred(&c.want))
			}
		})
	}
	if v, _, _ := with(inh, func(c *Cred) { c.Amb = 2 }).Ambient(ambIsSet, 1, 0, 0); v != 1 {
		t.Errorf("IS_SET of a raised capability: %d", v)
	}
	if v, _, _ := inh.Ambient(ambIsSet, 2, 0, 0); v != 0 {
		t.Errorf("IS_SET of a capability not raised: %d", v)
	}
}

// mayWrite is the kernel's permission check for writing.
func TestMayWrite(t *testing.T) {
	nobody := UserCred(65534, 65534, []uint32{100})
	root := RootCred()
	for _, c := range []struct {
		c             Cred
		uid, gid, mod uint32
		want          bool
	}{
		{nobody, 65534, 65534, 0o644, true},
		{nobody, 65534, 65534, 0o444, false},
		{nobody, 0, 0, 0o644, false},
		{nobody, 0, 100, 0o664, true}, // a supplementary group
		{nobody, 0, 0, 0o666, true},
		{root, 1000, 1000, 0o444, true}, // CAP_DAC_OVERRIDE
	} {
		if got := c.c.mayWrite(c.uid, c.gid, c.mod); got != c.want {
			t.Errorf("%d may write %d:%d %o: %v, want %v", c.c.FSUID, c.uid, c.gid, c.mod, got, c.want)
		}
	}
}
