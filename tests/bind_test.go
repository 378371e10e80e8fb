//go:build lkl

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const bindSecret = "HOST-SECRET-outside-the-bind"

// bindTree makes a host directory to bind (h) next to a secret the guest
// must never reach, with symlinks in h that point at the secret.
func bindTree(t *testing.T) (dir, h string) {
	t.Helper()
	dir = t.TempDir()
	h = filepath.Join(dir, "h")
	for _, d := range []string{"h/sub", "h/etc", "secret"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"h/f.txt":        "from-host\n",
		"h/m.txt":        "moved-out\n",
		"h/etc/hostname": "bind-own-hostname\n",
		"secret/s":       bindSecret + "\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"h/abs":    filepath.Join(dir, "secret/s"),
		"h/absdir": filepath.Join(dir, "secret"),
		"h/rel":    "../secret/s",
		"h/reldir": "../../../../../../../../" + strings.TrimPrefix(dir, "/") + "/secret",
	}
	for n, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, h
}

func TestBindReadWrite(t *testing.T) {
	img := copyImage(t, imagePath(t))
	dir, h := bindTree(t)
	var st syscall.Stat_t
	if err := syscall.Stat(h, &st); err != nil {
		t.Fatal(err)
	}
	prefix := []string{"image", "-S", img, "-b", h + ":/mnt/data"}
	runCases(t, prefix, []guestCase{
		{"guest reads the host's file and writes one", []string{"-c", "cat /mnt/data/f.txt && echo from-guest > /mnt/data/g.txt && echo more >> /mnt/data/g.txt && cat /mnt/data/g.txt"},
			0, []string{"from-host\n", "from-guest\nmore\n"}, nil},
		// busybox's cp opens the copy with the source's st_mode, file type
		// bits and all: open ignores them; the host's openat2 would not.
		{"cp from the image into the bind", []string{"-c", "cp /etc/hostname /mnt/data/cp.txt && cat /mnt/data/cp.txt"},
			0, []string{"kbox-rootfs\n"}, nil},
		{"stat of the mount point is the host directory", []string{"--", "/usr/bin/stat", "-c", "%i %F", "/mnt/data"},
			0, []string{strconv.FormatUint(st.Ino, 10) + " directory\n"}, nil},
		{"mount point listed in its parent", []string{"-c", "ls /mnt; ls /mnt/data"}, 0, []string{"data\n", "f.txt"}, nil},
		{"mkdir, rename, chmod, symlink, rm -r in the bind", []string{"-c",
			"cd /mnt/data && mkdir -p t/a/b && echo x > t/a/b/f && mv t/a/b/f t/a/g && chmod 600 t/a/g && ln -s g t/a/l && cat t/a/l && /usr/bin/ls -R t && /usr/bin/stat -c %a t/a/g && /usr/bin/rm -rf t && ls"},
			0, []string{"x\n", "t/a:\nb\ng\nl\n", "600\n", "abs"}, []string{"No such"}},
		{"cd .. from the bind lands in the image", []string{"-c", "cd /mnt/data/sub && cd .. && pwd && cd .. && pwd && cat ../etc/hostname && ls"},
			0, []string{"/mnt/data\n", "/mnt\n", "kbox-rootfs\n", "data\n"}, nil},
		{"bash cd .. from the bind", []string{"--", "/bin/bash", "-c", "cd /mnt/data; cd ..; pwd; cat ../etc/hostname"},
			0, []string{"/mnt\n", "kbox-rootfs\n"}, nil},
		{"dot-dot in paths stays in the guest", []string{"-c", "cat /mnt/data/../../etc/hostname /mnt/data/sub/../../../../../etc/hostname"},
			0, []string{"kbox-rootfs\nkbox-rootfs\n"}, nil},
		{"host symlinks pointing outside do not escape", []string{"-c", "cat /mnt/data/abs /mnt/data/rel /mnt/data/absdir/s /mnt/data/reldir/s; ls /mnt/data/absdir /mnt/data/reldir; echo st=$?"},
			0, []string{"st=1"}, []string{bindSecret}},
		// An absolute link names a guest path, as in a bind mount: the
		// image's /etc/hostname, not the bind's, and never the host's.
		{"guest-made symlinks resolve in the guest's tree", []string{"-c",
			"cd /mnt/data; ln -s " + dir + "/secret/s gabs; ln -s ../../../../../../../../../.." + dir + "/secret gdir; ln -s /etc/hostname ghost; " +
				"cat gabs gdir/s; cat ghost; echo st=$?"},
			0, []string{"kbox-rootfs\n", "st=0"}, []string{bindSecret, "bind-own-hostname"}},
		{"stat and readlink through a symlink find no host file", []string{"-c", "stat -L /mnt/data/abs 2>&1; readlink /mnt/data/abs; test -e /mnt/data/rel || echo absent"},
			0, []string{"No such file", dir + "/secret/s\n", "absent\n"}, []string{bindSecret}},
		{"readlink of a file that is not a link is EINVAL; readlink -f works", []string{"-c", "readlink /mnt/data/f.txt; echo st=$?; /usr/bin/readlink -f /mnt/data/sub/../f.txt; cd /mnt/data && /usr/bin/realpath -e f.txt sub"},
			0, []string{"st=1\n/mnt/data/f.txt\n/mnt/data/f.txt\n/mnt/data/sub\n"}, nil},
		{"rename out of the bind is EXDEV: mv copies", []string{"-c", "ln /mnt/data/m.txt /tmp/hard 2>&1; mv /mnt/data/m.txt /tmp/m.txt && cat /tmp/m.txt && ls /mnt/data"},
			0, []string{"Invalid cross-device link", "moved-out\n"}, []string{"m.txt\n"}},
		{"no device nodes in a bind", []string{"-c", "mknod /mnt/data/disk b 8 0 2>&1; mkfifo /mnt/data/fifo && ls -l /mnt/data/fifo"},
			0, []string{"Operation not permitted", "prw"}, nil},
	})
	b, err := os.ReadFile(filepath.Join(h, "g.txt"))
	if err != nil || string(b) != "from-guest\nmore\n" {
		t.Errorf("host sees %q, %v; want the guest's writes", b, err)
	}
	if _, err := os.Lstat(filepath.Join(h, "m.txt")); !os.IsNotExist(err) {
		t.Errorf("m.txt still in the host directory after mv out: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(h, "ghost")); err != nil || l != "/etc/hostname" {
		t.Errorf("guest symlink on the host: %q %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(h, "disk")); !os.IsNotExist(err) {
		t.Errorf("device node was made: %v", err)
	}
}

func TestBindReadOnly(t *testing.T) {
	img := copyImage(t, imagePath(t))
	_, h := bindTree(t)
	// A read-only image too: the mount point /data is missing from the
	// image and must not be created in it.
	prefix := []string{"image", "-S", img, "--read-only", "-b", h + ":/data:ro"}
	ops := []string{
		"echo x > f.txt", "echo x >> f.txt", "echo x > new", "touch f.txt", "mkdir d", "rm f.txt", "rmdir sub",
		"mv f.txt g", "ln -s f.txt l", "ln f.txt l", "chmod 777 f.txt", "chown 1:1 f.txt", "truncate -s 0 f.txt",
		"mkfifo p",
	}
	script := "cd /data && cat f.txt"
	for _, op := range ops {
		script += "; (" + op + ") 2>&1 | grep -c 'Read-only file system'"
	}
	script += "; exec 3<f.txt; cat <&3; /usr/bin/stat -f -c %l . >/dev/null; ls /; cat f.txt"
	want := []string{"from-host\n", strings.Repeat("1\n", len(ops)), "from-host\n", "data\n", "from-host\n"}
	runCases(t, prefix, []guestCase{
		{"every write is refused with EROFS", []string{"-c", script}, 0, want, nil},
		{"stat of the missing mount point works", []string{"-c", "cd /data && pwd && ls -d /data && test -d /data && echo isdir"}, 0, []string{"/data\n", "/data\n", "isdir\n"}, nil},
	})
	ents, _ := os.ReadDir(h)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "abs absdir etc f.txt m.txt rel reldir sub" {
		t.Errorf("read-only bind changed: %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(h, "f.txt")); string(b) != "from-host\n" {
		t.Errorf("f.txt changed: %q", b)
	}
}

func TestBindErrors(t *testing.T) {
	img := imagePath(t)
	dir, h := bindTree(t)
	cases := []struct {
		name   string
		bind   string
		status int
		want   string
	}{
		{"missing host directory", dir + "/nope:/mnt/x", 125, "no such file or directory"},
		{"host file, not a directory", h + "/f.txt:/mnt/x", 125, "not a directory"},
		{"guest root", h + ":/", 2, "may not be /"},
		{"on /proc", h + ":/proc/x", 2, "/proc host route"},
		{"relative guest path", h + ":mnt", 2, "absolute"},
		{"no parent in the image", h + ":/no/such/dir", 125, "not a directory of the image"},
		{"guest file", h + ":/etc/hostname", 125, "not a directory in the image"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "-b", c.bind, "--", "/bin/true")
			// The last line (a journal warning about the shared image
			// may come first).
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if status != c.status || !strings.Contains(lines[len(lines)-1], c.want) {
				t.Errorf("status %d stderr %q; want %d and one line with %q", status, stderr, c.status, c.want)
			}
		})
	}
	t.Run("overlapping binds", func(t *testing.T) {
		_, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "-b", h+":/mnt/a", "-b", h+":/mnt/a/b", "--", "/bin/true")
		if status != 2 || !strings.Contains(stderr, "overlaps") {
			t.Errorf("status %d stderr %q", status, stderr)
		}
	})
}

