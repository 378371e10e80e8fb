//go:build lkl

package tests

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Unix sockets and System V IPC (docs/tiers.md "Unix sockets", "System V
// IPC"; docs/security.md): between guest processes as on Linux, names in
// the guest's filesystem, abstract names and IPC objects private to the
// kbox run.

// nativeGuest compiles the guest program tests/guest/NAME.c for the host
// (musl-gcc -static, as `make rootfs` does) so that a test can compare
// with Linux itself; it skips the comparison (returns "") without a
// compiler.
func nativeGuest(t *testing.T, name string) string {
	t.Helper()
	cc, err := exec.LookPath("musl-gcc")
	if err != nil {
		t.Logf("no musl-gcc: no native comparison")
		return ""
	}
	out := filepath.Join(t.TempDir(), name)
	src := filepath.Join(repoRoot(), "tests", "guest", name+".c")
	if b, err := exec.Command(cc, "-static", "-O2", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("compile %s: %v\n%s", src, err, b)
	}
	return out
}

// lineSet is the sorted lines of out: two processes print concurrently,
// so only the set of lines is stable.
func lineSet(out string) []string {
	l := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(l)
	return l
}

// wantLines checks that out holds every line of want (in any order) and
// no line starting with "FAIL".
func wantLines(t *testing.T, what, out, errOut string, want ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		have[l] = true
		if strings.HasPrefix(l, "FAIL") {
			t.Errorf("%s: %s\nstdout: %s\nstderr: %s", what, l, out, errOut)
		}
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("%s: no line %q\nstdout: %s\nstderr: %s", what, w, out, errOut)
		}
	}
}

// TestUnixSocketsInProcess: a server and a client by path in one process
// (tests/guest/unixsock self: names, data both ways, a datagram,
// EADDRINUSE, unlink) in each tier, as natively. The in-process tiers had
// no socket binder, and a bind to a path was EPERM there, so auto's
// choice for a program that cannot fork (a Go server on a unix socket)
// could not serve one; kbox now starts the binder at the first such
// bind, and ends it with the run (no process and no directory of it
// left).
func TestUnixSocketsInProcess(t *testing.T) {
	img := imagePath(t)
	want := "stat socket 1\nserver name /tmp/s.sock\nclient peer /tmp/s.sock\nserver got ping\nsecond bind -1 Address in use\n" +
		"datagram got dg\nafter unlink stat -1\nself ok\n"
	if native := nativeGuest(t, "unixsock"); native != "" {
		dir := t.TempDir()
		cmd := exec.Command(native, "self", "s.sock")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if nw := strings.ReplaceAll(want, "/tmp/s.sock", "s.sock"); err != nil || string(out) != nw {
			t.Fatalf("native: %v\n%s\nwant:\n%s", err, out, nw)
		}
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "kbox-sock-*"))
	forEachTier(t, func(t *testing.T, tier string) {
		stdout, stderr, status := runKbox(t, "image", "-S", img, "--read-only", "--syscall-mode="+tier, "--", "/opt/tests/unixsock", "self", "/tmp/s.sock")
		if status != 0 || stdout != want {
			t.Errorf("status %d\nstdout: %s\nwant:\n%s\nstderr: %s", status, stdout, want, lastLines(stderr, 5))
		}
	})
	if after, _ := filepath.Glob(filepath.Join(os.TempDir(), "kbox-sock-*")); len(after) > len(before) {
		t.Errorf("binder directories left: %v (before: %v)", after, before)
	}
	if out, _ := exec.Command("pgrep", "-x", "-f", "kbox-socket-binder").Output(); len(out) > 0 {
		t.Errorf("binder processes left: %s", out)
	}
}

