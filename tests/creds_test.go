//go:build lkl

package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/rootfs"
	"golang.org/x/sys/unix"
)

// Credentials: each guest process has its own, changed by Linux's rules,
// and LKL checks every file operation with them (docs/security.md).

// TestCredsSu: busybox su becomes nobody, and the shell that ran it stays
// root.
func TestCredsSu(t *testing.T) {
	runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, []guestCase{
		{"su nobody", []string{"-c", "su -s /bin/sh nobody -c id; id"}, 0,
			[]string{"uid=65534(nobody) gid=65534(nogroup) groups=65534(nogroup)\n", "uid=0(root) gid=0(root) groups=0(root)\n"}, nil},
		{"nobody cannot read root's home", []string{"-c", "su -s /bin/sh nobody -c 'ls /root; echo st=$?' 2>&1"}, 0,
			[]string{"Permission denied", "st=1"}, nil},
		// Linux's rule between the guest's uids (LTP kill05): the host
		// sees one uid and would let it.
		{"nobody cannot signal root's process", []string{"-c", "sleep 5 & p=$!; su -s /bin/sh nobody -c \"kill $p 2>&1; echo st=\\$?\"; kill -0 $p && echo alive; kill $p; echo root st=$?"}, 0,
			[]string{"Operation not permitted", "st=1\n", "alive\n", "root st=0\n"}, nil},
	})
}

// credsNative runs the image's creds program natively, as root, against a
// host directory shaped like the guest's: a root 0644 file, a root 0700
// directory and a 1777 one. It returns "" when the test does not run as
// root (the program changes its ids).
func credsNative(t *testing.T, args ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: no native run to compare with")
		return ""
	}
	bin := dumpFromImage(t, imagePath(t), "/opt/tests/creds")
	dir, err := os.MkdirTemp("", "kbox-creds-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(dir, 0o755))
	must(os.Chmod(filepath.Dir(bin), 0o755))
	must(os.WriteFile(filepath.Join(dir, "file"), []byte("x\n"), 0o644))
	must(os.Mkdir(filepath.Join(dir, "root"), 0o700))
	must(os.Mkdir(filepath.Join(dir, "tmp"), 0o777))
	must(os.Chmod(filepath.Join(dir, "tmp"), 0o1777))
	r := strings.NewReplacer("FILE", filepath.Join(dir, "file"), "DIR", filepath.Join(dir, "root"), "TMP", filepath.Join(dir, "tmp"))
	var a []string
	for _, s := range args {
		a = append(a, r.Replace(s))
	}
	out, err := exec.Command(bin, a...).CombinedOutput()
	if err != nil {
		t.Fatalf("native creds %v: %v\n%s", a, err, out)
	}
	return string(out)
}

// TestCredsDrop: setgroups, setresgid and setresuid to nobody, then what
// nobody may do (write a root file, create in root's 0700 home, own what
// it creates in a 1777 directory, access, get root back), natively and
// under kbox alike.
func TestCredsDrop(t *testing.T) {
	cases := []struct {
		name  string
		guest []string // creds arguments in the guest
		host  []string // the same natively (FILE, DIR, TMP replaced)
		want  []string
	}{
		{"drop", []string{"drop", "/etc/hostname", "/root", "/tmp"}, []string{"drop", "FILE", "DIR", "TMP"}, []string{
			"res uid 65534 65534 65534 getuid 65534 geteuid 65534\n",
			"res gid 65534 65534 65534 getgid 65534 getegid 65534\n",
			"groups 1: 65534\n",
			"write root file: EACCES\n",
			"read root file: 0\n",
			"create in root dir: EACCES\n",
			"create in tmp: 0\n",
			"tmp file owner by path 65534:65534\n",
			"access W_OK: EACCES\n",
			"access R_OK: 0\n",
			"setuid(0): EPERM\n",
			"seteuid(0): EPERM\n",
			"setgid(0): EPERM\n",
			"setgroups([0]): EPERM\n",
			"setfsuid(0) returns 65534\n",
			"cap eff 0 perm 0 inh 0\n",
		}},
		{"saved uid", []string{"saved", "/root"}, []string{"saved", "DIR"}, []string{
			"setresuid(-1, 65534, 0): 0\n",
			"res uid 65534 65534 0 ",
			"create in root dir: EACCES\n",
			"seteuid(0): 0\n",
			"res uid 65534 0 0 ",
			"create in root dir: 0\n",
			"setresuid(-1, -1, 65534) then seteuid(0): 0 EPERM\n",
		}},
		{"a child forked before a setuid keeps its ids", []string{"forkdrop", "/root"}, []string{"forkdrop", "DIR"}, []string{
			"parent uid 65534\n",
			"child uid 0 euid 0\n",
			"child create in root dir: 0\n",
		}},
		{"access checks the real ids", []string{"real", "/etc/hostname"}, []string{"real", "FILE"}, []string{
			"open for writing (euid 0): 0\n",
			"access W_OK (real uid): EACCES\n",
			"faccessat W_OK AT_EACCESS: 0\n",
		}},
	}
	img := copyImage(t, imagePath(t))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, st := runKbox(t, append([]string{"image", "-S", img, "--", "/opt/tests/creds"}, c.guest...)...)
			if st != 0 {
				t.Fatalf("status %d\n%s%s", st, out, stderr)
			}
			rest := out
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order):\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			if native := credsNative(t, c.host...); native != "" && native != out {
				t.Errorf("differs from the native run\nkbox:\n%s\nnative:\n%s", out, native)
			}
		})
	}
	assertCleanImage(t, img)
}

