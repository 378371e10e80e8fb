package dispatch

import (
	"runtime"
	"slices"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Cred is a guest process's credentials, changed by the rules Linux applies
// (credentials(7), setuid(2), setresuid(2), setfsuid(2), setgroups(2),
// capabilities(7)). It is a value: every change makes a new one, so that a
// forked child and its parent can share one until either changes. Nothing
// here touches LKL or the host.
//
// The bounding and ambient sets, securebits and no_new_privs are the
// guest's own too, changed by prctl(2) with Linux's rules (below). Not
// emulated: user namespaces, file capabilities and set-user-ID programs.
type Cred struct {
	UID, EUID, SUID, FSUID uint32
	GID, EGID, SGID, FSGID uint32
	// Groups are the supplementary groups, sorted as the kernel keeps
	// them. The slice is shared between Creds: never change it in place.
	Groups []uint32
	// Eff, Perm and Inh are the effective, permitted and inheritable
	// capability sets (bit N is capability N).
	Eff, Perm, Inh uint64
	// Bnd and Amb are the bounding and ambient sets.
	Bnd, Amb uint64
	// Secure is the securebits (SECBIT_*, their lock bits included).
	Secure uint32
	// NoNewPrivs is the guest's own no_new_privs (kbox's on the host is
	// always set).
	NoNewPrivs bool
}

// Securebits (linux/securebits.h): each bit's lock is the bit above it.
// Those Linux 6.14 added (SECBIT_EXEC_*) are unknown, as to the 6.0
// kernel the guest runs on: setting them is EPERM.
const (
	secNoRoot         = 1 << 0
	secNoSetuidFixup  = 1 << 2
	secKeepCaps       = 1 << 4
	secKeepCapsLocked = 1 << 5
	secNoCapAmbRaise  = 1 << 6
	secAllBits        = secNoRoot | secNoSetuidFixup | secKeepCaps | secNoCapAmbRaise
	secAllLocks       = secAllBits << 1
)

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
	return Cred{Groups: []uint32{0}, Eff: CapFull, Perm: CapFull, Bnd: CapFull}
}

// UserCred is a process started with uid and gid in every slot and the
// given supplementary groups: full capabilities for uid 0, none otherwise.
func UserCred(uid, gid uint32, groups []uint32) Cred {
	c := Cred{UID: uid, EUID: uid, SUID: uid, FSUID: uid, GID: gid, EGID: gid, SGID: gid, FSGID: gid,
		Groups: sortedGroups(groups), Bnd: CapFull}
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
		c.Eff == o.Eff && c.Perm == o.Perm && c.Inh == o.Inh && c.Bnd == o.Bnd && c.Amb == o.Amb &&
		c.Secure == o.Secure && c.NoNewPrivs == o.NoNewPrivs && slices.Equal(c.Groups, o.Groups)
}

// secure reports whether securebit b is set.
func (c *Cred) secure(b uint32) bool { return c.Secure&b != 0 }

