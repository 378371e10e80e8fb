//go:build lkl

package tests

import (
	"crypto/md5"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// netClientPy is what a Python user does with the network, with Debian's
// python3 (glibc's resolver and sockets, Python's own timeouts by
// poll): an HTTP GET with urllib, a UDP echo with its source, a
// connected UDP socket to a closed port (recvfrom raises
// ConnectionRefusedError, as on Linux), a TCP connect to a closed port,
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
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := strconv.Itoa(c.LocalAddr().(*net.UDPAddr).Port)
	c.Close()
	ports := []string{strconv.Itoa(hport), strconv.Itoa(eport), closed}
	stdout, stderr, status := runKbox(t, append([]string{"image", "-S", img, "--read-only", "--net", "--net-allow", "127.0.0.1", "--",
		"/usr/bin/python3", "-c", netClientPy, "10.0.2.2"}, ports...)...)
	if status != 0 {
		t.Fatalf("status %d\nstdout: %s\nstderr: %s", status, stdout, stderr)
	}
	want := "http hello from the host\nudp ping True\nudp closed: ConnectionRefusedError\nudp closed again: ConnectionRefusedError\n" +
		"tcp closed: ConnectionRefusedError\nasyncio 20 True\n"
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