// TestUnixSockets: stream, datagram and seqpacket sockets by path between
// two guest processes, socketpair, and fd passing with SCM_RIGHTS, each
// compared with the same program run natively. The socket's path is a
// socket for stat, another bind of it is EADDRINUSE, unlink removes it,
// and getsockname, getpeername and recvfrom give the guest's path
// (absolute or relative, as bound). Before: socket() failed with
// EAFNOSUPPORT. SO_PEERCRED of an accepted connection names the guest
// process that connected, with its ids, and SO_PEERPIDFD gives a pidfd of
// it (both named kbox, which makes the connect: LTP getsockopt02; a pidfd
// of kbox let the guest signal its supervisor).
func TestUnixSockets(t *testing.T) {
	img := copyImage(t, imagePath(t))
	native := nativeGuest(t, "unixsock")
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string // after the program; $D is /tmp in the guest, a temp dir natively
		want []string
	}{
		{"stream by absolute path", []string{"stream", "$D/s.sock"}, []string{
			"server name $D/s.sock", "stat socket 1 mode 755", "accepted name $D/s.sock peer (unnamed)",
			"accepted peer pid is the client, uid and gid ours", "accepted peer pidfd is the client's",
			"client peer $D/s.sock", "client's peer pid is the server", "server got ping", "client got pong", "second bind -1 Address in use",
			"after unlink stat -1 No such file or directory", "connect after unlink -1 No such file or directory",
			"stream ok"}},
		{"stream by relative path", []string{"stream", "rel.sock"}, []string{
			"server name rel.sock", "accepted name rel.sock peer (unnamed)", "client peer rel.sock",
			"server got ping", "client got pong", "stream ok"}},
		{"datagrams by path", []string{"dgram", "$D/d1.sock", "$D/d2.sock"}, []string{
			"server got hello from $D/d2.sock", "client got back from $D/d1.sock", "sendmsg delivered viamsg",
			"sendto missing -1 No such file or directory", "sendto file -1 Connection refused",
			"connected send delivered conn", "dgram ok"}},
		{"seqpacket", []string{"seqpacket", "$D/q.sock"}, []string{
			"server name $D/q.sock", "accepted peer pid is the client, uid and gid ours",
			"accepted peer pidfd is the client's", "client's peer pid is the server",
			"server got records of 3 and 5 bytes: one three", "client got pong",
			"seqpacket ok"}},
		{"socketpair", []string{"pair"}, []string{"pair stream echo stream", "pair dgram echo dgram", "pair ok"}},
		// kbox makes these calls in the background: it serves other
		// guests meanwhile.
		{"a connect and a send that wait", []string{"block", "$D/b.sock"}, []string{
			"waiting connect ok", "sender sent 8 datagrams", "receiver got 8 datagrams", "block ok"}},
		{"SCM_RIGHTS of an image file", []string{"rights", "$D/file", "$D/r.sock"}, []string{
			"received fd reads: an image file", "passing a closed fd -1 Bad file descriptor",
			"credentials: sender pid is the client, uid 0", "rights ok"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			guestArgs := strings.ReplaceAll(strings.Join(c.args, " "), "$D", "/tmp")
			script := "cd /tmp && echo an image file > /tmp/file && /opt/tests/unixsock " + guestArgs
			stdout, stderr, status := runKbox(t, "image", "-S", img, "--", "/bin/sh", "-c", script)
			if status != 0 {
				t.Errorf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
			}
			var want []string
			for _, w := range c.want {
				want = append(want, strings.ReplaceAll(w, "$D", "/tmp"))
			}
			wantLines(t, "kbox", stdout, stderr, want...)
			if native == "" {
				return
			}
			os.WriteFile(filepath.Join(dir, "file"), []byte("an image file\n"), 0o644)
			var nargs []string
			for _, a := range c.args {
				nargs = append(nargs, strings.ReplaceAll(a, "$D", dir))
			}
			cmd := exec.Command(native, nargs...)
			cmd.Dir = dir
			nout, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("native: %v\n%s", err, nout)
			}
			// The same lines, the paths aside.
			got := lineSet(strings.ReplaceAll(stdout, "/tmp", "$D"))
			exp := lineSet(strings.ReplaceAll(string(nout), dir, "$D"))
			if strings.Join(got, "\n") != strings.Join(exp, "\n") {
				t.Errorf("kbox and Linux differ\nkbox:\n%s\nnative:\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
			}
		})
	}
	assertCleanImage(t, img)
}