// TestCredsCapget: capget is emulated: every capability for root (whatever
// the host's bounding set), none for nobody.
func TestCredsCapget(t *testing.T) {
	full := fmt.Sprintf("cap eff %#x perm %#x inh 0\n", uint64(1)<<41-1, uint64(1)<<41-1)
	runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, []guestCase{
		{"root", []string{"--", "/opt/tests/creds", "caps"}, 0, []string{"res uid 0 0 0", full}, nil},
		{"nobody", []string{"-c", "su -s /bin/sh nobody -c '/opt/tests/creds caps'"}, 0,
			[]string{"res uid 65534 65534 65534", "cap eff 0 perm 0 inh 0\n"}, nil},
	})
	out, stderr, st := runKbox(t, "image", "-R", imagePath(t), "--read-only", "--change-id", "1000:1000", "--", "/opt/tests/creds", "caps")
	if st != 0 || !strings.Contains(out, "res uid 1000 1000 1000") || !strings.Contains(out, "groups 1: 1000\n") || !strings.Contains(out, "cap eff 0 perm 0 inh 0\n") {
		t.Errorf("--change-id 1000:1000: status %d\n%s%s", st, out, stderr)
	}
}

// TestCredsChangeID: --change-id 1000:1000 is uid and gid 1000 for LKL too.
func TestCredsChangeID(t *testing.T) {
	img := copyImage(t, imagePath(t))
	runCases(t, []string{"image", "-R", img, "--change-id", "1000:1000"}, []guestCase{
		{"id and owner of a new file", []string{"-c", "id; echo x > /tmp/f; mkdir /tmp/d; stat -c '%u:%g %n' /tmp/f /tmp/d"}, 0,
			[]string{"uid=1000(kbox) gid=1000(kbox) groups=1000(kbox)\n", "1000:1000 /tmp/f\n1000:1000 /tmp/d\n"}, nil},
		{"root's files", []string{"-c", "(echo x >> /etc/hostname) 2>&1; echo st=$?; ls /root 2>&1; echo st=$?; touch /newfile 2>&1; echo st=$?; cat /etc/hostname"}, 0,
			[]string{"Permission denied\nst=1\n", "Permission denied\nst=1\n", "Permission denied\nst=1\n", "kbox-rootfs\n"}, nil},
	})
	out, stderr, st := runKbox(t, "image", "-S", img, "-c", "test -e /newfile && echo newfile exists; cat /etc/hostname")
	if st != 0 || out != "kbox-rootfs\n" {
		t.Errorf("a 1000:1000 guest changed root's files: status %d\n%s%s", st, out, stderr)
	}
	assertCleanImage(t, img)
}

