package dispatch

import (
	"slices"

	"golang.org/x/sys/unix"
)

// Cred is a guest process's credentials, changed by the rules Linux applies
// (credentials(7), setuid(2), setresuid(2), setfsuid(2), setgroups(2),
// capabilities(7)). It is a value: every change makes a new one, so that a
// forked child and its parent can share one until either changes. Nothing
// here touches LKL or the host.
//
// Not emulated: securebits (SECURE_KEEP_CAPS, SECURE_NO_SETUID_FIXUP,
// ...), the ambient and bounding sets (prctl runs on the host), user
// namespaces, file capabilities and set-user-ID programs.
type Cred struct {
	UID, EUID, SUID, FSUID uint32
	GID, EGID, SGID, FSGID uint32
	// Groups are the supplementary groups, sorted as the kernel keeps
	// them. The slice is shared between Creds: never change it in place.
	Groups []uint32
	// Eff, Perm and Inh are the effective, permitted and inheritable
	// capability sets (bit N is capability N).
	Eff, Perm, Inh uint64
}

// Capability numbers (linux/capability.h) that the rules below use.
const (
	capChown          = 0
	capDacOverride    = 1
	capDacReadSearch  = 2
	capFowner         = 3
	capFsetid         = 4
	capSetgid         = 6
	capSetuid         = 7
	capSetpcap        = 8
	capLinuxImmutable = 9
	capMknod          = 27
	capMacOverride    = 32
	// CapLast is the highest capability the kernels kbox runs on know
	// (CAP_CHECKPOINT_RESTORE, Linux 5.9 and later, LKL 6.0 included).
	CapLast = 40
)

// CapFull is every capability up to CapLast.
const CapFull = uint64(1)<<(CapLast+1) - 1

// capFSSet is the kernel's CAP_FS_SET: the capabilities that follow the
// fsuid in and out of 0.
const capFSSet = 1<<capChown | 1<<capDacOverride | 1<<capDacReadSearch | 1<<capFowner |
	1<<capFsetid | 1<<capLinuxImmutable | 1<<capMknod | 1<<capMacOverride

// NGroupsMax is the kernel's NGROUPS_MAX.
const NGroupsMax = 65536

// noID is the -1 of set*id's "leave it unchanged" (and never a valid id).
const noID = ^uint32(0)

// RootCred is uid and gid 0 in every slot, group 0 and every capability:
// a process started as root.
func RootCred() Cred {
	return Cred{Groups: []uint32{0}, Eff: CapFull, Perm: CapFull}
}

// UserCred is a process started with uid and gid in every slot and the
// given supplementary groups: full capabilities for uid 0, none otherwise.
func UserCred(uid, gid uint32, groups []uint32) Cred {
	c := Cred{UID: uid, EUID: uid, SUID: uid, FSUID: uid, GID: gid, EGID: gid, SGID: gid, FSGID: gid,
		Groups: sortedGroups(groups)}
	if uid == 0 {
		c.Eff, c.Perm = CapFull, CapFull
	}
	return c
}

func sortedGroups(g []uint32) []uint32 {
	s := slices.Clone(g)
	slices.Sort(s)
	return s
}

// Has reports whether capability n is in the effective set.
func (c *Cred) Has(n int) bool { return c.Eff&(1<<n) != 0 }

// mayWrite reports whether c may open for writing a file of owner uid,
// group gid and permission bits mode, as the kernel's permission check
// decides it: the owner's bits, else the group's (the fsgid or a
// supplementary group), else the others'; CAP_DAC_OVERRIDE may always.
func (c *Cred) mayWrite(uid, gid, mode uint32) bool {
	switch {
	case c.Has(capDacOverride):
		return true
	case c.FSUID == uid:
		return mode&0o200 != 0
	case c.FSGID == gid || slices.Contains(c.Groups, gid):
		return mode&0o020 != 0
	}
	return mode&0o002 != 0
}

// Equal reports whether two Creds are the same credentials.
func (c *Cred) Equal(o *Cred) bool {
	return c.UID == o.UID && c.EUID == o.EUID && c.SUID == o.SUID && c.FSUID == o.FSUID &&
		c.GID == o.GID && c.EGID == o.EGID && c.SGID == o.SGID && c.FSGID == o.FSGID &&
		c.Eff == o.Eff && c.Perm == o.Perm && c.Inh == o.Inh && slices.Equal(c.Groups, o.Groups)
}

