package dispatch

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// memGuest is guest memory in a buffer at address memBase; any other
// address faults.
type memGuest struct{ mem [256]byte }

const (
	memBase = 0x1000
	hdrAt   = memBase       // capget/capset header, or a list
	dataAt  = memBase + 16  // capability data, or ids
	listAt  = memBase + 128 // group lists
	badAt   = 8             // unmapped
)

func (g *memGuest) at(addr uint64, n int) []byte {
	if addr < memBase || addr-memBase+uint64(n) > uint64(len(g.mem)) {
		return nil
	}
	return g.mem[addr-memBase : addr-memBase+uint64(n)]
}
func (g *memGuest) Pid() int { return 4242 }
func (g *memGuest) Read(addr uint64, b []byte) error {
	m := g.at(addr, len(b))
	if m == nil {
		return unix.EFAULT
	}
	copy(b, m)
	return nil
}
func (g *memGuest) ReadSome(addr uint64, b []byte) (int, error) { return len(b), g.Read(addr, b) }
func (g *memGuest) Write(addr uint64, b []byte) error {
	m := g.at(addr, len(b))
	if m == nil {
		return unix.EFAULT
	}
	copy(m, b)
	return nil
}
func (g *memGuest) WriteForce(addr uint64, b []byte) error { return g.Write(addr, b) }
func (g *memGuest) Valid() error                           { return nil }
func (g *memGuest) AddFD(int, int, bool) (int, error)      { return 0, unix.ENOSYS }
func (g *memGuest) AddFDReply(int, bool) (int, error)      { return 0, unix.ENOSYS }
func (g *memGuest) Defer() Pending                         { return nil }

func (g *memGuest) words(addr uint64, n int) []uint32 {
	var w []uint32
	for i := 0; i < n; i++ {
		w = append(w, binary.LittleEndian.Uint32(g.at(addr+uint64(4*i), 4)))
	}
	return w
}

func (g *memGuest) put(addr uint64, vs ...uint32) {
	for i, v := range vs {
		binary.LittleEndian.PutUint32(g.at(addr+uint64(4*i), 4), v)
	}
}