// fixSetuid is the capability effect of a change of the real, effective or
// saved uid (the kernel's cap_emulate_setxuid), unless
// SECBIT_NO_SETUID_FIXUP: leaving uid 0 in all three clears the ambient
// set, and permitted and effective unless SECBIT_KEEP_CAPS; the euid
// leaving 0 clears effective; the euid becoming 0 restores effective from
// permitted.
func fixSetuid(n *Cred, old *Cred) {
	if old.secure(secNoSetuidFixup) {
		return
	}
	oldRoot := old.UID == 0 || old.EUID == 0 || old.SUID == 0
	newRoot := n.UID == 0 || n.EUID == 0 || n.SUID == 0
	if oldRoot && !newRoot {
		if !old.secure(secKeepCaps) {
			n.Perm, n.Eff = 0, 0
		}
		n.Amb = 0
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
// fsuid. Unless SECBIT_NO_SETUID_FIXUP, the fsuid leaving 0 drops the
// filesystem capabilities from the effective set; coming back to 0 raises
// them again from permitted.
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
	if c.secure(secNoSetuidFixup) {
		return n, old
	}
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

// SetCaps is capset(2) on the caller itself. The ambient set keeps only
// what stays both permitted and inheritable.
func (c Cred) SetCaps(eff, perm, inh uint64) (Cred, unix.Errno) {
	eff, perm, inh = eff&CapFull, perm&CapFull, inh&CapFull
	// Without CAP_SETPCAP, new inheritable capabilities must come from
	// the inheritable or permitted sets; with it too, from the
	// inheritable or bounding sets.
	if !c.Has(capSetpcap) && inh&^(c.Inh|c.Perm) != 0 || inh&^(c.Inh|c.Bnd) != 0 {
		return c, unix.EPERM
	}
	if perm&^c.Perm != 0 || eff&^perm != 0 {
		return c, unix.EPERM
	}
	n := c
	n.Eff, n.Perm, n.Inh = eff, perm, inh
	n.Amb &= perm & inh
	return n, 0
}

// Exec is what execve does to the credentials of a program without
// set-user-ID or set-group-ID effect and without file capabilities (kbox
// never honours those). A real or effective uid 0 (unless SECBIT_NOROOT)
// gets the inheritable and bounding sets as permitted, effective too when
// the euid is 0; any other process gets no capabilities but its ambient
// set, which stays and is added to both. Under the guest's no_new_privs an
// exec that would gain permitted capabilities instead keeps them to what
// they were and resets the effective ids to the real ones (the kernel's
// downgrade). The saved and filesystem ids become the effective ones;
// SECBIT_KEEP_CAPS is cleared.
func (c Cred) Exec() Cred {
	n := c
	var perm uint64
	effective := false
	if !c.secure(secNoRoot) {
		if c.UID == 0 || c.EUID == 0 {
			perm = c.Bnd | c.Inh // (bounding & file) | (inheritable & file)
		}
		effective = c.EUID == 0
	}
	if perm&^c.Perm != 0 && c.NoNewPrivs {
		n.EUID, n.EGID = c.UID, c.GID
		perm &= c.Perm
	}
	n.Perm = perm | c.Amb
	n.Eff = c.Amb
	if effective {
		n.Eff = n.Perm
	}
	n.SUID, n.FSUID = n.EUID, n.EUID
	n.SGID, n.FSGID = n.EGID, n.EGID
	n.Secure &^= secKeepCaps
	return n
}

// Access is the credentials access(2) and faccessat(2) check with (unless
// AT_EACCESS): the real uid and gid as filesystem ids, and every permitted
// capability when the real uid is 0, none otherwise (the effective set as
// it is under SECBIT_NO_SETUID_FIXUP).
func (c Cred) Access() Cred {
	n := c
	n.FSUID, n.FSGID = c.UID, c.GID
	if c.secure(secNoSetuidFixup) {
		return n
	}
	if c.UID == 0 {
		n.Eff = c.Perm
	} else {
		n.Eff = 0
	}
	return n
}

// Ambient set operations (PR_CAP_AMBIENT's second argument).
const (
	ambIsSet    = 1
	ambRaise    = 2
	ambLower    = 3
	ambClearAll = 4
)

// CapbsetDrop is prctl(PR_CAPBSET_DROP): CAP_SETPCAP is checked before the
// capability's number.
func (c Cred) CapbsetDrop(capn uint64) (Cred, unix.Errno) {
	if !c.Has(capSetpcap) {
		return c, unix.EPERM
	}
	if capn > CapLast {
		return c, unix.EINVAL
	}
	n := c
	n.Bnd &^= 1 << capn
	return n, 0
}

// SetSecurebits is prctl(PR_SET_SECUREBITS): EPERM for a change of a
// locked bit, an unlock, an unknown bit or a caller without CAP_SETPCAP.
func (c Cred) SetSecurebits(bits uint64) (Cred, unix.Errno) {
	old := uint64(c.Secure)
	locks := old & secAllLocks
	if locks>>1&(old^bits) != 0 || locks&^bits != 0 || bits&^(secAllBits|secAllLocks) != 0 || !c.Has(capSetpcap) {
		return c, unix.EPERM
	}
	n := c
	n.Secure = uint32(bits)
	return n, 0
}

// SetKeepCaps is prctl(PR_SET_KEEPCAPS): 0 or 1 (EINVAL), unless locked
// (EPERM).
func (c Cred) SetKeepCaps(v uint64) (Cred, unix.Errno) {
	if v > 1 {
		return c, unix.EINVAL
	}
	if c.secure(secKeepCapsLocked) {
		return c, unix.EPERM
	}
	n := c
	n.Secure &^= secKeepCaps
	if v == 1 {
		n.Secure |= secKeepCaps
	}
	return n, 0
}

// Ambient is prctl(PR_CAP_AMBIENT, op, capn, a4, a5): IS_SET's answer, or
// the new credentials of RAISE (the capability must be permitted and
// inheritable, and SECBIT_NO_CAP_AMBIENT_RAISE unset), LOWER and
// CLEAR_ALL. Unused arguments must be 0.
func (c Cred) Ambient(op, capn, a4, a5 uint64) (int64, Cred, unix.Errno) {
	if op == ambClearAll {
		if capn|a4|a5 != 0 {
			return 0, c, unix.EINVAL
		}
		n := c
		n.Amb = 0
		return 0, n, 0
	}
	if capn > CapLast || a4|a5 != 0 {
		return 0, c, unix.EINVAL
	}
	bit := uint64(1) << capn
	n := c
	switch op {
	case ambIsSet:
		if c.Amb&bit != 0 {
			return 1, c, 0
		}
		return 0, c, 0
	case ambRaise:
		if c.Perm&bit == 0 || c.Inh&bit == 0 || c.secure(secNoCapAmbRaise) {
			return 0, c, unix.EPERM
		}
		n.Amb |= bit
	case ambLower:
		n.Amb &^= bit
	default:
		return 0, c, unix.EINVAL
	}
	return 0, n, 0
}

// procCred is a process's credentials (cred.go) with the views LKL checks
// them through: fs for every file operation, access for access(2) and
// faccessat(2) without AT_EACCESS (real ids as filesystem ids). Both are
// interned by lkl.NewCred, so they are usually the same *lkl.Cred, and
// processes with the same credentials share them.
type procCred struct {
	Cred
	fs, access *lkl.Cred
	// vfsRoot says LKL's permission checks pass for any file mode:
	// CAP_DAC_OVERRIDE is effective (see openCached).
	vfsRoot bool
}

func newProcCred(c Cred) *procCred {
	a := c.Access()
	return &procCred{
		Cred:    c,
		fs:      lkl.NewCred(c.FSUID, c.FSGID, c.Groups, c.Eff),
		access:  lkl.NewCred(a.FSUID, a.FSGID, a.Groups, a.Eff),
		vfsRoot: c.Has(capDacOverride),
	}
}

// initialCred is the first process's credentials: root with -S/-0, UID:GID
// with --change-id, otherwise kbox's own host ids and groups.
func initialCred(opt *Options) Cred {
	switch {
	case opt.RootID:
		return RootCred()
	case opt.ChangeID:
		return UserCred(opt.UID, opt.GID, []uint32{opt.GID})
	}
	var groups []uint32
	if gs, err := unix.Getgroups(); err == nil {
		for _, g := range gs {
			groups = append(groups, uint32(g))
		}
	}
	return UserCred(uint32(unix.Getuid()), uint32(unix.Getgid()), groups)
}

// unknownCred is what a process of unknown credentials (Lookup) holds
// until its kill takes effect: the overflow ids, no group, no capability.
func unknownCred() Cred {
	return UserCred(65534, 65534, nil)
}

// creds returns p's credentials.
func (p *Proc) creds() *procCred { return p.cred.Load() }

// setCred gives p new credentials (a set*id or capset, an exec). Children
// that p forked before and that have not made a notified syscall yet are
// registered first, with the credentials they were forked with.
func (e *Engine) setCred(p *Proc, c Cred) {
	if cur := p.cred.Load(); cur.Equal(&c) {
		return
	}
	e.registerChildren(p)
	if !c.Equal(&e.initCred.Cred) {
		e.credsChanged.Store(true)
	}
	p.cred.Store(newProcCred(c))
}

// useCred makes this thread's LKL calls run with the caller's credentials
// (applied lazily, by the next LKL call that needs them: lkl.UseCred).
func useCred(r *Request) unix.Errno {
	if r.P == nil {
		return 0
	}
	if err := lkl.UseCredOn(r.CredSlot, r.P.creds().fs); err != nil {
		return unix.ENOMEM
	}
	return 0
}

// asRoot runs kbox's own LKL work on the serving thread (shadow fills and
// write-backs, reading a program for exec) as root, whatever guest it
// serves (lkl.AsRoot).
func asRoot(f func()) { lkl.AsRoot(f) }

// lklOpen opens an image path in LKL for e.open with the caller's
// credentials. lflags may ask for read access the guest did not (a
// write-only open of a file that becomes a shadow is filled from the
// file): when that is all the caller lacks, the file is opened as the
// guest asked, which checks permissions, creates and truncates under its
// credentials, and a regular file that will be a shadow is then reopened
// for kbox, as root, read-write.
func (e *Engine) lklOpen(r *Request, path string, lflags int, mode uint32, flags int) (uintptr, unix.Errno) {
	return e.lklOpenAt(r, atFdcwd, path, lflags, mode, flags)
}

// lklOpenAt is lklOpen relative to the LKL fd dirfd.
func (e *Engine) lklOpenAt(r *Request, dirfd uintptr, path string, lflags int, mode uint32, flags int) (uintptr, unix.Errno) {
	fd, le := lklPath(lkl.SysOpenat, 1, path, [6]uintptr{dirfd, 0, uintptr(lflags), uintptr(mode)})
	if le != unix.EACCES || flags&unix.O_ACCMODE != unix.O_WRONLY || lflags&unix.O_ACCMODE != unix.O_RDWR {
		return fd, le
	}
	wflags := lflags&^unix.O_ACCMODE | unix.O_WRONLY
	wfd, le := lklPath(lkl.SysOpenat, 1, path, [6]uintptr{dirfd, 0, uintptr(wflags), uintptr(mode)})
	if le != 0 {
		return 0, le
	}
	st, err := lkl.Fstat(int(wfd))
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || !e.Shadows.Fits(st.Size) || flags&unix.O_PATH != 0 {
		return wfd, 0 // a virtual fd, write-only as asked
	}
	rflags := lflags &^ (unix.O_CREAT | unix.O_EXCL | unix.O_TRUNC)
	asRoot(func() {
		fd, le = lklPath(lkl.SysOpenat, 1, path, [6]uintptr{dirfd, 0, uintptr(rflags), 0})
	})
	if le == 0 {
		if rst, err := lkl.Fstat(int(fd)); err != nil || rst.Dev != st.Dev || rst.Ino != st.Ino {
			lkl.Close(int(fd))
			le = unix.EACCES
		}
	}
	lkl.Close(int(wfd))
	return fd, le
}

// lklAccess is faccessat2 in LKL for an image path: the effective ids with
// AT_EACCESS, otherwise the real ones (applied as filesystem ids for this
// call; LKL itself then always checks with AT_EACCESS, since its task's
// real ids are root's).
func lklAccess(r *Request, path string, mode, flags int) unix.Errno {
	var restore *lkl.Cred
	if flags&unix.AT_EACCESS == 0 && r.P != nil {
		if c := r.P.creds(); c.access != c.fs {
			if lkl.UseCred(c.access) != nil {
				return unix.ENOMEM
			}
			restore = c.fs
		}
	}
	sc := getScratch()
	b := sc.cstring(path)
	_, le := lkl.Syscall6(lkl.SysFaccessat2, atFdcwd, uptr(b), uintptr(mode), uintptr(flags|unix.AT_EACCESS), 0, 0)
	runtime.KeepAlive(b)
	putScratch(sc)
	if restore != nil {
		lkl.UseCred(restore) // the same groups as before: nothing to allocate
	}
	return le
}
