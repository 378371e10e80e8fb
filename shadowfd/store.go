package shadowfd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kbox-project/kbox/seccomp/startup"
)

// Content files and where they live.
//
// A node's content is a host file that no host path names. On a
// filesystem the guest cannot write (a read-only image), it is a file in
// an unbounded private tmpfs when kbox may mount itself (fsOf), else a
// memfd. On a writable one it is a file in a private tmpfs mount whose
// size kbox keeps equal to what
// the LKL filesystem behind it can still hold (space.go): a guest write
// that the image could not take then fails natively, at the write(2), with
// ENOSPC, exactly as on Linux, and the file holds exactly what the writes
// reported. Without such a mount (see below) content files are memfds and
// a write-back that finds the image full can only report ENOSPC later, at
// fsync, msync, sync or syncfs (docs/tiers.md).
//
// The tmpfs is made with the new mount API (fsopen, fsconfig, fsmount) and
// never attached anywhere: no host path names it, and it disappears with
// kbox's last fd of it, even when kbox is killed. Making it needs
// CAP_SYS_ADMIN over kbox's mount namespace. kbox has it when it runs as
// root; otherwise a helper process made in a new user and mount namespace
// (which any user may create where unprivileged user namespaces are
// allowed) makes the mounts and resizes them on kbox's request, handing
// kbox an fd of each mount's root.

// mounter makes size-limited tmpfs mounts and resizes them, and devpts
// instances.
type mounter interface {
	// mount returns an O_DIRECTORY fd of the root of a new tmpfs of
	// size bytes, and the mount's id for resize.
	mount(size int64) (dirfd, id int, err error)
	resize(id int, size int64) error
	// devpts returns an O_PATH fd of the root of a new devpts instance.
	devpts() (dirfd int, err error)
	close()
}

// StoreMode selects the content store (KBOX_STORE, for tests): "" picks
// the best available, "memfd" forces memfds, "helper" forces the helper
// process even when kbox could mount itself.
var StoreMode = os.Getenv("KBOX_STORE")

// stores is the Manager's source of size-limited mounts, made on first use.
type stores struct {
	once sync.Once
	m    mounter
	why  error // why there is no mounter

	dOnce sync.Once
	d     *directMounter // kbox's own, when it may mount (direct)
}

// unbounded is the size of a tmpfs that only names content files (of a
// read-only filesystem: nothing is ever written there by a guest).
const unbounded = 1 << 50

// direct returns kbox's own mounter when kbox may mount, or nil; it
// never starts the helper. Only with no KBOX_STORE.
func (s *stores) direct() *directMounter {
	s.dOnce.Do(func() {
		if StoreMode == "" {
			s.d, _ = newDirectMounter()
		}
	})
	return s.d
}

// get returns the mounter for content files, unless KBOX_STORE=memfd.
func (s *stores) get() (mounter, error) {
	if StoreMode == "memfd" {
		return nil, errors.New("KBOX_STORE=memfd")
	}
	return s.any()
}

// any returns the mounter, made on first use: kbox itself when it may
// mount, else the helper.
func (s *stores) any() (mounter, error) {
	s.once.Do(func() {
		if StoreMode == "helper" {
			s.m, s.why = startHelper()
			return
		}
		if d := s.direct(); d != nil {
			s.m = d
			return
		}
		if e := early.Swap(nil); e != nil {
			<-e.done
			if e.m != nil || e.err != nil {
				s.m, s.why = e.m, e.err
				return
			}
		}
		s.m, s.why = startHelper()
	})
	return s.m, s.why
}

// earlyHelper is a helper started before any Manager asked (Prestart).
type earlyHelper struct {
	done chan struct{}
	m    mounter // nil, and err nil, when kbox may mount itself
	err  error
}

var early atomic.Pointer[earlyHelper]

