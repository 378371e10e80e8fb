//go:build lkl

package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
	"golang.org/x/sys/unix"
)

// sparseFile is a file copyfile-prep writes with holes, data in the
// middle of a block and a size that is no whole block.
const sparseFile = "/kbox-sparse"

// emptyFile is an empty file copyfile-prep makes.
const emptyFile = "/kbox-empty"

// changedFile is a file copyfile writes on a writable mount.
const changedFile = "/kbox-changed"

func init() {
	// copyfile-prep writes sparseFile and emptyFile on a writable mount.
	helpers["copyfile-prep"] = func(img string, ro bool) error {
		return withRoot(img, ro, func(*rootfs.Root) error {
			fd, err := lkl.Open(sparseFile, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			defer lkl.Close(fd)
			for _, w := range []struct {
				off  int64
				data string
			}{{0, "head"}, {1<<20 + 5, "middle"}, {3<<20 - 3, "end"}} {
				b := []byte(w.data)
				if _, le := lkl.Syscall6(lkl.SysPwrite64, uintptr(fd), lkl.Ptr(b), uintptr(len(b)), uintptr(w.off), 0, 0); le != 0 {
					return le
				}
			}
			if err := lkl.Fsync(fd); err != nil {
				return err
			}
			return lkl.WriteFile(emptyFile, nil, 0o644)
		})
	}
	// copyfile compares, for the image's files (the root's, up to 600,
	// and sparseFile), what Root.CopyFile writes with what LKL reads; it
	// counts the files CopyFile took and those it refused, and asks it of
	// a file on /tmp (another disk).
	helpers["copyfile"] = func(img string, ro bool) error {
		return withRoot(img, ro, func(r *rootfs.Root) error {
			var files []string
			var walk func(dir string)
			walk = func(dir string) {
				names, _ := lkl.ReadDir(dir)
				for _, n := range names {
					if len(files) >= 600 {
						return
					}
					p := strings.TrimSuffix(dir, "/") + "/" + n
					st, err := lkl.Stat(p, true)
					switch {
					case err != nil:
					case st.Mode&unix.S_IFMT == unix.S_IFREG:
						files = append(files, p)
					case st.Mode&unix.S_IFMT == unix.S_IFDIR && p != "/proc" && p != "/sys" && p != "/dev" && p != "/tmp":
						walk(p)
					}
				}
			}
			walk("/")
			if _, err := lkl.Stat(sparseFile, true); err == nil {
				files = append(files, sparseFile)
			}
			if err := lkl.WriteFile("/tmp/kbox-copy", []byte("on the scratch disk"), 0o644); err == nil {
				files = append(files, "/tmp/kbox-copy")
			}
			if !ro {
				// Changed since the mount: its blocks are not yet the
				// file's (a write not yet on the disk).
				if err := lkl.WriteFile(changedFile, []byte("written since the mount"), 0o644); err != nil {
					return err
				}
				files = append(files, changedFile)
			}
			took, refused, differ, bytesTaken := 0, 0, 0, 0
			for _, p := range files {
				want, err := lkl.ReadFile(p)
				if err != nil {
					return fmt.Errorf("%s: %v", p, err)
				}
				fd, err := lkl.Open(p, unix.O_RDONLY, 0)
				if err != nil {
					return err
				}
				st, err := lkl.Fstat(fd)
				if err != nil {
					return err
				}
				mfd, err := unix.MemfdCreate("copyfile", unix.MFD_CLOEXEC)
				if err != nil {
					return err
				}
				unix.Ftruncate(mfd, st.Size)
				ok := r.CopyFile(fd, &st, mfd)
				lkl.Close(fd)
				got := make([]byte, len(want)+1)
				n, _ := unix.Pread(mfd, got, 0)
				unix.Close(mfd)
				switch {
				case !ok:
					refused++
					if p != "/tmp/kbox-copy" && p != changedFile && st.Size > 0 {
						fmt.Printf("refused=%s\n", p)
					}
				case n != len(want) || !bytes.Equal(got[:n], want):
					differ++
					fmt.Printf("differs=%s\n", p)
				default:
					took++
					bytesTaken += n
				}
				if p == sparseFile {
					fmt.Printf("sparse=%v\n", ok && n == len(want) && bytes.Equal(got[:n], want))
				}
				if p == "/tmp/kbox-copy" {
					fmt.Printf("tmp_taken=%v\n", ok)
				}
				if p == changedFile {
					fmt.Printf("changed_taken=%v\n", ok)
				}
			}
			fmt.Printf("files=%d\ntook=%d\nrefused=%d\ndiffer=%d\nbytes=%d\n", len(files), took, refused, differ, bytesTaken)
			return nil
		})
	}
}

// TestCopyFileFromBlocks: on a read-only mount of the image, and on a
// writable one, every file of its root that CopyFile takes from the
// image's blocks (all but the empty ones) has the bytes LKL reads, a file
// with holes too; a file of /tmp's scratch disk is refused, and so is a
// file written since a writable mount, whose blocks on the disk may be
// older than the kernel's pages.
func TestCopyFileFromBlocks(t *testing.T) {
	img := copyImage(t, imagePath(t))
	helper(t, "copyfile-prep", img, false)
	time.Sleep(1100 * time.Millisecond) // its files' second ends before the next mount's
	for _, ro := range []bool{true, false} {
		kv := helper(t, "copyfile", img, ro)
		files, _ := strconv.Atoi(kv["files"])
		took, _ := strconv.Atoi(kv["took"])
		if files < 100 || took < files*9/10 {
			t.Errorf("read-only %v: CopyFile took %d of %d files (refused %s), want nearly all", ro, took, files, kv["refused"])
		}
		if kv["differ"] != "0" {
			t.Errorf("read-only %v: %s files differ from what LKL reads (%s)", ro, kv["differ"], kv["differs"])
		}
		if kv["sparse"] != "true" {
			t.Errorf("read-only %v: the file with holes: copied right %q, want true", ro, kv["sparse"])
		}
		if kv["tmp_taken"] != "false" {
			t.Errorf("read-only %v: a file on /tmp's disk taken from the image's blocks: %q", ro, kv["tmp_taken"])
		}
		if !ro && kv["changed_taken"] != "false" {
			t.Errorf("a file written since the writable mount taken from the image's blocks: %q", kv["changed_taken"])
		}
		t.Logf("read-only %v: %d of %d files, %s bytes, from the image's blocks", ro, took, files, kv["bytes"])
	}
}

// TestReadOnlyReadsFromBlocks: a read-only run, whose programs and
// shadows are read from the image's blocks (rootfs/extents.go), shows
// every file with the bytes an ephemeral run reads through LKL: a large
// program, the file with holes, a small file, an empty one, in every
// tier; the program then runs (the exec's memfd is read so too).
func TestReadOnlyReadsFromBlocks(t *testing.T) {
	img := copyImage(t, imagePath(t))
	helper(t, "copyfile-prep", img, false)
	files := []string{"/bin/busybox", sparseFile, "/etc/hostname", emptyFile}
	want, stderr, code := runKbox(t, append([]string{"image", "-S", img, "--ephemeral", "--", "/usr/bin/sha256sum"}, files...)...)
	if code != 0 || strings.Count(want, "\n") != len(files) {
		t.Fatalf("ephemeral: exit %d, %q\nstderr: %s", code, want, stderr)
	}
	forEachTier(t, func(t *testing.T, tier string) {
		got, stderr, code := runKbox(t, append([]string{"image", "-S", img, "--read-only", "--trusted", "--syscall-mode=" + tier, "--", "/usr/bin/sha256sum"}, files...)...)
		if code != 0 || got != want {
			t.Errorf("read-only: exit %d\n%s\nwant (ephemeral, through LKL)\n%s\nstderr: %s", code, got, want, stderr)
		}
	})
}

// TestWritableReadsFromBlocks: a writable or copy-on-write run reads the
// image's files unchanged since its start from their blocks, on the
// image or in the layer holding them (rootfs/extents.go), and the files
// it changes through LKL. A program and a 5 MB file written by one run
// read the same in the next, from the --overlay's layer, the image of a
// writable run, and under an ephemeral and a read-only run (their sums
// as the writing run read them, through LKL, by two readers at once as
// by one), and the program runs; what a run changes it reads back
// changed, a program it copies runs.
func TestWritableReadsFromBlocks(t *testing.T) {
	img := copyImage(t, imagePath(t))
	const write = "head -c 5000000 /dev/urandom > /root/data && mkdir -p /root/a /root/b && cp /bin/busybox /root/a/true && echo >> /root/a/true && sha256sum /root/data /root/a/true"
	// Two readers and an exec of the files at once first (their first
	// fills race), then one.
	const readOnly = "(sha256sum /root/data & sha256sum /root/data & /root/a/true & wait) | sort -u && " +
		"sha256sum /root/data /root/a/true && /root/a/true && echo ran"
	const read = readOnly + " && " +
		"printf ABCD | dd of=/root/data bs=1 seek=100 conv=notrunc 2>/dev/null && dd if=/root/data bs=1 skip=100 count=4 2>/dev/null && echo && " +
		"cp /root/a/true /root/b/true && echo >> /root/b/true && /root/b/true && echo ran2"
	check := func(how string, args ...string) string {
		t.Helper()
		want, stderr, code := runKbox(t, append(args, "--", "/bin/sh", "-c", write)...)
		if code != 0 || strings.Count(want, "\n") != 2 {
			t.Fatalf("%s: writing: exit %d %q\n%s", how, code, want, lastLines(stderr, 5))
		}
		// The files' second ends before the next run's mount: they
		// are unchanged since it, and read from their blocks.
		time.Sleep(1100 * time.Millisecond)
		return want
	}
	expect := func(how, want string, args ...string) {
		t.Helper()
		cmd, tail := read, "ran\nABCD\nran2\n"
		if slices.Contains(args, "--read-only") {
			cmd, tail = readOnly, "ran\n"
		}
		got, stderr, code := runKbox(t, append(args, "--", "/bin/sh", "-c", cmd)...)
		data, _, _ := strings.Cut(want, "\n")
		if code != 0 || got != data+"\n"+want+tail {
			t.Errorf("%s: exit %d\n%s\nwant\n%s\n%s%s\nstderr: %s", how, code, got, data, want, tail, lastLines(stderr, 5))
		}
	}
	ov := t.TempDir()
	want := check("--overlay", "image", "-S", img, "--overlay", ov)
	expect("--overlay, the next run", want, "image", "-S", img, "--overlay", ov)
	want = check("writable", "image", "-S", img)
	for _, mode := range []string{"--ephemeral", "--read-only"} {
		expect(mode, want, "image", "-S", img, mode)
	}
	expect("writable", want, "image", "-S", img)
}

// TestCopyFileSmallInodes: on a writable mount of an image of 128-byte
// inodes (whose times keep only their seconds on the disk), the image's
// files are copied with the bytes LKL reads, and a file written since the
// mount is refused.
func TestCopyFileSmallInodes(t *testing.T) {
	mke2fs, err := exec.LookPath("mke2fs")
	if err != nil {
		t.Skip("*** SKIP: needs mke2fs (e2fsprogs) to make an image of 128-byte inodes ***")
	}
	src := t.TempDir()
	for i := range 120 {
		b := bytes.Repeat([]byte{byte('a' + i%26)}, 100+i*1500)
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(t.TempDir(), "small-inodes.ext4")
	if out, err := exec.Command(mke2fs, "-q", "-F", "-t", "ext4", "-I", "128", "-d", src, img, "32M").CombinedOutput(); err != nil {
		t.Fatalf("mke2fs: %v: %s", err, out)
	}
	time.Sleep(1100 * time.Millisecond) // the files' second ends before the mount's
	kv := helper(t, "copyfile", img, false)
	files, _ := strconv.Atoi(kv["files"])
	took, _ := strconv.Atoi(kv["took"])
	if files < 120 || took < 110 {
		t.Errorf("CopyFile took %d of %d files (refused %s), want nearly all", took, files, kv["refused"])
	}
	if kv["differ"] != "0" {
		t.Errorf("%s files differ from what LKL reads (%s)", kv["differ"], kv["differs"])
	}
	if kv["changed_taken"] != "false" {
		t.Errorf("a file written since the mount, in its second, taken from the image's blocks: %q", kv["changed_taken"])
	}
}