// TestIdentHandlers: the identity syscalls' argument and memory handling,
// as the kernel does it (the rules themselves are cred_test.go's).
func TestIdentHandlers(t *testing.T) {
	nobody := UserCred(65534, 65534, []uint32{65534})
	type step struct {
		name  string
		cred  *Cred // nil: root
		setup func(g *memGuest)
		nr    int
		args  [6]uint64
		val   int64
		errno unix.Errno
		check func(g *memGuest) bool
	}
	steps := []step{
		{name: "getgroups(0) counts", nr: unix.SYS_GETGROUPS, val: 1},
		{name: "getgroups too small", cred: &Cred{Groups: []uint32{1, 2}}, nr: unix.SYS_GETGROUPS, args: [6]uint64{1, listAt}, errno: unix.EINVAL},
		{name: "getgroups negative", nr: unix.SYS_GETGROUPS, args: [6]uint64{0xffffffff, listAt}, errno: unix.EINVAL},
		{name: "getgroups fills", cred: &Cred{Groups: []uint32{3, 9}}, nr: unix.SYS_GETGROUPS, args: [6]uint64{8, listAt}, val: 2,
			check: func(g *memGuest) bool { w := g.words(listAt, 2); return w[0] == 3 && w[1] == 9 }},
		{name: "getgroups bad buffer", nr: unix.SYS_GETGROUPS, args: [6]uint64{8, badAt}, errno: unix.EFAULT},
		{name: "getresuid writes three", cred: &Cred{UID: 1, EUID: 2, SUID: 3}, nr: unix.SYS_GETRESUID, args: [6]uint64{dataAt, dataAt + 4, dataAt + 8},
			check: func(g *memGuest) bool { w := g.words(dataAt, 3); return w[0] == 1 && w[1] == 2 && w[2] == 3 }},
		{name: "getresgid bad third pointer", nr: unix.SYS_GETRESGID, args: [6]uint64{dataAt, dataAt + 4, badAt}, errno: unix.EFAULT},
		{name: "geteuid", cred: &Cred{UID: 1, EUID: 2}, nr: unix.SYS_GETEUID, val: 2},
		{name: "getegid", cred: &Cred{GID: 1, EGID: 7}, nr: unix.SYS_GETEGID, val: 7},
		{name: "setgroups unprivileged: EPERM before the size", cred: &nobody, nr: unix.SYS_SETGROUPS, args: [6]uint64{1 << 20, badAt}, errno: unix.EPERM},
		{name: "setgroups too many", nr: unix.SYS_SETGROUPS, args: [6]uint64{NGroupsMax + 1, listAt}, errno: unix.EINVAL},
		{name: "setgroups bad list", nr: unix.SYS_SETGROUPS, args: [6]uint64{2, badAt}, errno: unix.EFAULT},
		{name: "setgroups then getgroups", setup: func(g *memGuest) { g.put(listAt, 5, 4) }, nr: unix.SYS_SETGROUPS, args: [6]uint64{2, listAt}},
		{name: "setfsuid returns the old fsuid", nr: unix.SYS_SETFSUID, args: [6]uint64{1000}, val: 0},
		{name: "setfsuid refused still returns it", cred: &nobody, nr: unix.SYS_SETFSUID, args: [6]uint64{0}, val: 65534},
		{name: "setuid(-1) EINVAL", nr: unix.SYS_SETUID, args: [6]uint64{0xffffffff}, errno: unix.EINVAL},
		{name: "capget bad version: v3 written back, EINVAL", setup: func(g *memGuest) { g.put(hdrAt, 0x1234, 0) },
			nr: unix.SYS_CAPGET, args: [6]uint64{hdrAt, dataAt}, errno: unix.EINVAL,
			check: func(g *memGuest) bool { return g.words(hdrAt, 1)[0] == capV3 }},
		{name: "capget probe with NULL data", setup: func(g *memGuest) { g.put(hdrAt, 0x1234, 0) },
			nr: unix.SYS_CAPGET, args: [6]uint64{hdrAt, 0},
			check: func(g *memGuest) bool { return g.words(hdrAt, 1)[0] == capV3 }},
		{name: "capget v3 root", setup: func(g *memGuest) { g.put(hdrAt, capV3, 0) },
			nr: unix.SYS_CAPGET, args: [6]uint64{hdrAt, dataAt},
			check: func(g *memGuest) bool {
				w := g.words(dataAt, 6)
				return w[0] == 0xffffffff && w[1] == 0xffffffff && w[2] == 0 && w[3] == 0x1ff && w[4] == 0x1ff && w[5] == 0
			}},
		{name: "capget v1 copies 32 bits", setup: func(g *memGuest) { g.put(hdrAt, capV1, 0); g.put(dataAt+12, 7, 7, 7) },
			nr: unix.SYS_CAPGET, args: [6]uint64{hdrAt, dataAt},
			check: func(g *memGuest) bool { w := g.words(dataAt, 6); return w[0] == 0xffffffff && w[3] == 7 }},
		{name: "capget own tid", setup: func(g *memGuest) { g.put(hdrAt, capV3, 4242) },
			nr: unix.SYS_CAPGET, args: [6]uint64{hdrAt, dataAt}},
		{name: "capget negative pid", setup: func(g *memGuest) { g.put(hdrAt, capV3, 0xffffffff) },
			nr: unix.SYS_CAPGET, args: [6]uint64{hdrAt, dataAt}, errno: unix.EINVAL},
		{name: "capget bad header", nr: unix.SYS_CAPGET, args: [6]uint64{badAt, dataAt}, errno: unix.EFAULT},
		{name: "capset another pid EPERM", setup: func(g *memGuest) { g.put(hdrAt, capV3, 1) },
			nr: unix.SYS_CAPSET, args: [6]uint64{hdrAt, dataAt}, errno: unix.EPERM},
		{name: "capset v1 drops the upper capabilities",
			setup: func(g *memGuest) { g.put(hdrAt, capV1, 0); g.put(dataAt, 0xffffffff, 0xffffffff, 0) },
			nr:    unix.SYS_CAPSET, args: [6]uint64{hdrAt, dataAt}},
		{name: "capset bad data", setup: func(g *memGuest) { g.put(hdrAt, capV3, 0) },
			nr: unix.SYS_CAPSET, args: [6]uint64{hdrAt, badAt}, errno: unix.EFAULT},
	}
	e := New(Options{RootID: true})
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			g := &memGuest{}
			r := &Request{Nr: s.nr, Args: s.args, G: g, P: e.Start(4242, "/")}
			if s.cred != nil {
				r.P.cred.Store(newProcCred(*s.cred))
			}
			if s.setup != nil {
				s.setup(g)
			}
			res := e.Dispatch(r)
			if res.Errno != s.errno || s.errno == 0 && res.Val != s.val {
				t.Errorf("got %d %v, want %d %v", res.Val, res.Errno, s.val, s.errno)
			}
			if s.check != nil && !s.check(g) {
				t.Errorf("guest memory: %x", g.mem[:48])
			}
			switch s.name {
			case "setgroups then getgroups":
				if c := r.P.creds(); len(c.Groups) != 2 || c.Groups[0] != 4 || c.Groups[1] != 5 {
					t.Errorf("groups %v", c.Groups)
				}
			case "capset v1 drops the upper capabilities":
				if c := r.P.creds(); c.Eff != 0xffffffff || c.Perm != 0xffffffff {
					t.Errorf("caps %#x %#x", c.Eff, c.Perm)
				}
			}
		})
	}
}
