// Package lkl is kbox's Go API over liblkl, the Linux kernel built as a
// library. It boots the kernel in-process, attaches disk images, mounts
// them, and exposes one raw syscall entry point plus typed helpers.
//
// Only this package touches cgo for LKL. Built without the "lkl" tag (no
// liblkl available), every entry point reports ErrNotBuilt.
package lkl

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotBuilt is returned by every call when kbox was built without liblkl.
var ErrNotBuilt = errors.New("kbox was built without LKL: run `make lkl && make` (builds liblkl into ./.lkl), or `make LKL_DIR=DIR` with a prebuilt liblkl.a and headers (default /opt/lkl); docs/lkl.md")

// DefaultMemMB is the kernel memory given to LKL when the command line has no
// mem=. Measured on the reference machine (docs/benchmarks.md): 32M boots and
// mounts ext4 as fast as 64M and keeps peak RSS lower; 16M is enough to boot
// but leaves little page cache for real workloads.
const DefaultMemMB = 32

// defaultBootArgs are added to every kernel command line unless it sets
// them itself.
var defaultBootArgs = []string{"stack_depot_disable=on", "pty.legacy_count=0"}

// Config describes a kernel boot.
type Config struct {
	// MemMB is the kernel's memory (mem=). Zero means DefaultMemMB.
	MemMB int
	// Cmdline holds extra kernel command-line words. A mem= here wins
	// over MemMB.
	Cmdline string
	// Verbose writes the kernel's console output to stderr. Without it
	// the output is kept, unseen, in case the kernel panics: kbox then
	// prints it (console.c).
	Verbose bool
}

// CommandLine returns the full kernel command line for cfg.
func (cfg Config) CommandLine() string {
	var words []string
	if !strings.Contains(" "+cfg.Cmdline, " mem=") {
		mem := cfg.MemMB
		if mem <= 0 {
			mem = DefaultMemMB
		}
		words = append(words, fmt.Sprintf("mem=%dM", mem))
	}
	if !cfg.ownLoglevel() {
		words = append(words, "loglevel=7")
	}
	// Boot-time savings measured in docs/benchmarks.md, each overridable
	// from the command line: the KASAN stack depot's 8 MB hash table
	// (zeroed at boot; KASAN reports then lack allocation stacks), and 256
	// legacy BSD pty devices registered at boot (guests use the host's
	// /dev).
	for _, w := range defaultBootArgs {
		k, _, _ := strings.Cut(w, "=")
		if !strings.Contains(" "+cfg.Cmdline, " "+k+"=") {
			words = append(words, w)
		}
	}
	if c := strings.TrimSpace(cfg.Cmdline); c != "" {
		words = append(words, c)
	}
	return strings.Join(words, " ")
}

var (
	bootMu sync.Mutex
	booted bool
	halted bool
)

// Boot starts the kernel. LKL supports one kernel per process, and not a
// second boot after Halt.
func Boot(cfg Config) error {
	bootMu.Lock()
	defer bootMu.Unlock()
	if !Available {
		return ErrNotBuilt
	}
	if booted {
		return errors.New("lkl: kernel already booted in this process")
	}
	if halted {
		return errors.New("lkl: kernel was halted; LKL cannot boot twice in one process")
	}
	// The console reaches stderr when asked for (Verbose, or a loglevel
	// on the command line); it is kept for a panic in any case.
	if err := boot(cfg.CommandLine(), cfg.Verbose || cfg.ownLoglevel()); err != nil {
		return err
	}
	booted = true
	return nil
}

// HugeRest asks for transparent huge pages for the kernel's memory from
// 4 MB above the highest page written so far (glue.c, huge_rest): called
// once boot and the mounts are done, it leaves a guest's start in small
// pages and gives what a workload's page cache and inodes take beyond in
// 2 MB pages, a fault each instead of one a 4 KB page. It returns the
// offset in the kernel's memory from which it asked, or -1 (no kernel
// memory of kbox's, not 2 MB aligned, or nothing left above).
func HugeRest() int64 {
	bootMu.Lock()
	defer bootMu.Unlock()
	if !booted || halted {
		return -1
	}
	return hugeRest()
}

