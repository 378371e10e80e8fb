package rootfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Profile selects which mounts Setup makes inside the guest root.
type Profile int

const (
	// ProfileNone mounts the image and nothing else (-r).
	ProfileNone Profile = iota
	// ProfileMinimal mounts proc and a /dev.
	ProfileMinimal
	// ProfileFull mounts proc, sysfs, tmpfs on /tmp and a /dev (-R, -S).
	ProfileFull
)

// Options configures Setup.
type Options struct {
	FSType    string
	Partition int
	ReadOnly  bool
	MountOpts []string
	Profile   Profile
	Kernel    lkl.Config
	// TmpSize is the size in bytes of the scratch disk behind /tmp with
	// ProfileFull: 0 picks scratchfs.DefaultSize, a negative size keeps
	// the kernel's ramfs /tmp instead.
	TmpSize int64
	// Overlay, when set, makes the image a copy-on-write disk: the image
	// (opened read-only) is only read, under Overlay.Sealed's layers (only
	// read), and writes go to Overlay.File at the same offsets, each
	// written block marked in Overlay.Dirty (lkl.AddDiskCOW). The mount
	// is read-write.
	Overlay *Overlay
}

// Overlay is the writable layer of a copy-on-write image.
type Overlay struct {
	File   *os.File
	Dirty  *lkl.COWMap
	Sealed []lkl.COWLayer // bottom first
}

// Root is a booted kernel with the image mounted as its root.
type Root struct {
	Image *Image
	Disk  lkl.Disk
	// MountPoint is where LKL mounted the image before the chroot.
	MountPoint string
	// Mounts lists the recommended mounts that were made.
	Mounts []string
	// Warnings lists recommended mounts that the linked kernel or the image
	// could not provide.
	Warnings []string
	// BootTime is the time from boot to a mounted, chrooted root, of
	// which KernelTime the kernel's boot alone.
	BootTime, KernelTime time.Duration
	// UnmountTime is how long Close took to sync and unmount, before the
	// kernel's halt.
	UnmountTime time.Duration
	// Scratch describes the scratch disk behind /tmp, if one is mounted.
	Scratch string
	// HugeFrom is where in the kernel's memory huge pages begin for what
	// the guest's work takes (lkl.HugeRest), -1 if nowhere.
	HugeFrom int64

	// outside is an LKL fd of the kernel's root before the chroot, kept to
	// leave the chroot and unmount the image cleanly at Close.
	outside int
	// kernelProc says a private proc is mounted at telemetryProc outside
	// the chroot, where no guest can reach or unmount it; procFd is an LKL
	// O_PATH fd of it (KernelProc), -1 without one.
	kernelProc bool
	procFd     int
	// kernelSys says the kernel's sysfs is mounted at kernelSys, outside
	// the chroot (ReadKernelSys).
	kernelSys bool
	// direct says the root mount's files may be read from their blocks,
	// rootDev being its device (extents.go); directMu orders CopyFile
	// before close; a writable mount's files changed after since.
	direct   bool
	rootDev  uint64
	since    unix.Timespec
	directMu sync.RWMutex
	// scratch is the disk behind /tmp (ProfileFull), nil without one.
	scratch *scratch
	opt     Options
	faulty  bool // the image's disk injects I/O errors (faults.go)
}