// Prestart starts the helper now, beside the kernel's boot, when kbox
// may not make its mounts itself (it is not root) and the run's guests
// may write: the helper is kbox started again in a user namespace of its
// own, which takes milliseconds, and the first writable shadow (the
// guest's libc, at its exec) would otherwise wait for it. The first
// Manager to need a mounter takes it; CloseEarly ends one none took.
func Prestart() {
	if StoreMode != "" {
		return
	}
	e := &earlyHelper{done: make(chan struct{})}
	if !early.CompareAndSwap(nil, e) {
		return
	}
	go func() {
		defer close(e.done)
		if d, err := newDirectMounter(); err == nil {
			d.close()
			return
		}
		e.m, e.err = startHelper()
	}()
}

// CloseEarly ends the helper Prestart started if no Manager took it.
func CloseEarly() {
	if e := early.Swap(nil); e != nil {
		<-e.done
		if e.m != nil {
			e.m.close()
		}
	}
}

// Devpts mounts a new devpts instance, private to kbox (never attached to
// any mount tree: no host path names it, and it goes with kbox's last fd
// of it), and returns an O_PATH fd of its root. Its ptmx is open to all
// (ptmxmode=0666) and its ptys are made mode 0620, as a system's
// /dev/pts. Made by kbox when it may mount, else by the helper (devpts
// may be mounted in a user namespace).
func (m *Manager) Devpts() (int, error) {
	mt, err := m.stores.any()
	if err != nil {
		return -1, err
	}
	return mt.devpts()
}

func (s *stores) close() {
	if s.m != nil {
		s.m.close()
	}
	if s.d != nil && s.m != mounter(s.d) {
		s.d.close()
	}
}

// directMounter makes the mounts in kbox's own process.
type directMounter struct {
	mu   sync.Mutex
	mnts map[int]int // id -> mount fd
	next int
}

func newDirectMounter() (*directMounter, error) {
	d := &directMounter{mnts: map[int]int{}}
	// A probe: refused unless kbox may mount here.
	dir, id, err := d.mount(1 << 20)
	if err != nil {
		return nil, err
	}
	unix.Close(dir)
	d.drop(id)
	return d, nil
}

// FSPICK_* flags (linux/mount.h), which x/sys/unix lacks.
const (
	fspickCloexec   = 0x1
	fspickEmptyPath = 0x8
)

// pageSize rounds tmpfs sizes: the kernel counts whole pages.
var pageSize = int64(os.Getpagesize())

func sizeArg(size int64) string {
	if size < pageSize {
		size = pageSize // size=0 would mean no limit
	}
	return strconv.FormatInt(size, 10)
}

