//go:build lkl

package tests

import (
	"strings"
	"testing"
)

// The supervisor caches LKL stat results while only lookups run
// (dispatch/cache.go). Every kind of change must show in the next stat:
// writes through a writable shadow closed natively, appends through a dup2
// bridge's pump (a file above KBOX_SHADOW_MAX), chmod, rename, unlink,
// creation after a failed lookup, truncate, symlink retargeting, utimensat,
// and the access time the first read after an open sets.
func TestStatCacheSeesEveryChange(t *testing.T) {
	img := copyImage(t, imagePath(t))
	script := strings.Join([]string{
		"cd /root",
		"echo a > f; stat -c s1=%s f",
		"echo bbb >> f; stat -c s2=%s f",
		"chmod 600 f; stat -c m=%a f",
		"mv f g; stat f 2>/dev/null || echo gone; stat -c s3=%s g",
		"[ -e n ] || echo absent; echo x > n; [ -e n ] && echo present",
		"truncate -s 100 g; stat -c s4=%s g",
		"ln -s g l; stat -L -c s5=%s l; rm g; echo 12345678 > g; stat -L -c s6=%s l",
		"touch -d @1000000000 g; stat -c t=%Y g",
		"head -c 5000000 /dev/zero > big; stat -c b1=%s big; echo more >> big; stat -c b2=%s big",
		"rm n; stat n 2>/dev/null || echo unlinked",
		// Access times, as on Linux: an open alone reads nothing; a
		// read (native, on the shadow) does, which LKL's inode has once
		// the file is closed (cache.go, shadowfd's close events).
		// bash's own open, read and test builtin: no exec in between.
		"echo x > at; touch -a -d @1000 at; [ -N at ] && echo a1=unread; exec 3< at; [ -N at ] && echo a2=unread; read -u 3 l; exec 3<&-; [ -N at ] || echo a3=read",
	}, "\n")
	out, stderr, st := runKboxEnv(t, kboxEnv{vars: []string{"KBOX_SHADOW_MAX=4000000"}}, "image", "-S", img, "--", "/bin/bash", "-c", script)
	if st != 0 {
		t.Fatalf("kbox: status %d\n%s%s", st, out, stderr)
	}
	want := []string{"s1=2\n", "s2=6\n", "m=600\n", "gone\n", "s3=6\n", "absent\n", "present\n",
		"s4=100\n", "s5=100\n", "s6=9\n", "t=1000000000\n", "b1=5000000\n", "b2=5000005\n", "unlinked\n",
		"a1=unread\n", "a2=unread\n", "a3=read\n"}
	rest := string(out)
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("missing %q (in order) in:\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
}

// Coreutils that check or set metadata through the fd they opened: cp
// compares fstat of the opened source with its stat (a shadow must report
// its image file, not the memfd), cp -p/install/touch set times, mode and
// owner on the fd (a writable shadow's belong to its image file), and the
// result must persist into the next run.
func TestFileToolsKeepMetadata(t *testing.T) {
	img := copyImage(t, imagePath(t))
	script := strings.Join([]string{
		"cd /root",
		"echo data > src; chmod 640 src; touch -d @1200000000 src",
		"cp src plain && cat plain",
		"cp -p src kept && stat -c 'kept %a %Y %s' kept",
		"install -m 700 src inst && stat -c 'inst %a' inst",
		"echo 1 > g; touch -d @1000000000 g; chown 123:45 g; stat -c 'g %Y %u:%g' g",
		"mkdir -p d/e; echo deep > d/e/f; cp -a d d2 && cat d2/e/f",
	}, "\n")
	out, stderr, st := runKbox(t, "image", "-S", img, "--", "/bin/bash", "-c", script)
	if st != 0 {
		t.Fatalf("status %d\n%s\n%s", st, out, stderr)
	}
	for _, w := range []string{"data\n", "kept 640 1200000000 5\n", "inst 700\n", "g 1000000000 123:45\n", "deep\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in:\n%s\n%s", w, out, stderr)
		}
	}
	out, stderr, _ = runKbox(t, "image", "-S", img, "--", "/bin/stat", "-c", "%n %a %Y %u", "/root/kept", "/root/g")
	if !strings.Contains(out, "/root/kept 640 1200000000 0\n") || !strings.Contains(out, "/root/g 644 1000000000 123\n") {
		t.Errorf("metadata did not persist:\n%s\n%s", out, stderr)
	}
}