// TestCredsSetgidDir: a file created in a set-gid directory takes the
// directory's group and a new subdirectory inherits set-gid; elsewhere the
// creator's fsgid counts (the kernel's rules, with the creator's ids).
func TestCredsSetgidDir(t *testing.T) {
	script := `mkdir -m 2777 /tmp/sg /tmp/plain; chgrp 4242 /tmp/sg; chmod 2777 /tmp/sg; chmod 0777 /tmp/plain
su -s /bin/sh kbox -c 'touch /tmp/sg/f /tmp/plain/f; mkdir /tmp/sg/d /tmp/plain/d'
stat -c '%u %g %A %n' /tmp/sg/f /tmp/sg/d /tmp/plain/f /tmp/plain/d`
	runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, []guestCase{
		{"set-gid directory", []string{"-c", script}, 0, []string{
			"1000 4242 -rw-r--r-- /tmp/sg/f\n",
			"1000 4242 drwxr-sr-x /tmp/sg/d\n",
			"1000 1000 -rw-r--r-- /tmp/plain/f\n",
			"1000 1000 drwxr-xr-x /tmp/plain/d\n"}, nil},
	})
}

// TestCredsWriteOnly: a file others may write but not read (0622) takes
// nobody's writes, through a shadow and through a virtual fd alike, and
// nobody still cannot read it.
// chmod with set-gid by an owner who is not in the file's group and lacks
// CAP_FSETID: Linux clears the bit, on files and directories alike (LTP
// chmod/fchmod cases); root keeps it.
func TestCredsChmodSetgid(t *testing.T) {
	script := `mkdir /tmp/d /tmp/r; touch /tmp/f; chown 65534:0 /tmp/d /tmp/f
su -s /bin/sh nobody -c 'chmod 2755 /tmp/d /tmp/f'; chmod 2755 /tmp/r
stat -c '%a %n' /tmp/d /tmp/f /tmp/r`
	runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, []guestCase{
		{"set-gid cleared", []string{"-c", script}, 0, []string{"755 /tmp/d\n755 /tmp/f\n2755 /tmp/r\n"}, nil},
	})
}

// /tmp is sticky, as on Linux: nobody cannot remove or rename root's file
// there, but can its own.
func TestCredsStickyTmp(t *testing.T) {
	script := `echo r > /tmp/rootfile; stat -c '%a' /tmp
su -s /bin/sh nobody -c 'rm -f /tmp/rootfile 2>&1; mv /tmp/rootfile /tmp/x 2>&1; echo n > /tmp/mine; rm /tmp/mine && echo own removed'
cat /tmp/rootfile`
	runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, []guestCase{
		{"sticky /tmp", []string{"-c", script}, 0, []string{"1777\n", "Operation not permitted\n", "Operation not permitted\n", "own removed\n", "r\n"}, nil},
	})
}