func (d *directMounter) mount(size int64) (int, int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, 0, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"size", sizeArg(size)}, {"mode", "0700"}, {"huge", "never"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil && kv[0] != "huge" {
			return -1, 0, fmt.Errorf("tmpfs %s=%s: %w", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, 0, fmt.Errorf("tmpfs: create: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, 0, fmt.Errorf("fsmount tmpfs: %w", err)
	}
	dir, err := unix.Openat(mnt, ".", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(mnt)
		return -1, 0, err
	}
	d.mu.Lock()
	d.next++
	id := d.next
	d.mnts[id] = mnt
	d.mu.Unlock()
	return dir, id, nil
}

func (d *directMounter) devpts() (int, error) {
	fs, err := unix.Fsopen("devpts", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen devpts: %w", err)
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"ptmxmode", "0666"}, {"mode", "0620"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("devpts %s=%s: %w", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("devpts: create: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsmount devpts: %w", err)
	}
	return mnt, nil
}

func (d *directMounter) resize(id int, size int64) error {
	d.mu.Lock()
	mnt, ok := d.mnts[id]
	d.mu.Unlock()
	if !ok {
		return unix.EBADF
	}
	pick, err := unix.Fspick(mnt, "", fspickEmptyPath|fspickCloexec)
	if err != nil {
		return fmt.Errorf("fspick: %w", err)
	}
	defer unix.Close(pick)
	if err := unix.FsconfigSetString(pick, "size", sizeArg(size)); err != nil {
		return err
	}
	return unix.FsconfigReconfigure(pick)
}

func (d *directMounter) drop(id int) {
	d.mu.Lock()
	if mnt, ok := d.mnts[id]; ok {
		unix.Close(mnt)
		delete(d.mnts, id)
	}
	d.mu.Unlock()
}

func (d *directMounter) close() {
	d.mu.Lock()
	for id, mnt := range d.mnts {
		unix.Close(mnt)
		delete(d.mnts, id)
	}
	d.mu.Unlock()
}

// The helper: kbox's start-up program (package startup; kbox re-executed
// where built without it) with KBOX_STORE_HELPER=1, in a new user and
// mount namespace (uid 0 inside mapped to kbox's uid). It serves requests
// on a socketpair (fd 3) until kbox closes its end or dies
// (seccomp/supervisor/store.c):
//
//	request: op (1 byte: 'M' mount, 'R' resize, 'P' devpts), id (u32), size (u64)
//	reply:   errno (u32), id (u32); a mount's root fd rides along (SCM_RIGHTS)
//
// It makes the mounts directMounter makes in kbox's own process.
const helperEnv = "KBOX_STORE_HELPER"

type helperMounter struct {
	mu   sync.Mutex
	sock int
	cmd  *exec.Cmd
}

func startHelper() (mounter, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	child := os.NewFile(uintptr(pair[1]), "kbox-store")
	defer child.Close()
	uid, gid := os.Getuid(), os.Getgid()
	cmd := &exec.Cmd{
		Args:       []string{"kbox-store-helper"},
		Env:        []string{helperEnv + "=1"},
		ExtraFiles: []*os.File{child, nil}, // fd 3; fd 4 none
		Stderr:     os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
			GidMappingsEnableSetgroups: false,
			// No parent-death signal: it would fire when the thread that
			// started the helper ends, and Go ends idle threads (kbox's
			// settle, cmd/kbox/settle.go). The helper ends when its
			// socket reads end of file, kbox's last fd of it closed.
		},
	}
	startup.Command(cmd)
	if err := cmd.Start(); err != nil {
		unix.Close(pair[0])
		return nil, fmt.Errorf("no user namespace for the content store helper: %w", err)
	}
	h := &helperMounter{sock: pair[0], cmd: cmd}
	// A probe mount tells that the helper works.
	dir, _, err := h.mount(1 << 20)
	if err != nil {
		h.close()
		return nil, fmt.Errorf("content store helper: %w", err)
	}
	unix.Close(dir)
	return h, nil
}

func (h *helperMounter) call(op byte, id int, size int64) (int, int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var req [13]byte
	req[0] = op
	binary.LittleEndian.PutUint32(req[1:], uint32(id))
	binary.LittleEndian.PutUint64(req[5:], uint64(size))
	if _, err := unix.Write(h.sock, req[:]); err != nil {
		return -1, 0, err
	}
	var rep [8]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(h.sock, rep[:], oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, 0, err
	}
	if n != len(rep) {
		return -1, 0, errors.New("content store helper hung up")
	}
	fd := -1
	if oobn > 0 {
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
			if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
				fd = fds[0]
			}
		}
	}
	if en := unix.Errno(binary.LittleEndian.Uint32(rep[:])); en != 0 {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, 0, en
	}
	return fd, int(binary.LittleEndian.Uint32(rep[4:])), nil
}

func (h *helperMounter) mount(size int64) (int, int, error) {
	dir, id, err := h.call('M', 0, size)
	if err == nil && dir < 0 {
		err = errors.New("content store helper sent no mount")
	}
	return dir, id, err
}

func (h *helperMounter) devpts() (int, error) {
	dir, _, err := h.call('P', 0, 0)
	if err == nil && dir < 0 {
		err = errors.New("content store helper sent no mount")
	}
	return dir, err
}

func (h *helperMounter) resize(id int, size int64) error {
	_, _, err := h.call('R', id, size)
	return err
}

func (h *helperMounter) close() {
	unix.Close(h.sock) // the helper exits on EOF
	if h.cmd != nil {
		h.cmd.Wait()
	}
}

// Prepare makes the content store now instead of at first use: an
// in-process tier (package trap) serves syscalls on the guest's threads,
// and a helper process started from one would inherit its seccomp filter.
func (m *Manager) Prepare() { m.stores.any() }