// TestUnixNoNamespaces: where the guest gets no network and IPC
// namespaces of its own (KBOX_NAMESPACES=off stands for a host that
// refuses them), path sockets still work, abstract names are refused with
// EPERM and System V IPC with ENOSYS, and the /proc/sysvipc files are
// absent; -v says so in one warning.
func TestUnixNoNamespaces(t *testing.T) {
	img := copyImage(t, imagePath(t))
	so, se, _ := runKboxEnv(t, kboxEnv{vars: []string{"KBOX_NAMESPACES=off"}}, "image", "-v", "-S", img, "--", "/bin/sh", "-c",
		"cd /tmp && /opt/tests/unixsock stream /tmp/s.sock; /opt/tests/unixsock abstract kbox-x; "+
			"/opt/tests/unixsock listen-abstract kbox-y 0; /opt/tests/sysvipc shm; /opt/tests/sysvipc mq; cat /proc/sysvipc/shm")
	wantLines(t, "no namespaces", so, se,
		"server name /tmp/s.sock", "client peer /tmp/s.sock", "stream ok",
		"abstract connect -1 Operation not permitted", "abstract sendto -1 Operation not permitted",
		"abstract bind -1 Operation not permitted", "shmget Function not implemented", "mq_open Function not implemented")
	if !strings.Contains(se, "cat: can't open '/proc/sysvipc/shm': No such file or directory") {
		t.Errorf("/proc/sysvipc/shm without an IPC namespace is not absent\nstderr: %s", se)
	}
	if n := strings.Count(se, "no private network and IPC namespaces"); n != 1 {
		t.Errorf("%d warnings about namespaces, want 1\nstderr: %s", n, se)
	}
}

func randomName(t *testing.T, prefix string) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// TestUnixAbstractPrivate: an abstract socket the host listens on cannot
// be reached from the guest (its network namespace has no such name:
// ECONNREFUSED), and a guest's abstract socket, which guests reach, is
// not reachable from the host. Before: socket() failed in the guest.
func TestUnixAbstractPrivate(t *testing.T) {
	img := imagePath(t)
	host := randomName(t, "kbox-test-")
	l, err := net.Listen("unix", "@"+host)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan bool, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
			accepted <- true
		}
	}()
	stdout, stderr, _ := runKbox(t, "image", "--read-only", "-S", img, "--", "/opt/tests/unixsock", "abstract", host)
	wantLines(t, "host's abstract name", stdout, stderr,
		"abstract connect -1 Connection refused", "abstract sendto -1 Connection refused")
	select {
	case <-accepted:
		t.Errorf("the host's abstract socket was reached from the guest")
	case <-time.After(100 * time.Millisecond):
	}

	guest := randomName(t, "kbox-guest-")
	out, se, _ := converseKbox(t, func(line string, _ io.WriteCloser, _ int) {
		if line == "guest to guest abs" {
			// The guest listens now: the host tries its name.
			if c, err := net.Dial("unix", "@"+guest); err == nil {
				c.Close()
				t.Errorf("the host reached the guest's abstract socket @%s", guest)
			} else {
				t.Logf("host dial of the guest's name: %v", err)
			}
		}
	}, "image", "--read-only", "-S", img, "--", "/opt/tests/unixsock", "listen-abstract", guest, "1500")
	wantLines(t, "guest's abstract name", out, se,
		"abstract bind 0 bound", "abstract name @"+guest, "guest to guest abs", "listen-abstract ok")
}

