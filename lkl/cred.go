package lkl

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// Cred is what LKL's file permission checks look at of a caller: the
// filesystem uid and gid, the supplementary groups and the effective
// capabilities (bit N is capability N). Get one from NewCred and never
// change it: its id stands for its content.
//
// LKL gives every host thread that calls into it a kernel task of its own,
// created with root's credentials. UseCred makes a thread's later LKL calls
// run with a Cred: its task's fsuid, fsgid, groups and effective
// capabilities are switched (by LKL's own setgroups, setfsgid, setfsuid and
// capset), while its real, effective and saved uid stay 0 and its permitted
// set full, so that it can always switch back. The switch happens in the
// thread's next LKL call, and only when the Cred differs from the last one
// applied on that thread (the cache is C thread-local storage, cred.c).
//
// Every thread that never calls UseCred runs as root: kbox's own work
// (setup, bridges' pumps, the observatory) does not switch.
type Cred struct {
	id           uint64
	FSUID, FSGID uint32
	Groups       []uint32
	CapEff       uint64
}

// ID identifies the Cred's content: two Creds from NewCred with the same
// content share an id while both are recent; ids are never reused. Root (a
// nil *Cred) is 0.
func (c *Cred) ID() uint64 {
	if c == nil {
		return 0
	}
	return c.id
}

var (
	credMu   sync.Mutex
	credByID = map[string]*Cred{}
	credNext atomic.Uint64
)

// credCacheMax bounds the Creds NewCred remembers for reuse; beyond it the
// table starts again (a new Cred with the same content then gets a new id,
// which costs one switch, never a wrong one).
const credCacheMax = 256

// NewCred returns the Cred for these credentials. groups is copied.
func NewCred(fsuid, fsgid uint32, groups []uint32, capEff uint64) *Cred {
	key := make([]byte, 16+4*len(groups))
	binary.LittleEndian.PutUint32(key, fsuid)
	binary.LittleEndian.PutUint32(key[4:], fsgid)
	binary.LittleEndian.PutUint64(key[8:], capEff)
	for i, g := range groups {
		binary.LittleEndian.PutUint32(key[16+4*i:], g)
	}
	credMu.Lock()
	defer credMu.Unlock()
	if c := credByID[string(key)]; c != nil {
		return c
	}
	if len(credByID) >= credCacheMax {
		credByID = map[string]*Cred{}
	}
	c := &Cred{id: credNext.Add(1), FSUID: fsuid, FSGID: fsgid, Groups: append([]uint32(nil), groups...), CapEff: capEff}
	credByID[string(key)] = c
	return c
}

// UseCred makes the LKL calls of the calling OS thread run with c from now
// on; nil is kbox's own root. The caller must keep its goroutine on the
// thread (runtime.LockOSThread) for as long as this matters, and go back to
// nil before it unlocks: another goroutine could otherwise run on the
// thread with c. It fails only if memory for the groups cannot be had.
func UseCred(c *Cred) error { return useCred(c) }

// CredSlot is the calling OS thread's record of the credentials its LKL
// calls want (C thread-local storage), for UseCredOn. Only a goroutine
// locked to that thread may use it; nil without liblkl.
func CredSlot() *uint64 { return credSlot() }

// UseCredOn is UseCred for a goroutine locked to the thread whose
// CredSlot slot is (or nil: UseCred): when the thread already wants c, it
// returns without calling into C (about 60 ns, a system call's tenth in
// the in-process tiers).
func UseCredOn(slot *uint64, c *Cred) error {
	if slot != nil && *slot == c.ID() {
		return nil
	}
	return useCred(c)
}

// AsRoot runs f with the calling thread's LKL calls as root, then returns
// the thread to the credentials it had: kbox's internal LKL work on a
// thread serving a guest (shadow fills and write-backs, preparing an exec).
// Sections nest. A Cred that is already root for the VFS (fsuid 0 and
// every capability) is kept as it is, so a root guest never switches.
func AsRoot(f func()) {
	rootBegin()
	defer rootEnd()
	f()
}

// AppliedCredID reports the id of the credentials last applied to the
// calling thread's LKL task (0: root), for tests.
func AppliedCredID() uint64 { return appliedCred() }
