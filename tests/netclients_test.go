//go:build lkl

package tests

import (
	"crypto/md5"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// netClientPy is what a Python user does with the network, with Debian's
// python3 (glibc's resolver and sockets, Python's own timeouts by
// poll): an HTTP GET with urllib, a UDP echo with its source, a
// connected UDP socket to a closed port (recvfrom raises
// ConnectionRefusedError, as on Linux), a TCP socket's empty error queue
// (EAGAIN; the unix pair's recvmsg would have taken the stream's data
// for it), a TCP connect to a closed port,
// and an asyncio server on the guest's own loopback with 20 clients at
// once. Arguments: the host's address, the HTTP port, the echo port
// (UDP), a closed port.
const netClientPy = `
import asyncio, socket, sys, urllib.request
host, hport, eport, closed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
print("http", urllib.request.urlopen("http://%s:%d/" % (host, hport), timeout=10).read().decode())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(10)
u.sendto(b"ping", (host, eport))
d, a = u.recvfrom(100)
print("udp", d.decode(), a == (host, eport))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.settimeout(10)
c.connect((host, closed))
c.send(b"x")
try:
    c.recvfrom(100)
    print("udp closed: no error")
except ConnectionRefusedError:
    print("udp closed: ConnectionRefusedError")
c.send(b"y")
try:
    c.recvfrom(100)
    print("udp closed again: no error")
except ConnectionRefusedError:
    print("udp closed again: ConnectionRefusedError")
t = socket.create_connection((host, eport))
t.sendall(b"abc")
try:
    t.recvmsg(10, 0, socket.MSG_ERRQUEUE)
    print("tcp error queue: data")
except BlockingIOError:
    print("tcp error queue: EAGAIN")
print("tcp echo", t.recv(10).decode())
try:
    socket.create_connection((host, closed), timeout=10)
    print("tcp closed: connected")
except ConnectionRefusedError:
    print("tcp closed: ConnectionRefusedError")

async def client(port, i):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"line %d\n" % i)
    await w.drain()
    got = await r.readline()
    w.close()
    return got == b"LINE %d\n" % i

async def main():
    async def handle(r, w):
        w.write((await r.readline()).upper())
        await w.drain()
        w.close()
    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    ok = await asyncio.gather(*[client(port, i) for i in range(20)])
    print("asyncio", len(ok), all(ok))
    srv.close()

asyncio.run(main())
`

// TestNetPython runs netClientPy under kbox --net (the host's 127.0.0.1
// as 10.0.2.2) and natively with the host's python3 when it has one: the
// same lines.
func TestNetPython(t *testing.T) {
	img := packageImage(t, "python3")
	hport, _ := httpServer(t, "hello from the host")
	eport := echoServer(t)
	ports := []string{strconv.Itoa(hport), strconv.Itoa(eport), closedUDPPort(t)}
	stdout, stderr, status := runKbox(t, append([]string{"image", "-S", img, "--read-only", "--net", "--net-allow", "127.0.0.1", "--",
		"/usr/bin/python3", "-c", netClientPy, "10.0.2.2"}, ports...)...)
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	want := "http hello from the host\nudp ping True\nudp closed: ConnectionRefusedError\nudp closed again: ConnectionRefusedError\n" +
		"tcp error queue: EAGAIN\ntcp echo abc\ntcp closed: ConnectionRefusedError\nasyncio 20 True\n"
	if stdout != want {
		t.Errorf("kbox:\n%s\nwant:\n%s\nstderr: %s", stdout, want, stderr)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Logf("no host python3: no native comparison")
		return
	}
	out, err := exec.Command(py, append([]string{"-c", netClientPy, "127.0.0.1"}, ports...)...).Output()
	if err != nil {
		t.Fatalf("native: %v\n%s", err, out)
	}
	if string(out) != want {
		t.Errorf("native:\n%s\nwant:\n%s", out, want)
	}
}

// TestNetCurl is the issue's own command with Debian's curl: a page from
// a server on the host's 127.0.0.1 reached as 10.0.2.2 when allowed, and
// curl's "couldn't connect" (exit 7) without the allow; then 64 MiB
// through a pipe to md5sum, checked against the server's bytes.
func TestNetCurl(t *testing.T) {
	img := packageImage(t, "curl")
	body := "kbox curl " + strconv.Itoa(os.Getpid())
	port, hits := httpServer(t, body)
	p := strconv.Itoa(port)
	const size = 64 << 20
	sum := md5.Sum(pattern(size))
	runCases(t, nil, []guestCase{
		{name: "allowed", args: []string{"image", "-S", img, "--read-only", "--net", "--net-allow", "127.0.0.1:" + p, "--",
			"/bin/sh", "-c", "curl -s http://10.0.2.2:" + p + "/ | head; echo; curl -s http://10.0.2.2:" + p + "/" + strconv.Itoa(size) + " | md5sum"},
			want: []string{body, hex.EncodeToString(sum[:])}},
		{name: "refused", args: []string{"image", "-S", img, "--read-only", "--net", "--",
			"/bin/sh", "-c", "curl -sS http://10.0.2.2:" + p + "/; echo status=$?"},
			want: []string{"status=7"}, not: []string{body}},
	})
	if hits.Load() != 2 {
		t.Errorf("server saw %d requests, want 2 (the refused one never reaches it)", hits.Load())
	}
}

// TestNetGitClone: Debian's git clones a repository over HTTP from a
// server on the host's 127.0.0.1 (git's dumb HTTP protocol: the bare
// repository's files served as they are), through git's remote helper
// and libcurl in a child process; the guest's checkout has the file and
// both commits the host made.
func TestNetGitClone(t *testing.T) {
	img := copyImage(t, packageImage(t, "gcc", "libc6-dev", "make", "git", "ca-certificates"))
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP (needs git on the host to make the repository)")
	}
	dir := t.TempDir()
	work, bare := filepath.Join(dir, "work"), filepath.Join(dir, "srv", "r.git")
	content := "cloned through kbox " + strconv.Itoa(os.Getpid())
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", work)
	os.WriteFile(filepath.Join(work, "README"), []byte("first\n"), 0o644)
	git("-C", work, "add", "README")
	git("-C", work, "commit", "-qm", "one")
	os.WriteFile(filepath.Join(work, "README"), []byte(content+"\n"), 0o644)
	git("-C", work, "commit", "-qam", "two")
	git("clone", "-q", "--bare", work, bare)
	git("-C", bare, "update-server-info")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(filepath.Join(dir, "srv")))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	p := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	runCases(t, nil, []guestCase{
		{name: "clone", args: []string{"image", "-S", img, "--net", "--net-allow", "127.0.0.1:" + p, "--", "/bin/sh", "-c",
			"git clone -q http://10.0.2.2:" + p + "/r.git /tmp/r && cat /tmp/r/README && git -C /tmp/r log --format=%s; echo status=$?"},
			want: []string{content, "two\none\n", "status=0"}},
	})
}