// TestUnixHostPathsUnreachable: a guest reaches no host socket by a host
// path, by sendto, sendmsg or connect, not even from a socketpair's
// socket, which the kernel would let send to any name. Before, sendto and
// sendmsg on a socketpair ran natively and delivered to the host socket.
func TestUnixHostPathsUnreachable(t *testing.T) {
	img := imagePath(t)
	p := filepath.Join(t.TempDir(), "host.sock") // absent from the image
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stdout, stderr, _ := runKbox(t, "image", "--read-only", "-S", img, "--", "/opt/tests/unixsock", "sendhost", p)
	wantLines(t, "host path", stdout, stderr,
		"sendto host path -1 No such file or directory", "sendmsg host path -1 No such file or directory",
		"connect host path -1 No such file or directory")
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	buf := make([]byte, 64)
	if n, _, err := c.ReadFrom(buf); err == nil {
		t.Errorf("the host socket received %q from the guest", buf[:n])
	}
}

// TestUnixNothingLeft: a path socket a guest binds leaves no name on the
// host, during the run or after it ($TMPDIR is empty after kbox exits),
// and neither getsockname nor readlink shows a host path.
func TestUnixNothingLeft(t *testing.T) {
	img := imagePath(t)
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), kboxTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kboxBin(t), "image", "--read-only", "-S", img, "--", "/bin/sh", "-c",
		"cd /tmp && /opt/tests/unixsock name rel.sock 0 && /opt/tests/unixsock name /tmp/left.sock 1000")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var se strings.Builder
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sockets := func() []string {
		var found []string
		filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type()&fs.ModeSocket != 0 {
				found = append(found, p)
			}
			return nil
		})
		return found
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == "getsockname /tmp/left.sock" {
			if s := sockets(); len(s) > 0 {
				t.Errorf("host socket names while the guest's socket is bound: %v", s)
			}
		}
	}
	cmd.Wait()
	text := strings.Join(lines, "\n")
	wantLines(t, "names", text, se.String(), "getsockname rel.sock", "getsockname /tmp/left.sock")
	if strings.Contains(text, tmp) || strings.Contains(text, "kbox-") {
		t.Errorf("a host path is shown to the guest:\n%s", text)
	}
	left, _ := os.ReadDir(tmp)
	for _, e := range left {
		t.Errorf("left in $TMPDIR after kbox exited: %s", e.Name())
	}
}

