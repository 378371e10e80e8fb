//go:build lkl

package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoopDevice: on a kernel with the loop driver, guest root uses loop
// devices as on Linux (dispatch/sys_io_ioctl.go, docs/guest-view.md "/dev and
// /sys"): busybox losetup binds a file of /tmp, Debian's mke2fs makes an
// ext4 filesystem on the device, mount, writes, umount, e2fsck -fn finds
// it clean, a second mount reads the files back, losetup -d, and the
// device's sysfs files follow (read through LKL each time); then the
// ioctl level (tests/guest/loopt.c): loop-control, LOOP_CONFIGURE and
// LOOP_SET_FD with their data both ways, hostile pointers (EFAULT), fds
// that are not LKL files (a pipe, a file of a -b bind: EBADF), and LKL's
// own disks (the image's, /tmp's), which stay out of reach (ENXIO) for
// open and mount.
func TestLoopDevice(t *testing.T) {
	needKernel(t, "loop")
	img := copyImage(t, imagePath(t))
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "hostfile"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
E=/opt/tests/e2fsprogs
if [ ! -x $E/mke2fs ] || [ ! -x $E/e2fsck ]; then echo NO-E2FSPROGS; exit 0; fi
export LD_LIBRARY_PATH=$E/lib
[ -c /dev/loop-control ] && echo loop-control-present
dd if=/dev/zero of=/tmp/disk.img bs=1M count=16 2>/dev/null; echo dd=$?
D=$(losetup -f); echo free=$D
losetup $D /tmp/disk.img; echo losetup=$?
S=/sys/block/${D#/dev/}
echo size=$(cat $S/size) backing=$(cat $S/loop/backing_file)
losetup -a
$E/mke2fs -q -t ext4 $D; echo mkfs=$?
mkdir -p /mnt/l
mount -t ext4 $D /mnt/l; echo mount=$?
grep -c "^$D /mnt/l ext4 " /proc/mounts
echo kbox-loop-data > /mnt/l/file
dd if=/dev/urandom of=/mnt/l/big bs=64k count=64 2>/dev/null; md5sum /mnt/l/big > /tmp/big.sum; echo write=$?
umount /mnt/l; echo umount=$?
$E/e2fsck -fn $D > /tmp/fsck.out 2>&1; echo fsck=$?
mount -t ext4 $D /mnt/l; echo remount=$?
cat /mnt/l/file
md5sum -c /tmp/big.sum
umount /mnt/l; echo umount2=$?
losetup -d $D; echo detach=$?
echo size-after=$(cat $S/size)
losetup -a | grep -c disk.img
for m in ctl io hostile "hostfd /host/hostfile" disks; do /opt/tests/loopt $m; done
`
	stdout, stderr, status := runKbox(t, "image", "-S", img, "-b", host+":/host", "--", "/bin/sh", "-c", script)
	if strings.Contains(stdout, "NO-E2FSPROGS") {
		t.Skip("SKIP (the test image has no /opt/tests/e2fsprogs: rebuild it with `make test-image` on a Debian host with apt-get)")
	}
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	for _, want := range []string{
		"loop-control-present\n", "dd=0\n", "free=/dev/loop0\n", "losetup=0\n",
		"/dev/loop0: 0 /tmp/disk.img\n", "mkfs=0\n", "mount=0\n1\n", "write=0\n", "umount=0\n",
		"fsck=0\n", "remount=0\n", "kbox-loop-data\n", "/mnt/l/big: OK\n", "umount2=0\n",
		"size=32768 backing=/tmp/disk.img\n", "detach=0\nsize-after=0\n0\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	// The ioctl level: every check of every mode passed, and they ran.
	if n := strings.Count(stdout, "loopt: 0 failed\n"); n != 5 {
		t.Errorf("%d of loopt's 5 modes passed", n)
	}
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, " FAIL ") {
			t.Errorf("loopt: %s", l)
		}
	}
	for _, check := range []string{
		"add-node ok", "remove-node ok", "configure ok", "size64 ok", "status64 ok", "read-through ok",
		"written-in-file ok", "set-fd-readonly ok", "change-fd ok", "configure-wild ok",
		"get-status64-readonly-mem ok", "size64-kernel ok", "set-fd-pipe ok", "set-fd-host ok",
		"configure-host ok", "set-fd-host-high ok", "set-fd-opath ok", "set-fd-opath-disk ok", "disk-vda-open-rw ok", "disk-vda-mount ok",
		"disk-vdb-open-rw ok", "disk-vdb-open-excl ok",
	} {
		if !strings.Contains(stdout, check+"\n") {
			t.Errorf("loopt did not report %q", check)
		}
	}
	// The host file the guest tried to bind is as it was.
	if b, err := os.ReadFile(filepath.Join(host, "hostfile")); err != nil || len(b) != 1<<20 || strings.Trim(string(b), "\x00") != "" {
		t.Errorf("the bind's host file changed (%v, %d bytes)", err, len(b))
	}
	if t.Failed() {
		t.Logf("stdout: %s\nstderr: %s", stdout, stderr)
	}
	assertCleanImage(t, img)
}
