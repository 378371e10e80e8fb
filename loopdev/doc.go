// Package loopdev knows LKL's loop devices as a guest reaches them: which
// devices of LKL's a guest may open (the loop driver's control device and
// its block devices), the ioctl commands served on them and the sizes of
// what each points to, the guest's old struct loop_info and its conversion
// to and from LKL's loop_info64, and the state of a device as LKL's driver
// tells it (its backing file's filesystem, a clear run to its end).
//
// Package dispatch serves the guest's opens, ioctls and mounts of these
// devices (docs/guest-view.md, "/dev and /sys"): on a kernel with
// CONFIG_BLK_DEV_LOOP (kbox's configuration), a guest may open
// /dev/loop-control and the loop block devices, by their numbers wherever
// their nodes are, as virtual fds of LKL's devices; its ioctls on them go
// to LKL through the table here (Lookup), and a loop device may be the
// source of a mount. A loop device's backing file must be an LKL file: a
// guest fd that is a host file (a bind's, a pipe) is refused with EBADF,
// so no host file ever backs a device of LKL's. LKL's own disks (the
// image's, /tmp's) stay refused (ENXIO): they are virtio disks, never loop
// devices.
package loopdev