// fixSetuid is the capability effect of a change of the real, effective or
// saved uid (the kernel's cap_emulate_setxuid): leaving uid 0 in all three
// clears permitted and effective; the euid leaving 0 clears effective; the
// euid becoming 0 restores effective from permitted.
func fixSetuid(n *Cred, old *Cred) {
	oldRoot := old.UID == 0 || old.EUID == 0 || old.SUID == 0
	newRoot := n.UID == 0 || n.EUID == 0 || n.SUID == 0
	if oldRoot && !newRoot {
		n.Perm, n.Eff = 0, 0
	}
	if old.EUID == 0 && n.EUID != 0 {
		n.Eff = 0
	}
	if old.EUID != 0 && n.EUID == 0 {
		n.Eff = n.Perm
	}
}

// SetUID is setuid(2).
func (c Cred) SetUID(uid uint32) (Cred, unix.Errno) {
	if uid == noID {
		return c, unix.EINVAL
	}
	n := c
	switch {
	case c.Has(capSetuid):
		n.UID, n.SUID = uid, uid
	case uid != c.UID && uid != c.SUID:
		return c, unix.EPERM
	}
	n.EUID, n.FSUID = uid, uid
	fixSetuid(&n, &c)
	return n, 0
}

// SetGID is setgid(2).
func (c Cred) SetGID(gid uint32) (Cred, unix.Errno) {
	if gid == noID {
		return c, unix.EINVAL
	}
	n := c
	switch {
	case c.Has(capSetgid):
		n.GID, n.EGID, n.SGID, n.FSGID = gid, gid, gid, gid
	case gid == c.GID || gid == c.SGID:
		n.EGID, n.FSGID = gid, gid
	default:
		return c, unix.EPERM
	}
	return n, 0
}

// SetREUID is setreuid(2): -1 leaves an id as it is.
func (c Cred) SetREUID(ruid, euid uint32) (Cred, unix.Errno) {
	n := c
	priv := c.Has(capSetuid)
	if ruid != noID {
		if ruid != c.UID && ruid != c.EUID && !priv {
			return c, unix.EPERM
		}
		n.UID = ruid
	}
	if euid != noID {
		if euid != c.UID && euid != c.EUID && euid != c.SUID && !priv {
			return c, unix.EPERM
		}
		n.EUID = euid
	}
	if ruid != noID || euid != noID && euid != c.UID {
		n.SUID = n.EUID
	}
	n.FSUID = n.EUID
	fixSetuid(&n, &c)
	return n, 0
}

// SetREGID is setregid(2).
func (c Cred) SetREGID(rgid, egid uint32) (Cred, unix.Errno) {
	n := c
	priv := c.Has(capSetgid)
	if rgid != noID {
		if rgid != c.GID && rgid != c.EGID && !priv {
			return c, unix.EPERM
		}
		n.GID = rgid
	}
	if egid != noID {
		if egid != c.GID && egid != c.EGID && egid != c.SGID && !priv {
			return c, unix.EPERM
		}
		n.EGID = egid
	}
	if rgid != noID || egid != noID && egid != c.GID {
		n.SGID = n.EGID
	}
	n.FSGID = n.EGID
	return n, 0
}

// SetRESUID is setresuid(2). Without CAP_SETUID each new id must be one of
// the current real, effective or saved uids.
func (c Cred) SetRESUID(ruid, euid, suid uint32) (Cred, unix.Errno) {
	if (ruid == noID || ruid == c.UID) && (euid == noID || euid == c.EUID && euid == c.FSUID) &&
		(suid == noID || suid == c.SUID) {
		return c, 0 // nothing changes
	}
	isNew := func(id uint32) bool { return id != noID && id != c.UID && id != c.EUID && id != c.SUID }
	if (isNew(ruid) || isNew(euid) || isNew(suid)) && !c.Has(capSetuid) {
		return c, unix.EPERM
	}
	n := c
	if ruid != noID {
		n.UID = ruid
	}
	if euid != noID {
		n.EUID = euid
	}
	if suid != noID {
		n.SUID = suid
	}
	n.FSUID = n.EUID
	fixSetuid(&n, &c)
	return n, 0
}

// SetRESGID is setresgid(2).
func (c Cred) SetRESGID(rgid, egid, sgid uint32) (Cred, unix.Errno) {
	if (rgid == noID || rgid == c.GID) && (egid == noID || egid == c.EGID && egid == c.FSGID) &&
		(sgid == noID || sgid == c.SGID) {
		return c, 0
	}
	isNew := func(id uint32) bool { return id != noID && id != c.GID && id != c.EGID && id != c.SGID }
	if (isNew(rgid) || isNew(egid) || isNew(sgid)) && !c.Has(capSetgid) {
		return c, unix.EPERM
	}
	n := c
	if rgid != noID {
		n.GID = rgid
	}
	if egid != noID {
		n.EGID = egid
	}
	if sgid != noID {
		n.SGID = sgid
	}
	n.FSGID = n.EGID
	return n, 0
}