// HostHugePages reports whether the host gives transparent huge pages to
// memory that asks for them (THP "always" or "madvise") and compacts its
// memory for them at the fault (defrag not "never" or "defer"), and the
// two settings, as "THP madvise, defrag madvise".
func HostHugePages() (bool, string) {
	word := func(name string) string {
		b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/" + name)
		s := string(b)
		i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
		if err != nil || i < 0 || j < i {
			return "never"
		}
		return s[i+1 : j]
	}
	mode, defrag := word("enabled"), word("defrag")
	return mode != "never" && defrag != "never" && defrag != "defer", "THP " + mode + ", defrag " + defrag
}

// ownLoglevel reports whether the command line names its own loglevel.
func (cfg Config) ownLoglevel() bool { return strings.Contains(" "+cfg.Cmdline, " loglevel=") }

// restartedEnv marks the second start of kbox after a kernel panic while
// it was starting (console.c); kbox takes it out of its environment at
// once, so that no guest sees it.
const restartedEnv = "KBOX_LKL_RESTARTED"

var restarted = os.Getenv(restartedEnv) != ""

func init() {
	if restarted {
		os.Unsetenv(restartedEnv)
		markRestarted()
	}
}

// SetStarting says whether kbox is starting: from before boot until the
// guest may run, when nothing of the guest has happened yet. A kernel
// panic then starts kbox once more, with the same arguments (console.c:
// LKL 6.0 has a rare race at boot); once only.
func SetStarting(on bool) { setStarting(on) }

// Restarted reports whether this kbox is the second start after a kernel
// panic while starting.
func Restarted() bool { return restarted }

// Panic panics the kernel as LKL's panic() does (after boot; tests only:
// KBOX_TEST_PANIC_AT_START, docs/testing.md).
func Panic() { panicKernel() }

// Halt shuts the kernel down, flushing mounted filesystems.
func Halt() {
	bootMu.Lock()
	defer bootMu.Unlock()
	if !booted {
		return
	}
	shutdown()
	booted = false
	halted = true
}

// Booted reports whether the kernel is running.
func Booted() bool {
	bootMu.Lock()
	defer bootMu.Unlock()
	return booted
}

// Syscall6 issues a raw LKL syscall with asm-generic number nr. It returns
// the result, or the errno on failure.
func Syscall6(nr, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, unix.Errno) {
	r := syscall6(int64(nr), int64(a1), int64(a2), int64(a3), int64(a4), int64(a5), int64(a6))
	if r < 0 && r > -4096 {
		return 0, unix.Errno(-r)
	}
	return uintptr(r), 0
}

// Disk is an image attached to the kernel as a virtio block device.
type Disk struct {
	ID int
}

// AddDisk attaches the host file descriptor fd as a disk. The file must stay
// open while the kernel runs; its open mode decides whether writes can reach
// it.
func AddDisk(fd int) (Disk, error) {
	if !Available {
		return Disk{}, ErrNotBuilt
	}
	id := diskAdd(fd)
	if id < 0 {
		return Disk{}, fmt.Errorf("lkl: add disk: %w", unix.Errno(-id))
	}
	return Disk{ID: id}, nil
}

// Mount mounts partition part (0 for the whole disk) with filesystem fstype,
// mount flags (MS_*) and options, at a mount point LKL chooses; it returns
// that mount point's path inside the kernel.
func (d Disk) Mount(part int, fstype string, flags uintptr, opts string) (string, error) {
	if !Available {
		return "", ErrNotBuilt
	}
	return mountDev(d.ID, part, fstype, flags, opts)
}