// TestBindExec runs programs from a bind: a static and a dynamic ELF copied
// out of the image (the dynamic one gets the image's interpreter), #!
// scripts, and the refusals: a file without execute permission and a
// directory (EACCES, 126 from the shell), and symlinks: an absolute one
// names a guest path (in the bind or the image), and those that name host
// paths outside the bind find nothing in the guest's tree (127), whereas
// the host programs they name would print their secret.
func TestBindExec(t *testing.T) {
	img := imagePath(t)
	dir, h := bindTree(t)
	bin := filepath.Join(h, "bin")
	if err := os.MkdirAll(filepath.Join(bin, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	dumpFromImageTo(t, img, "/opt/tests/hello", filepath.Join(bin, "hello"))
	dumpFromImageTo(t, img, "/usr/bin/readlink", filepath.Join(bin, "readlink"))
	dumpFromImageTo(t, img, "/opt/tests/hello", filepath.Join(dir, "secret", "prog"))
	files := map[string]string{
		"h/bin/s.sh":       "#!/bin/sh\necho script $0 $1\n",
		"h/bin/bb.sh":      "#!/mnt/t/bin/sh\necho interpreter from the bind\n",
		"secret/run.sh":    "#!/bin/sh\necho " + bindSecret + "\n",
		"h/bin/noexec.sh":  "#!/bin/sh\necho ran-without-x\n",
		"h/bin/imgsh.sh":   "#!/mnt/t/bin/imgsh\necho interpreter through a link to the image\n",
		"h/bin/noexec.elf": "",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dumpFromImageTo(t, img, "/bin/busybox", filepath.Join(bin, "sh"))
	dumpFromImageTo(t, img, "/opt/tests/hello", filepath.Join(bin, "noexec.elf"))
	for _, n := range []string{"noexec.sh", "noexec.elf"} {
		if err := os.Chmod(filepath.Join(bin, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"h/bin/rl":        "readlink",
		"h/bin/hi":        "hello",
		"h/bin/abshi":     "/mnt/t/bin/hello", // a guest path, in the bind
		"h/bin/absimg":    "/opt/tests/hello", // a guest path, in the image
		"h/bin/absbind":   "/bin/hello",       // the bind's own /bin/hello: not this path
		"h/bin/imgsh":     "/bin/bash",        // the image's
		"h/bin/esc":       filepath.Join(dir, "secret/prog"),
		"h/bin/escrel":    "../../secret/prog",
		"h/bin/escsh":     filepath.Join(dir, "secret/run.sh"),
		"h/bin/escshrel":  "../../secret/run.sh",
		"h/bin/escdir":    filepath.Join(dir, "secret"),
		"h/bin/escdirrel": "../../secret",
	}
	for n, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	const hello = "hello from kbox guest\n"
	for _, mode := range []string{"", ":ro"} {
		t.Run("bind"+mode, func(t *testing.T) {
			prefix := []string{"image", "-S", img, "--read-only", "-b", h + ":/mnt/t" + mode}
			runCases(t, prefix, []guestCase{
				{"static ELF as the command", []string{"--", "/mnt/t/bin/hello"}, 0, []string{hello}, nil},
				{"the command through a link to the image's program", []string{"--", "/mnt/t/bin/absimg"}, 0, []string{hello}, nil},
				{"static ELF from the shell and on PATH", []string{"-c", "/mnt/t/bin/hello && cd /mnt/t && bin/hello && PATH=/mnt/t/bin:$PATH hello"},
					0, []string{hello, hello, hello}, nil},
				{"dynamic ELF with the image's interpreter", []string{"-c", "/mnt/t/bin/readlink /proc/self/exe; /mnt/t/bin/rl /proc/self/exe"},
					0, []string{"/mnt/t/bin/readlink\n/mnt/t/bin/readlink\n"}, nil},
				{"shebang scripts", []string{"-c", "/mnt/t/bin/s.sh one; cd /mnt/t/bin && ./s.sh two; /mnt/t/bin/bb.sh; /mnt/t/bin/imgsh.sh"},
					0, []string{"script /mnt/t/bin/s.sh one\n", "script ./s.sh two\n", "interpreter from the bind\n", "interpreter through a link to the image\n"}, nil},
				{"no execute permission: EACCES", []string{"-c", "/mnt/t/bin/hello; echo st=$?; /mnt/t/bin/noexec.sh; echo st=$?; /mnt/t/bin/noexec.elf; echo st=$?; /mnt/t/bin/dir; echo st=$?"},
					0, []string{hello + "st=0\nst=126\nst=126\nst=126\n"}, []string{"ran-without-x"}},
				{"symlinks resolve in the guest's tree: out of it, nothing is executed", []string{"-c",
					"for p in hi abshi absimg absbind esc escrel escsh escshrel escdir/prog escdirrel/prog escdir/run.sh; do /mnt/t/bin/$p; echo st=$?; done"},
					0, []string{strings.Repeat(hello+"st=0\n", 3) + strings.Repeat("st=127\n", 8)}, []string{bindSecret}},
			})
		})
	}
}

// TestBindExecNoexec: a bind on a filesystem mounted noexec executes
// nothing, as the host kernel would refuse, while the same program in a
// bind on a tmpfs without noexec runs. The tmpfs mounts are made in a
// private mount namespace (needs root; skipped otherwise).
func TestBindExecNoexec(t *testing.T) {
	img := imagePath(t)
	bin := kboxBin(t)
	if out, err := exec.Command("unshare", "-m", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Skipf("SKIP (needs a private mount namespace): unshare -m: %v %s", err, out)
	}
	dir := t.TempDir()
	hello := filepath.Join(dir, "hello")
	dumpFromImageTo(t, img, "/opt/tests/hello", hello)
	script := ""
	for _, m := range []string{"x", "nx"} {
		d := filepath.Join(dir, m)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		opt := "exec"
		if m == "nx" {
			opt = "noexec"
		}
		script += "mount -t tmpfs -o " + opt + " kbox-" + m + " " + d + " && cp " + hello + " " + d + "/ && "
	}
	script += bin + " image -S " + img + " --read-only -b " + dir + "/x:/mnt/x -b " + dir + "/nx:/mnt/nx -c " +
		"'/mnt/x/hello; echo st=$?; /mnt/nx/hello; echo st=$?; test -r /mnt/nx/hello && echo readable'"
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out, stderr.String())
	}
	if string(out) != "hello from kbox guest\nst=0\nst=126\nreadable\n" {
		t.Errorf("want the program to run from the exec mount only:\n%s%s", out, stderr.String())
	}
}

// TestBindLinks: symlinks in a bind whose targets leave it resolve as in a
// bind mount on Linux (tests/guest/bindlinks.c, which checks itself
// against each target's own path, natively first): an absolute target from
// the guest's root, ".." above the bind in the image, for every kind of
// call (stat, open, O_CREAT through a dangling link, mkdir, rename, link,
// chmod, utimes, truncate, unlink, rmdir, chdir, a directory fd), in each
// tier; a link to a host path outside the bind finds nothing. Before, a
// bind was resolved as a chroot of its own: "/etc/hostname" in a bind
// named the bind's etc/hostname (findutils' -xtype and -H/-L tests failed).
func TestBindLinks(t *testing.T) {
	img := imagePath(t)
	dir, _ := bindTree(t)
	secret := filepath.Join(dir, "secret", "s")
	if native := nativeGuest(t, "bindlinks"); native != "" {
		if _, err := os.Stat("/etc/hostname"); err == nil {
			nb, ns := t.TempDir(), t.TempDir()
			if out, err := exec.Command(native, nb, ns, "/nonexistent/kbox-hostonly").CombinedOutput(); err != nil {
				t.Fatalf("natively: %v\n%s", err, out)
			}
		} else {
			t.Logf("no /etc/hostname on the host: no native run")
		}
	}
	for _, tier := range []string{"seccomp", "trap", "rewrite"} {
		b := t.TempDir()
		if err := os.Chmod(b, 0o755); err != nil {
			t.Fatal(err)
		}
		out, stderr, st := runKbox(t, "image", "-S", img, "--ephemeral", "--syscall-mode="+tier, "--trusted",
			"-b", b+":/mnt/b", "--", "/opt/tests/bindlinks", "/mnt/b", "/tmp", secret)
		if st != 0 || strings.Contains(out, "FAIL") || strings.Count(out, "ok ") < 30 {
			t.Errorf("%s: status %d\n%s%s", tier, st, out, stderr)
		}
		if strings.Contains(out, bindSecret) {
			t.Errorf("%s: the host's secret reached the guest", tier)
		}
		if _, err := os.Lstat(filepath.Join(b, "made-through-link")); err == nil {
			t.Errorf("%s: a dangling link's target was made in the bind", tier)
		}
	}
}

// TestBindDevices: a bind's files show one device in every view (stat,
// fstat, fstatat and statx of an fd, /dev/fd/N and /proc/self/fd/N, a
// copy of the fd in the virtual range, maps), the one mountinfo gives the
// bind, and no directory of the image (/, /etc, /tmp) or /proc shares it
// (tests/guest/binddev.c, natively first on a tmpfs directory). Before, a
// bind showed its host device: on a host whose disk is LKL's 254:0 a bind
// and the image had one device number, so find -xdev walked into the bind
// and a bind file could pass for an image file of the same inode.
func TestBindDevices(t *testing.T) {
	img := imagePath(t)
	if native := nativeGuest(t, "binddev"); native != "" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			d, err := os.MkdirTemp("/dev/shm", "kbox-binddev")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(d)
			if out, err := exec.Command(native, d, "/etc", "/proc").CombinedOutput(); err != nil {
				t.Fatalf("natively: %v\n%s", err, out)
			}
		} else {
			t.Logf("no /dev/shm on the host: no native run")
		}
	}
	for _, tier := range []string{"seccomp", "trap", "rewrite"} {
		out, stderr, st := runKbox(t, "image", "-S", img, "--ephemeral", "--syscall-mode="+tier, "--trusted",
			"-b", t.TempDir()+":/mnt/b", "--", "/opt/tests/binddev", "/mnt/b", "/", "/etc", "/tmp", "/proc")
		if st != 0 || strings.Contains(out, "FAIL") || !strings.HasSuffix(out, "checks 19\n") {
			t.Errorf("%s: status %d\n%s%s", tier, st, out, stderr)
		}
	}
	// find -xdev stays on the image's filesystem; the bind's own walk
	// finds its file.
	b := t.TempDir()
	if err := os.WriteFile(filepath.Join(b, "binddev.f"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, st := runKbox(t, "image", "-S", img, "--ephemeral", "-b", b+":/mnt/b", "--", "/bin/sh", "-c",
		"find / -xdev -name binddev.f; echo --; find /mnt/b -xdev -name binddev.f")
	if st != 0 || out != "--\n/mnt/b/binddev.f\n" {
		t.Errorf("find -xdev: status %d\n%s%s", st, out, stderr)
	}
}