func TestCredsWriteOnly(t *testing.T) {
	script := `echo old-content > /tmp/wo; chmod 0622 /tmp/wo
su -s /bin/sh nobody -c 'echo new-content > /tmp/wo; echo w=$?; cat /tmp/wo; echo r=$?; echo more >> /tmp/wo; echo a=$?'
cat /tmp/wo`
	want := []string{"w=0\n", "r=1\n", "a=0\n", "new-content\nmore\n"}
	for _, max := range []string{"", "4"} {
		t.Run("shadow max "+max, func(t *testing.T) {
			cmd := exec.Command(kboxBin(t), "image", "-S", imagePath(t), "--read-only", "-c", script)
			if max != "" {
				cmd.Env = append(os.Environ(), "KBOX_SHADOW_MAX="+max) // a virtual fd
			}
			out, err := cmd.Output()
			rest := string(out)
			for _, w := range want {
				i := strings.Index(rest, w)
				if err != nil || i < 0 {
					t.Fatalf("%v: output lacks %q (in order):\n%s", err, w, out)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestCredsExec: exec needs an execute bit for the caller (root: any), and
// not read permission.
func TestCredsExec(t *testing.T) {
	script := `cp /opt/tests/hello /tmp/h700; chmod 700 /tmp/h700; cp /opt/tests/hello /tmp/h711; chmod 711 /tmp/h711
cp /opt/tests/hello /tmp/h644; chmod 644 /tmp/h644; cp /opt/tests/hello /tmp/h100; chmod 100 /tmp/h100
/tmp/h644; echo root-644=$?; /tmp/h100; echo root-100=$?
su -s /bin/sh nobody -c '/tmp/h700; echo nobody-700=$?; /tmp/h711; echo nobody-711=$?; cat /tmp/h711 >/dev/null; echo read-711=$?'`
	runCases(t, []string{"image", "-S", imagePath(t), "--read-only"}, []guestCase{
		{"execute permission", []string{"-c", script + " 2>&1"}, 0, []string{
			"root-644=126\n",
			"hello from kbox guest\nroot-100=0\n",
			"nobody-700=126\n",
			"hello from kbox guest\nnobody-711=0\n",
			"read-711=1\n"}, nil},
	})
}

// TestCredsOrphan: a process whose parent exited before its first system
// call keeps its parent's credentials; one whose parent died of a signal
// cannot be vouched for and is killed; CLONE_PARENT cannot hand a child
// its grandparent's credentials; and processes with different credentials
// stat'ing one path at the same time never see each other's cached
// results.
func TestCredsOrphan(t *testing.T) {
	img := copyImage(t, imagePath(t))
	runCases(t, []string{"image", "-S", img}, []guestCase{
		{"exit_group leaves the child its credentials", []string{"-c", "/opt/tests/creds orphan /root"}, 0,
			[]string{"orphan uid 65534 euid 65534 create in root dir: EACCES\n"}, nil},
		{"parent killed by a signal: child killed", []string{"-c", "/opt/tests/creds orphan-crash /root"}, 0,
			[]string{"orphan: no report (killed)\n"}, []string{"orphan uid 0"}},
		{"CLONE_PARENT refused", []string{"-c", "/opt/tests/creds clone-parent"}, 0,
			[]string{"clone(CLONE_PARENT): EPERM\n"}, nil},
		{"stat cache per credentials", []string{"-c", "/opt/tests/creds statmix /root 3000"}, 0,
			[]string{"nobody stat succeeded 0 of 3000; root child all ok\n"}, nil},
	})
}

// TestCredsTidReuse: a thread of a root process makes a notified syscall
// and exits; nobody then forks until a child gets that thread's id back.
// The child is nobody's, not the dead thread's process's. The same for a
// root process killed by a signal (pidreuse). Steering the id
// takes a write to the host's /proc/sys/kernel/ns_last_pid, as kbox's
// host uid: root only. The guest's /proc/sys is LKL's, whose writes are
// refused (package procfs), so the test binds the host's
// /proc/sys/kernel explicitly. It only moves where the host allocates its
// next pid.
func TestCredsTidReuse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP (needs root on the host to steer pids through ns_last_pid)")
	}
	for _, c := range []struct{ mode, want string }{
		{"tidreuse", "child with the dead thread's id: uid 65534\n"},
		// A process killed by a signal: kbox sees no exit_group, and fork
		// is not notified, so only its pidfd tells (dispatch/proc.go alive).
		{"pidreuse", "child with the killed process's id: uid 65534\n"},
	} {
		out, stderr, st := runKbox(t, "image", "-S", imagePath(t), "--read-only", "--syscall-mode=seccomp",
			"-b", "/proc/sys/kernel:/mnt/hostkernel", "--", "/opt/tests/creds", c.mode, "/mnt/hostkernel/ns_last_pid")
		if st != 0 || out != c.want {
			t.Errorf("%s: status %d\n%s%s", c.mode, st, out, stderr)
		}
	}
}

func init() {
	// lkl-cred-threads checks the LKL side alone: credentials follow the
	// OS thread that set them, AsRoot is root for its duration, a thread
	// that never set any is root, and a thread's CredSlot holds what it
	// wants (UseCredOn through it switches as UseCred does).
	helpers["lkl-cred-threads"] = func(img string, ro bool) error {
		return withRoot(img, ro, func(*rootfs.Root) error {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			defer lkl.UseCred(nil)
			open := func() string {
				fd, err := lkl.Open("/root", unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					return err.(unix.Errno).Error()
				}
				lkl.Close(fd)
				return "ok"
			}
			nobody := lkl.NewCred(65534, 65534, []uint32{65534}, 0)
			fmt.Printf("root=%s\n", open())
			slot := lkl.CredSlot()
			fmt.Printf("slot_before=%v\n", *slot == 0)
			lkl.UseCredOn(slot, nobody)
			fmt.Printf("slot_after=%v\n", *slot == nobody.ID())
			fmt.Printf("nobody=%s\n", open())
			fmt.Printf("applied_is_nobody=%v\n", lkl.AppliedCredID() == nobody.ID())
			var inRoot string
			lkl.AsRoot(func() { inRoot = open() })
			fmt.Printf("as_root=%s\n", inRoot)
			fmt.Printf("nobody_again=%s\n", open())
			done := make(chan string)
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				other := lkl.CredSlot()
				done <- fmt.Sprintf("%s %v", open(), other != slot && *other == 0)
			}()
			fmt.Printf("other_thread=%s\n", <-done)
			// Back to root through the slot, and to nobody again.
			lkl.UseCredOn(slot, nil)
			fmt.Printf("slot_root=%s %v\n", open(), *slot == 0)
			lkl.UseCredOn(slot, nobody)
			fd, err := lkl.Open("/tmp/by-nobody", unix.O_WRONLY|unix.O_CREAT, 0o600)
			if err != nil {
				return err
			}
			lkl.Close(fd)
			st, err := lkl.Stat("/tmp/by-nobody", false)
			fmt.Printf("created_owner=%d:%d\n", st.Uid, st.Gid)
			return err
		})
	}
}

func TestLKLCredThreads(t *testing.T) {
	kv := helper(t, "lkl-cred-threads", imagePath(t), true)
	want := map[string]string{"root": "ok", "nobody": "permission denied", "applied_is_nobody": "true", "as_root": "ok",
		"nobody_again": "permission denied", "other_thread": "ok true", "created_owner": "65534:65534",
		"slot_before": "true", "slot_after": "true", "slot_root": "ok true"}
	for k, v := range want {
		if kv[k] != v {
			t.Errorf("%s=%q, want %q (all: %v)", k, kv[k], v, kv)
		}
	}
}

// A guest user lowers no nice value (setpriority needs CAP_SYS_NICE or
// RLIMIT_NICE, by the guest's credentials: the host process is kbox's,
// which may be root); raising it works, and root lowers it. Natively, as
// a user: "cannot set niceness", the value unchanged. The same holds for
// a process group (renice -g) and the real-time I/O class (ionice -c 1,
// which natively a user is refused with EPERM). The pipelines run
// in the seccomp tier; each tier runs nice as the command itself.
func TestNiceByGuestCredentials(t *testing.T) {
	img := imagePath(t)
	const script = `nice -n -10 cat /proc/self/stat | cut -d" " -f19; nice -n 5 nice -n -2 cat /proc/self/stat | cut -d" " -f19; nice -n 5 cat /proc/self/stat | cut -d" " -f19; renice -n 5 -g $$ >/dev/null; renice -n -10 -g $$ >/dev/null; cut -d" " -f19 /proc/self/stat; ionice -c 1 -n 0 -p $$ 2>/dev/null; ionice -p $$`
	const refused = "nice: cannot set niceness: Permission denied"
	user, root := []string{"-r", img, "--change-id", "1000:1000"}, []string{"-S", img}
	for _, c := range []struct {
		name       string
		args       []string
		out, errOf string
	}{
		// The last line: the process group's nice raised by 5, then lowered by 10
		// (renice -g), which only root may do; then the real-time I/O
		// class (CAP_SYS_ADMIN or CAP_SYS_NICE).
		{"user", user, "0\n5\n5\n5\nnone: prio 0\n", refused},
		{"root", root, "-10\n3\n5\n-5\nrealtime: prio 0\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, st := runKbox(t, append(append([]string{"image", "--read-only"}, c.args...), "--", "/bin/sh", "-c", script)...)
			if st != 0 || out != c.out || !strings.Contains(stderr, c.errOf) {
				t.Errorf("status %d, stdout %q (want %q), stderr %s", st, out, c.out, stderr)
			}
		})
	}
	forEachTier(t, func(t *testing.T, tier string) {
		_, stderr, st := runKbox(t, append(append([]string{"image", "--read-only", "--syscall-mode=" + tier}, user...), "--", "/usr/bin/nice", "-n", "-10", "/bin/true")...)
		if st != 0 || !strings.Contains(stderr, refused) {
			t.Errorf("user's nice -n -10: status %d, stderr %q, want %q", st, stderr, refused)
		}
	})
}
