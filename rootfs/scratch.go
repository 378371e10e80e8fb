package rootfs

import (
	"errors"
	"fmt"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/scratchfs"
	"golang.org/x/sys/unix"
)

// scratch is the disk behind the guest's /tmp: an unnamed sparse host
// file formatted by package scratchfs, attached as a second LKL disk and
// mounted outside the guest's root; its tmp directory is bind-mounted on
// the guest's /tmp.
type scratch struct {
	backing *scratchfs.Backing
	disk    lkl.Disk
	// mnt is where LKL mounted the disk, in the kernel's own root.
	mnt     string
	mounted bool
}

// scratchOptions are the mount options of the scratch disk. minixdf makes
// statfs (df) count the metadata as used instead of leaving it out of the
// total, so that a guest sees the size it was given; nombcache drops the
// cache for sharing extended-attribute blocks, which /tmp has little use
// for and whose set-up is part of every mount's cost;
// no_prefetch_block_bitmaps spares the run ext4's background thread,
// which would read every group's bitmap ahead of need (ext4Defaults).
const scratchOptions = "minixdf,nombcache,no_prefetch_block_bitmaps"

type scratchBacking struct {
	b   *scratchfs.Backing
	err error
}

// makeBacking makes and formats the backing file in the background: it is
// host work only, done while LKL boots.
func makeBacking(size int64) <-chan scratchBacking {
	c := make(chan scratchBacking, 1)
	go func() {
		b, err := scratchfs.Create(scratchfs.Dirs(), size)
		c <- scratchBacking{b, err}
	}()
	return c
}

// dropBacking closes a backing file that was never attached.
func dropBacking(c <-chan scratchBacking) {
	if c != nil {
		if res := <-c; res.b != nil {
			res.b.Close()
		}
	}
}

// mountScratch attaches and mounts the scratch disk and binds its tmp
// directory on the image's /tmp. It runs before the chroot, while both
// mounts are reachable. On failure it undoes what it did, and the caller
// warns and mounts the kernel's ramfs on /tmp instead.
func (r *Root) mountScratch(res scratchBacking) (err error) {
	if res.err != nil {
		return res.err
	}
	b := res.b
	d, err := lkl.AddDisk(int(b.File.Fd()))
	if err != nil {
		b.Close()
		return fmt.Errorf("attach: %w", err)
	}
	// From here on the kernel holds the file: it is closed after the halt,
	// or after a detach.
	s := &scratch{backing: b, disk: d}
	defer func() {
		if err != nil {
			s.detach()
		}
	}()
	if s.mnt, err = d.Mount(0, "ext4", 0, scratchOptions); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	s.mounted = true
	// Before the chroot an absolute symlink in the image would resolve in
	// the kernel's own root: /tmp must be a directory (or be made one).
	target := r.MountPoint + "/tmp"
	st, err := lkl.Stat(target, true)
	switch {
	case errors.Is(err, unix.ENOENT):
		if err := lkl.Mkdir(target, 0o1777); err != nil {
			return fmt.Errorf("the image has no /tmp and it cannot be made: %w", err)
		}
	case err != nil:
		return fmt.Errorf("the image's /tmp: %w", err)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return errors.New("the image's /tmp is not a directory")
	}
	if err := lkl.Mount(s.mnt+"/tmp", target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind on /tmp: %w", err)
	}
	r.scratch = s
	r.Mounts = append(r.Mounts, "/tmp")
	r.Scratch = fmt.Sprintf("/tmp: ext4 scratch disk of %d MiB, sparse in %s", b.Size>>20, b.Dir)
	if b.Size > b.Avail {
		// Thin provisioning: writes to /tmp are bounded by the host's
		// free space too (shadowfd.Manager.HostBacked), so a guest finds
		// /tmp full before df says so.
		r.Warnings = append(r.Warnings, fmt.Sprintf("/tmp (%d MiB) is larger than the free space where its file is (%d MiB in %s): writes to /tmp fail with ENOSPC beyond that", b.Size>>20, b.Avail>>20, b.Dir))
	}
	return nil
}

// detach undoes a setup that failed half-way, while the kernel runs on:
// the filesystem is shut down before the disk goes, and the file is closed
// once the kernel no longer has it.
func (s *scratch) detach() {
	if s.mounted {
		if s.disk.Unmount(0, scratchWait, false) != nil {
			return // still in use: leave it to the halt
		}
		s.mounted = false
	}
	if s.disk.Remove() == nil {
		s.backing.Close()
	}
}

// scratchWait bounds the wait for the scratch filesystem to unmount.
const scratchWait = 2 * time.Second

// unmount unmounts the scratch disk at exit, after the bind on /tmp is
// gone. It does not wait for the filesystem to shut down, nor detach the
// disk: its contents are thrown away with the file, and waiting for the
// kernel's deferred release would cost a kernel tick (10 ms) at every
// exit. The kernel then ends with the disk attached (Root.Finish: with
// kbox's process; Root.Close: at its halt), and the file after it.
func (s *scratch) unmount() error {
	if s == nil || !s.mounted {
		return nil
	}
	s.mounted = false
	if err := s.disk.Unmount(0, scratchWait, true); err != nil {
		return fmt.Errorf("umount /tmp scratch disk: %w", err)
	}
	return nil
}

// close closes the backing file after the halt; the host frees its blocks
// then.
func (s *scratch) close() {
	if s != nil {
		s.backing.Close()
	}
}

// ScratchFile returns the host fd of the scratch disk's backing file and
// whether there is one: the space the host can still give it bounds what
// guests may write to /tmp (shadowfd.Manager.HostBacked).
func (r *Root) ScratchFile() (int, bool) {
	if r.scratch == nil || r.scratch.backing == nil {
		return -1, false
	}
	return int(r.scratch.backing.File.Fd()), true
}