// Setup boots the kernel, mounts img as its root and makes the mounts of
// opt.Profile. On error the kernel is halted.
func Setup(img *Image, opt Options) (*Root, error) {
	start := time.Now()
	if opt.FSType == "" {
		opt.FSType = "ext4"
	}
	var backing <-chan scratchBacking
	if opt.Profile == ProfileFull && opt.TmpSize >= 0 {
		backing = makeBacking(opt.TmpSize) // on the host, while LKL boots
	}
	if err := lkl.Boot(opt.Kernel); err != nil {
		dropBacking(backing)
		return nil, err
	}
	r := &Root{Image: img, opt: opt, procFd: -1, KernelTime: time.Since(start)}
	fail := func(err error) (*Root, error) {
		lkl.Halt()
		dropBacking(backing)
		r.scratch.close()
		return nil, err
	}
	raiseFileLimit()
	var d lkl.Disk
	var err error
	faults, ferr := diskFaults()
	if ferr != nil {
		return fail(ferr)
	}
	if faults != nil && opt.Overlay != nil {
		return fail(fmt.Errorf("%s applies to the image itself, not to an --ephemeral or --overlay run", faultEnv))
	}
	if opt.Overlay != nil {
		layers := append(slices.Clip(opt.Overlay.Sealed), lkl.COWLayer{FD: int(opt.Overlay.File.Fd()), Map: opt.Overlay.Dirty})
		d, err = lkl.AddDiskCOW(img.Fd(), img.Size, layers)
	} else if faults != nil {
		d, err = lkl.AddDiskFaulty(img.Fd(), faults)
		r.faulty = true
	} else {
		d, err = lkl.AddDisk(img.Fd())
	}
	if err != nil {
		return fail(&ImageError{Path: img.Path, Msg: "cannot attach as a disk", Err: err})
	}
	r.Disk = d
	flags := uintptr(0)
	if opt.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	setClock()
	mopts := imageMountOptions(opt.FSType, opt.MountOpts)
	mnt, err := d.Mount(opt.Partition, opt.FSType, flags, strings.Join(mopts, ","))
	if err != nil && opt.ReadOnly && extFamily(opt.FSType) && needsRecovery(img) {
		// A read-only device cannot replay the journal. Mount without it,
		// and say that the newest changes are not visible.
		mnt, err = d.Mount(opt.Partition, opt.FSType, flags, strings.Join(append(mopts, "norecovery"), ","))
		if err == nil {
			r.Warnings = append(r.Warnings, "the image's journal needs recovery (an earlier read-write run was not unmounted cleanly); mounted read-only without replaying it, so its newest changes are not visible: boot it once read-write, or run e2fsck -fy on it")
		}
	}
	if err != nil {
		return fail(&ImageError{Path: img.Path, Msg: mountErrorText(opt, err), Err: err})
	}
	r.MountPoint = mnt
	r.setDirect(opt)
	if r.outside, err = lkl.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return fail(fmt.Errorf("lkl: open /: %w", err))
	}
	r.mountTelemetryProc()
	r.mountKernelSys()
	if backing != nil {
		b := <-backing
		backing = nil
		if err := r.mountScratch(b); err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("no scratch disk for /tmp (%v): /tmp is the kernel's ramfs, which cannot hold files of more than a few MB", err))
		}
	}
	if err := lkl.Chdir(mnt); err != nil {
		return fail(fmt.Errorf("lkl: chdir %s: %w", mnt, err))
	}
	if err := lkl.Chroot("."); err != nil {
		return fail(fmt.Errorf("lkl: chroot %s: %w", mnt, err))
	}
	if err := lkl.Chdir("/"); err != nil {
		return fail(fmt.Errorf("lkl: chdir /: %w", err))
	}
	r.mountProfile(opt)
	r.HugeFrom = lkl.HugeRest()
	r.BootTime = time.Since(start)
	return r, nil
}

func mountErrorText(opt Options, err error) string {
	switch {
	case errors.Is(err, unix.ENODEV):
		return fmt.Sprintf("filesystem type %q is not supported by the linked kernel", opt.FSType)
	case errors.Is(err, unix.EINVAL):
		return fmt.Sprintf("not a valid %s filesystem, or bad mount options %q", opt.FSType, strings.Join(opt.MountOpts, ","))
	case errors.Is(err, unix.EUCLEAN), errors.Is(err, unix.EIO):
		return fmt.Sprintf("%s filesystem is corrupt or unreadable (run e2fsck -f on it)", opt.FSType)
	case errors.Is(err, unix.ENXIO), errors.Is(err, unix.ENOENT):
		return fmt.Sprintf("partition %d not found", opt.Partition)
	}
	return "cannot mount " + opt.FSType
}

type mountSpec struct {
	target, fstype, data string
	mode                 uint32
}