// SetFSUID is setfsuid(2): it returns the new credentials (unchanged when
// the call is not allowed, which setfsuid does not report) and the old
// fsuid. The fsuid leaving 0 drops the filesystem capabilities from the
// effective set; coming back to 0 raises them again from permitted.
func (c Cred) SetFSUID(uid uint32) (Cred, uint32) {
	old := c.FSUID
	if uid == noID || uid == c.FSUID {
		return c, old
	}
	if uid != c.UID && uid != c.EUID && uid != c.SUID && !c.Has(capSetuid) {
		return c, old
	}
	n := c
	n.FSUID = uid
	if old == 0 && uid != 0 {
		n.Eff &^= capFSSet
	}
	if old != 0 && uid == 0 {
		n.Eff |= n.Perm & capFSSet
	}
	return n, old
}

// SetFSGID is setfsgid(2), as SetFSUID without capability effects.
func (c Cred) SetFSGID(gid uint32) (Cred, uint32) {
	old := c.FSGID
	if gid == noID || gid == c.FSGID {
		return c, old
	}
	if gid != c.GID && gid != c.EGID && gid != c.SGID && !c.Has(capSetgid) {
		return c, old
	}
	n := c
	n.FSGID = gid
	return n, old
}

// SetGroups is setgroups(2) with the list already read. The handler checks
// CAP_SETGID (EPERM) and the size (EINVAL) before it reads the list, as
// the kernel does; they are checked here again.
func (c Cred) SetGroups(groups []uint32) (Cred, unix.Errno) {
	if !c.Has(capSetgid) {
		return c, unix.EPERM
	}
	if len(groups) > NGroupsMax {
		return c, unix.EINVAL
	}
	for _, g := range groups {
		if g == noID {
			return c, unix.EINVAL
		}
	}
	n := c
	n.Groups = sortedGroups(groups)
	return n, 0
}

// SetCaps is capset(2) on the caller itself. The bounding set is taken as
// full (it is not emulated).
func (c Cred) SetCaps(eff, perm, inh uint64) (Cred, unix.Errno) {
	eff, perm, inh = eff&CapFull, perm&CapFull, inh&CapFull
	// Without CAP_SETPCAP, new inheritable capabilities must come from
	// the inheritable or permitted sets.
	if !c.Has(capSetpcap) && inh&^(c.Inh|c.Perm) != 0 {
		return c, unix.EPERM
	}
	if perm&^c.Perm != 0 || eff&^perm != 0 {
		return c, unix.EPERM
	}
	n := c
	n.Eff, n.Perm, n.Inh = eff, perm, inh
	return n, 0
}

// Exec is what execve does to the credentials of a program without
// set-user-ID or set-group-ID effect and without file capabilities (kbox
// never honours those: the guest runs with no_new_privs). A real or
// effective uid 0 gets the inheritable and bounding sets (all) as
// permitted, effective too when the euid is 0; any other process gets no
// capabilities. Under no_new_privs an exec that would gain permitted
// capabilities instead keeps them to what they were and resets the
// effective ids to the real ones (the kernel's downgrade). The saved and
// filesystem ids become the effective ones.
func (c Cred) Exec() Cred {
	n := c
	var perm uint64
	if c.UID == 0 || c.EUID == 0 {
		perm = CapFull // (inheritable & file inheritable) | bounding
	}
	effective := c.EUID == 0
	if perm&^c.Perm != 0 {
		n.EUID, n.EGID = c.UID, c.GID
		perm &= c.Perm
	}
	n.Perm, n.Eff = perm, 0
	if effective {
		n.Eff = perm
	}
	n.SUID, n.FSUID = n.EUID, n.EUID
	n.SGID, n.FSGID = n.EGID, n.EGID
	return n
}

// Access is the credentials access(2) and faccessat(2) check with (unless
// AT_EACCESS): the real uid and gid as filesystem ids, and every permitted
// capability when the real uid is 0, none otherwise.
func (c Cred) Access() Cred {
	n := c
	n.FSUID, n.FSGID = c.UID, c.GID
	if c.UID == 0 {
		n.Eff = c.Perm
	} else {
		n.Eff = 0
	}
	return n
}