// TestNetPing runs iputils' ping (Debian's iputils-ping) as root and as
// nobody: its ICMP datagram sockets are LKL's (net.ipv4.ping_group_range
// lets every group open one). The gateway 10.0.2.2 and its IPv6 twin
// answer (the user-mode stack's own addresses), as do the guest's
// loopback and its own address; a public address gets no answer (no ICMP
// leaves through the user-mode stack, so nothing leaves the machine).
// Raw sockets (root's) are TestNetRawICMP's. Before, ping's socket was
// EACCES (LKL's default range names no group).
func TestNetPing(t *testing.T) {
	img := packageImage(t, "iputils-ping")
	ping := func(to string) string {
		return "/usr/bin/ping -c 1 -W 2 " + to + " >/dev/null; echo " + to + " status=$?; "
	}
	runCases(t, nil, []guestCase{
		{name: "ping", args: []string{"image", "-S", img, "--read-only", "--net", "--", "/bin/sh", "-c",
			ping("10.0.2.2") + ping("127.0.0.1") + ping("10.0.2.15") + ping("::1") + ping("fd00:6b62:6f78::2") + ping("203.0.113.1") +
				"su nobody -s /bin/sh -c '/usr/bin/ping -c 2 -W 2 10.0.2.2 | grep -c \"bytes from 10.0.2.2\"'"},
			want: []string{"10.0.2.2 status=0", "127.0.0.1 status=0", "10.0.2.15 status=0", "::1 status=0", "fd00:6b62:6f78::2 status=0",
				"203.0.113.1 status=1", "2\n"}},
	})
}