// Unmount unmounts a partition mounted with Mount, waiting up to timeout for
// the kernel to release closed files and then to shut the filesystem down.
// It must run outside any chroot into the disk.
//
// umount(2) alone is not enough: LKL runs syscalls in kernel threads, and a
// kernel thread's last fput and mntput are deferred to a workqueue. So the
// umount is busy while files closed just before are still held (it is
// retried, the kernel's clock hurried: umountHurried), and the filesystem
// is still live (for ext4: its journal still marked as needing recovery)
// when umount returns. Unmount therefore waits until the block device can
// be opened exclusively, which it cannot while a superblock holds it. With
// readOnly (the partition was mounted read-only: its shutdown writes
// nothing) it does not wait, which saves about a kernel tick at exit.
func (d Disk) Unmount(part int, timeout time.Duration, readOnly bool) error {
	deadline := time.Now().Add(timeout)
	dev, derr := blockDev(d.ID, part)
	wait := derr == 0 && !readOnly
	node := fmt.Sprintf("/.kbox-blk-%d-%d", d.ID, part)
	if wait && Mknod(node, unix.S_IFBLK|0o600, dev) != nil {
		wait = false
	}
	err := errors.New("no device number")
	if derr == 0 {
		err = umountHurried(dev, deadline)
	}
	if err != nil && !errors.Is(err, unix.EBUSY) {
		// Not where lkl_mount_dev puts it (another LKL): its own
		// unmount, which sleeps 10 ms per busy try.
		err = nil
		if r := umountDev(d.ID, part, int(time.Until(deadline).Milliseconds())); r < 0 {
			err = unix.Errno(-r)
		}
	}
	if err != nil {
		if wait {
			Unlink(node, false)
		}
		return err
	}
	if !wait {
		return nil // read-only, or no way to wait
	}
	defer Unlink(node, false)
	return waitReleased(node, deadline)
}

// umountHurried unmounts the mount point lkl_mount_dev made for block
// device dev (/mnt/%08x, beside its node /dev/%08x), retrying while it is
// busy, and removes both as lkl_umount_dev does.
func umountHurried(dev uint64, deadline time.Time) error {
	mnt := fmt.Sprintf("/mnt/%08x", dev)
	var h Hurrier
	for {
		err := Umount(mnt, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		h.Wait()
	}
	Unlink(fmt.Sprintf("/dev/%08x", dev), false)
	return Unlink(mnt, true)
}

// waitReleased waits until the block device at node can be opened with
// O_EXCL, that is until no mounted filesystem claims it.
func waitReleased(node string, deadline time.Time) error {
	var h Hurrier
	for {
		fd, err := Open(node, unix.O_RDONLY|unix.O_EXCL, 0)
		if err == nil {
			Close(fd)
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("wait for the filesystem to shut down: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the filesystem is still in use after umount: %w", err)
		}
		h.Wait()
	}
}

// Tick is LKL's clock tick: HZ is 100, fixed by its arch Kconfig.
const Tick = 10 * time.Millisecond

// maxHurries bounds how far one wait moves the kernel's clock on.
const maxHurries = 8

// Hurrier paces a teardown wait on work the kernel defers by a tick (a
// kernel thread's last fput and mntput: LKL's system calls run in kernel
// threads). Its first waits move the kernel's clock a tick on and fire
// the kernel's armed timers, so that the work runs at once; then it
// sleeps a millisecond per wait. Only for waits while no guest runs
// (an unmount at the end of a run): the guest would see the kernel's
// clock jump.
type Hurrier struct{ n int }

// Wait waits once.
func (h *Hurrier) Wait() {
	if h.n < maxHurries {
		h.n++
		hurry(int64(Tick))
		nap(100 * time.Microsecond)
		return
	}
	nap(time.Millisecond)
}

// nap blocks the calling thread for d. time.Sleep rounds a short sleep up
// to the runtime's timer resolution: 100 µs took 1.1 ms here, which made
// each hurried wait of an unmount ten times as long as it meant to be.
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// Remove detaches the disk, flushing it to the host file.
func (d Disk) Remove() error {
	if r := diskRemove(d.ID); r < 0 {
		return unix.Errno(-r)
	}
	return nil
}
