//go:build lkl

package tests

import (
	"strings"
	"testing"
	"time"
)

// TestImageLikeInstalled: an image of Debian packages whose maintainer
// scripts never ran (rootfs/build.sh) works like an installed system
// for the common cases: `cc` is the alternatives link to gcc, so a plain
// Makefile builds with `make -j2`; git clones a local repository; the
// CA bundle, the ld.so cache and Debian's system users are there.
func TestImageLikeInstalled(t *testing.T) {
	img := copyImage(t, packageImage(t, "gcc", "libc6-dev", "make", "git", "ca-certificates"))
	script := `
set -e
mkdir -p /tmp/proj && cd /tmp/proj
printf 'int add(int, int);\nint twice(int);\nint main(void) { return add(2, twice(3)) == 8 ? 0 : 1; }\n' > main.c
printf '#include <stdio.h>\nint add(int a, int b) { printf("add %%d %%d\\n", a, b); return a + b; }\n' > add.c
printf 'int twice(int a) { return 2 * a; }\n' > twice.c
printf 'prog: main.o add.o twice.o\n\t$(CC) -o $@ $^\n' > Makefile
make -j2 >/tmp/make.log 2>&1 || { cat /tmp/make.log; exit 10; }
./prog
echo "prog status $?"
cd /tmp
git init -q origin
cd origin
echo "first line" > file.txt
git add file.txt
git -c user.name=kbox -c user.email=kbox@example.invalid commit -q -m "the first commit"
cd /tmp
git clone -q origin copy
cat copy/file.txt
git -C copy log --format=%s
readlink /usr/bin/cc; readlink /etc/alternatives/cc
grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt >/dev/null && echo "ca bundle ok"
test -s /etc/ld.so.cache && echo "ld.so.cache ok"
grep '^www-data:' /etc/passwd | cut -d: -f3
`
	out, errOut, st, _ := runKboxWithin(t, 5*time.Minute, "image", "-S", img, "--", "/bin/sh", "-c", script)
	want := "add 2 6\nprog status 0\nfirst line\nthe first commit\n/etc/alternatives/cc\n/usr/bin/gcc\nca bundle ok\nld.so.cache ok\n33\n"
	if st != 0 || out != want {
		t.Errorf("status %d, stdout:\n%s\nwant:\n%s\nstderr: %s", st, out, want, lastLines(errOut, 20))
	}
	if strings.Contains(out+errOut, "No such file") {
		t.Errorf("something is missing:\n%s\n%s", out, errOut)
	}
}