func (r *Root) mountProfile(opt Options) {
	var specs []mountSpec
	switch opt.Profile {
	case ProfileMinimal:
		specs = []mountSpec{{"/dev", "tmpfs", "mode=755", 0o755}}
	case ProfileFull:
		// No proc: LKL's is mounted outside the guest's root (kernelProc)
		// and served through package procfs; one in the tree would let
		// a symlink in the image reach the magic links of kbox's LKL fds.
		specs = []mountSpec{
			{"/sys", "sysfs", "", 0o555},
			// Without CONFIG_SHMEM, "tmpfs" is ramfs underneath, in
			// physically contiguous kernel memory: the fallback when there
			// is no scratch disk (rootfs/scratch.go).
			{"/tmp", "tmpfs", "mode=1777", 0o1777},
			{"/dev", "tmpfs", "mode=755", 0o755},
		}
		if r.scratch != nil {
			specs = append(specs[:1], specs[2:]...)
		}
	}
	for _, s := range specs {
		if _, err := lkl.Stat(s.target, false); err != nil {
			if err := lkl.Mkdir(s.target, s.mode); err != nil {
				r.Warnings = append(r.Warnings, fmt.Sprintf("no %s: cannot create it (%v)", s.target, err))
				continue
			}
		}
		if err := lkl.Mount(s.fstype, s.target, s.fstype, 0, s.data); err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("mount %s on %s: %v", s.fstype, s.target, err))
			continue
		}
		r.Mounts = append(r.Mounts, s.target)
		if s.target == "/dev" {
			r.populateDev() // dev.go
		}
	}
}

// Mounted reports whether the recommended mount on target was made.
func (r *Root) Mounted(target string) bool {
	for _, m := range r.Mounts {
		if m == target {
			return true
		}
	}
	return false
}

// Close unmounts everything, halts the kernel and releases the image. The
// image is unmounted before the halt: LKL's halt alone leaves the ext4
// journal marked as needing recovery.
func (r *Root) Close() error { return r.close(true) }

// Finish is Close at the end of kbox's process: what the run wrote is
// unmounted and in the image's file when it returns, but the kernel is
// not halted, and the scratch disk's file (which the kernel may still
// write: its unmount is not waited for) not closed: the process's exit
// ends both.
func (r *Root) Finish() error { return r.close(false) }