// TestUnixInBind: in a bind (-b) a socket is the host's: a guest connects
// to a host server's socket there, and a socket the guest binds there is
// a socket file in the host directory.
func TestUnixInBind(t *testing.T) {
	img := imagePath(t)
	hostDir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(hostDir, "h.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("from the host"))
		b := make([]byte, 64)
		n, _ := c.Read(b)
		got <- string(b[:n])
	}()
	stdout, stderr, status := runKbox(t, "image", "--read-only", "-b", hostDir+":/mnt", "-S", img, "--", "/bin/sh", "-c",
		"/opt/tests/unixsock client /mnt/h.sock && /opt/tests/unixsock name /mnt/g.sock 0")
	if status != 0 {
		t.Errorf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	wantLines(t, "bind", stdout, stderr, "client connect 0 connected", "client got from the host", "getsockname g.sock")
	select {
	case s := <-got:
		if s != "from the guest" {
			t.Errorf("host server got %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the host server got nothing")
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(hostDir, "g.sock"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		t.Errorf("the guest's socket in the bind is not a host socket file: %v, mode %o", err, st.Mode)
	}
}

// TestSysVIPC: System V shared memory with a semaphore, and a message
// queue, between two guest processes, as natively; a segment the host
// made is neither visible (IPC_STAT) nor attachable by its id, and the
// guest's /proc/sysvipc/shm lists its own segments only. Before, shmget
// and the others gave ENOSYS.
func TestSysVIPC(t *testing.T) {
	img := imagePath(t)
	native := nativeGuest(t, "sysvipc")
	key := int(time.Now().UnixNano()&0x3fffffff) | 1
	id, err := unix.SysvShmGet(key, 4096, unix.IPC_CREAT|0o600)
	if err != nil {
		t.Fatalf("host shmget: %v", err)
	}
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	ids := strconv.Itoa(id)
	stdout, stderr, status := runKbox(t, "image", "--read-only", "-S", img, "--", "/bin/sh", "-c",
		"/opt/tests/sysvipc probe "+ids+"; cat /proc/sysvipc/shm; /opt/tests/sysvipc shm && /opt/tests/sysvipc msg && /opt/tests/sysvipc mq")
	if status != 0 {
		t.Errorf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	wantLines(t, "sysvipc", stdout, stderr,
		"IPC_STAT of "+ids+": -1 Invalid argument", "shmat of "+ids+": Invalid argument",
		"parent reads: written by the child", "segment size 4096", "shm ok",
		"parent received: queued by the child", "msg ok", "parent received: posted by the child", "mq ok")
	if !strings.Contains(stdout, "shmid perms") {
		t.Errorf("the guest's /proc/sysvipc/shm was not read\nstdout: %s\nstderr: %s", stdout, stderr)
	}
	if strings.Contains(stdout, " "+strconv.Itoa(key)+" ") {
		t.Errorf("the guest's /proc/sysvipc/shm lists the host's segment (key %d)\n%s", key, stdout)
	}
	if native != "" {
		for _, arg := range []string{"shm", "msg", "mq"} {
			nout, err := exec.Command(native, arg).CombinedOutput()
			if err != nil {
				t.Fatalf("native %s: %v\n%s", arg, err, nout)
			}
			if !strings.Contains(stdout, string(nout)) {
				t.Errorf("kbox and Linux differ\nkbox:\n%s\nnative:\n%s", stdout, nout)
			}
		}
	}
}

// TestUnixNonRoot: a kbox run by an unprivileged user gives the guest its
// namespaces inside a user namespace of its own (its uid and gid mapped to
// themselves): path and abstract sockets, SCM_RIGHTS and System V IPC work
// as for root. The receiver of SCM_CREDENTIALS sees kbox's pid here
// (docs/security.md).
func TestUnixNonRoot(t *testing.T) {
	setpriv, dir, img, bin := asNobody(t)
	ctx, cancel := context.WithTimeout(context.Background(), kboxTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		bin, "image", "-v", "-S", img, "--", "/bin/sh", "-c",
		"cd /tmp && /opt/tests/unixsock stream /tmp/s.sock; /opt/tests/unixsock rights /etc/hostname /tmp/r.sock; "+
			"/opt/tests/unixsock listen-abstract kbox-nobody 0; /opt/tests/sysvipc shm")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Errorf("kbox as nobody: %v\nstdout: %s\nstderr: %s", err, so.String(), se.String())
	}
	if !strings.Contains(se.String(), "guest namespaces: network, IPC, user") {
		t.Errorf("no user namespace reported\nstderr: %s", se.String())
	}
	wantLines(t, "nobody", so.String(), se.String(), "server name /tmp/s.sock", "stream ok",
		"credentials: sender pid is not the client, uid 65534", "rights ok",
		"guest to guest abs", "listen-abstract ok", "parent reads: written by the child", "shm ok")
}

// TestUnixPython: Python's socket module, a unix echo server and client by
// path in two processes (image with python3; skipped loudly without a
// Debian mirror).
func TestUnixPython(t *testing.T) {
	img := copyImage(t, packageImage(t, "python3"))
	const prog = `
import os, socket
p = "/tmp/py.sock"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(p)
s.listen(1)
if os.fork() == 0:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(p)
    c.sendall(b"ping")
    print("client got", c.recv(16).decode(), "peer", c.getpeername(), flush=True)
    os._exit(0)
a, _ = s.accept()
a.sendall(a.recv(16).replace(b"i", b"o"))
os.wait()
x, y = socket.socketpair()
x.sendall(b"pair")
print("socketpair", y.recv(4).decode(), "sockname", s.getsockname(), "is socket", os.path.exists(p) and __import__("stat").S_ISSOCK(os.stat(p).st_mode))
`
	stdout, stderr, status := runKbox(t, "image", "-S", img, "--", "/usr/bin/python3", "-c", prog)
	if status != 0 {
		t.Errorf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	wantLines(t, "python", stdout, stderr, "client got pong peer /tmp/py.sock",
		"socketpair pair sockname /tmp/py.sock is socket True")
}
