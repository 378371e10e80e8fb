package rootfs

import (
	"fmt"
	"strings"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// The guest's /dev is a ramfs of LKL's (LKL's defconfig has no devtmpfs;
// kbox's configuration has one, not used here) holding what a small
// Linux system has there, and nothing of the host's: the
// guest lists, stats and reads its links in LKL, while kbox serves every
// open of a device node by its numbers (dispatch/dev.go), so a node only
// names a device; it never reaches a host device that is not one of
// these.

// devNodes are the character devices made in /dev.
var devNodes = []struct {
	name         string
	major, minor uint32
}{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9},
	{"tty", 5, 0}, {"ptmx", 5, 2},
}

// devLinks are the symbolic links made in /dev, as udev and systemd make
// them.
var devLinks = [][2]string{
	{"fd", "/proc/self/fd"},
	{"stdin", "/proc/self/fd/0"},
	{"stdout", "/proc/self/fd/1"},
	{"stderr", "/proc/self/fd/2"},
}

// populateDev fills the /dev just mounted: the nodes, the links, an empty
// pts directory (where kbox shows its private devpts instance) and shm:
// the scratch disk's shm directory bound there when there is a scratch
// disk, so that POSIX shared memory and semaphores are files of the run's
// own disk, else a directory of the ramfs.
func (r *Root) populateDev() {
	warn := func(format string, a ...any) { r.Warnings = append(r.Warnings, fmt.Sprintf(format, a...)) }
	// The modes as given: LKL's umask (022) would take write access
	// from the nodes and shm.
	old, _ := lkl.Syscall6(lkl.SysUmask, 0, 0, 0, 0, 0, 0)
	defer lkl.Syscall6(lkl.SysUmask, old, 0, 0, 0, 0, 0)
	for _, n := range devNodes {
		p := "/dev/" + n.name
		if err := lkl.Mknod(p, unix.S_IFCHR|0o666, unix.Mkdev(n.major, n.minor)); err != nil {
			warn("mknod %s: %v", p, err)
		}
	}
	r.loopNodes(warn)
	for _, l := range devLinks {
		if err := lkl.Symlink(l[1], "/dev/"+l[0]); err != nil {
			warn("symlink /dev/%s: %v", l[0], err)
		}
	}
	if err := lkl.Mkdir("/dev/pts", 0o755); err != nil {
		warn("mkdir /dev/pts: %v", err)
	}
	if err := lkl.Mkdir("/dev/shm", 0o1777); err != nil {
		warn("no /dev/shm: mkdir: %v", err)
		return
	}
	if r.scratch == nil {
		return
	}
	if err := r.bindScratchShm(); err != nil {
		warn("/dev/shm is the kernel's ramfs, which cannot hold files of more than a few MB: binding the scratch disk's shm directory failed: %v", err)
		return
	}
	r.Mounts = append(r.Mounts, "/dev/shm")
}

// bindScratchShm binds the scratch disk's shm directory (1777, made by
// scratchfs.Format) on /dev/shm. The disk is mounted in the kernel's own
// root, outside the chroot: the source is named relative to a working
// directory there.
func (r *Root) bindScratchShm() error {
	if err := lkl.Fchdir(r.outside); err != nil {
		return err
	}
	defer lkl.Chdir("/")
	src := strings.TrimPrefix(r.scratch.mnt, "/") + "/shm"
	st, err := lkl.Stat(src, true)
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory", src)
	}
	return lkl.Mount(src, "/dev/shm", "", unix.MS_BIND, "")
}

// loopNodes makes the nodes of the loop driver's devices the kernel has
// (kbox's configuration; none on LKL's defconfig): loop-control and
// loop0... as its sysfs lists them, with the numbers and the mode (0600,
// root's) devtmpfs gives them. kbox makes /dev/loopN too when a guest's
// LOOP_CTL_ADD or LOOP_CTL_GET_FREE adds a device (dispatch/sys_io_ioctl.go).
func (r *Root) loopNodes(warn func(string, ...any)) {
	mk := func(class, name string, mode uint32) {
		b, err := r.ReadKernelSys("class/" + class + "/" + name + "/dev")
		if err != nil {
			return
		}
		var maj, min uint32
		if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &maj, &min); err != nil {
			warn("/dev/%s: bad device number %q in sysfs", name, b)
			return
		}
		if err := lkl.Mknod("/dev/"+name, mode|0o600, unix.Mkdev(maj, min)); err != nil {
			warn("mknod /dev/%s: %v", name, err)
		}
	}
	mk("misc", "loop-control", unix.S_IFCHR)
	if !r.kernelSys {
		return
	}
	names, err := lkl.ReadDirAt(r.outside, kernelSys[1:]+"/class/block")
	if err != nil {
		return
	}
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, "loop"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			mk("block", n, unix.S_IFBLK)
		}
	}
}