func (r *Root) close(halt bool) error {
	start := time.Now()
	r.endDirect()
	lkl.Sync()
	var errs []error
	lkl.Chdir("/")
	for i := len(r.Mounts) - 1; i >= 0; i-- {
		if err := umountRetry(r.Mounts[i]); err != nil {
			errs = append(errs, fmt.Errorf("umount %s: %w", r.Mounts[i], err))
		}
	}
	if err := lkl.Fchdir(r.outside); err != nil {
		errs = append(errs, fmt.Errorf("leave chroot: %w", err))
	} else {
		lkl.Chroot(".")
		lkl.Close(r.outside)
		lkl.Chdir("/")
		if r.procFd >= 0 {
			lkl.Close(r.procFd)
		}
		// The kernel's own proc and sysfs hold nothing of the image's
		// and sit in its ramfs root: unmounted before a halt, left to
		// the process's exit otherwise (a umount right after the close
		// of procFd waits for the deferred release, 2-3 ms).
		if r.kernelProc && halt {
			umountRetry(telemetryProc)
		}
		if r.kernelSys && halt {
			umountRetry(kernelSys)
		}
		if err := r.scratch.unmount(); err != nil {
			errs = append(errs, err)
		}
		uerr := r.Disk.Unmount(r.opt.Partition, 2*time.Second, r.opt.ReadOnly)
		if n := r.Disk.FailedRequests(); r.faulty && n > 0 {
			errs = append(errs, fmt.Errorf("%s: %d disk requests failed with injected I/O errors", faultEnv, n))
		}
		if err := uerr; err != nil {
			errs = append(errs, fmt.Errorf("umount image: %w (files still open?)", err))
		} else if err := r.Disk.Remove(); err != nil {
			errs = append(errs, fmt.Errorf("detach image: %w", err))
		}
	}
	r.UnmountTime = time.Since(start)
	if !halt && len(errs) == 0 {
		// The disk is detached: the kernel no longer has the image.
		if err := r.Image.Close(); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	lkl.Halt()
	r.scratch.close()
	if err := r.Image.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Leave is Close for a run whose disk writes are all discarded (a
// read-only image, or an ephemeral copy-on-write overlay): nothing is
// synced, unmounted or halted, and the kernel, its disks and their files
// stay as they are until kbox's process exits, which ends them. It
// reports false, and does nothing, when the disk injects faults: Close
// then reports them.
func (r *Root) Leave() bool {
	return !r.faulty
}

// telemetryProc is where the kernel's own proc is mounted in its root
// before the chroot: the observatory reads it, guests cannot see it.
const telemetryProc = "/kbox-proc"

func (r *Root) mountTelemetryProc() {
	if err := lkl.Mkdir(telemetryProc, 0o555); err != nil && !errors.Is(err, unix.EEXIST) {
		r.Warnings = append(r.Warnings, fmt.Sprintf("no kernel telemetry: mkdir %s: %v", telemetryProc, err))
		return
	}
	if err := lkl.Mount("proc", telemetryProc, "proc", 0, ""); err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("no kernel telemetry: mount proc: %v", err))
		return
	}
	r.kernelProc = true
	if fd, err := lkl.Openat(r.outside, telemetryProc[1:], int(lkl.OpenFlagsToLKL(unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)), 0); err == nil {
		r.procFd = fd
	}
}

// kernelSys is where the kernel's own sysfs is mounted in its root
// before the chroot, read-only, out of the guests' reach (kbox mcp's
// kernel_read).
const kernelSys = "/kbox-sys"

func (r *Root) mountKernelSys() {
	if err := lkl.Mkdir(kernelSys, 0o555); err != nil && !errors.Is(err, unix.EEXIST) {
		return
	}
	if lkl.Mount("sysfs", kernelSys, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "") == nil {
		r.kernelSys = true
	}
}

// ReadKernelSys reads a file of the kernel's own sysfs (e.g.
// "kernel/mm/transparent_hugepage/enabled"), from the private mount
// outside the guest's root.
func (r *Root) ReadKernelSys(name string) ([]byte, error) {
	if !r.kernelSys {
		return nil, errors.New("kernel sysfs not mounted")
	}
	return lkl.ReadFileAt(r.outside, kernelSys[1:]+"/"+name)
}

// KernelProc returns an LKL fd (O_PATH) of the kernel's own proc, mounted
// outside the guest's root, and whether there is one: the guest's
// /proc/sys, /proc/net and mount table are served from it
// (package procfs). The fd is the Root's, closed by Close. LKL calls
// through it see the kernel as the calling thread's task does: its root
// is the image (a mount table lists only what lies in it).
func (r *Root) KernelProc() (int, bool) { return r.procFd, r.procFd >= 0 }

// ReadKernelProc reads a file of the kernel's own /proc (e.g. "stat",
// "meminfo"), from the private mount outside the guest's root. It is safe
// to call from any goroutine while the root is set up.
func (r *Root) ReadKernelProc(name string) ([]byte, error) {
	if !r.kernelProc {
		return nil, errors.New("kernel proc not mounted")
	}
	return lkl.ReadFileAt(r.outside, telemetryProc[1:]+"/"+name)
}

// umountRetry unmounts target, retrying while it is busy: LKL releases closed
// files from a workqueue (its host threads never return to user space, where
// a kernel would run the deferred fput), so a umount right after a close can
// briefly see EBUSY.
func umountRetry(target string) error {
	deadline := time.Now().Add(2 * time.Second)
	var h lkl.Hurrier
	for {
		err := lkl.Umount(target, 0)
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		h.Wait()
	}
}

// raiseFileLimit lifts the kernel's own limit on open files (1024 by
// default) to its maximum: kbox holds an LKL fd for every virtual fd of
// every guest process and for every shadow node, all in LKL's one fd
// table (its host threads share it).
func raiseFileLimit() {
	const nrOpen = 1 << 20 // the kernel's default fs.nr_open
	lim := unix.Rlimit{Cur: nrOpen, Max: nrOpen}
	lkl.Syscall6(lkl.SysPrlimit64, 0, unix.RLIMIT_NOFILE, lkl.PtrOf(&lim), 0, 0, 0)
}

// setClock gives the kernel the host's wall-clock time: LKL starts at the
// epoch, and files written by the guest would otherwise be dated 1970.
func setClock() {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME, &ts) == nil {
		lkl.Syscall6(lkl.SysClockSettime, unix.CLOCK_REALTIME, lkl.PtrOf(&ts), 0, 0, 0, 0)
	}
}

// needsRecovery reports whether the ext superblock has the needs_recovery
// flag (journal not replayed).
func needsRecovery(img *Image) bool {
	var sb [1024]byte
	if _, err := img.File.ReadAt(sb[:], extSuperOffset); err != nil {
		return false
	}
	return binary.LittleEndian.Uint32(sb[0x60:])&extIncompatRecover != 0
}
