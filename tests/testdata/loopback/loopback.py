# The guest's own loopback network, as a Python program uses it
# (tests/net_test.go, TestNetLoopback). The lines up to "isolation" are
# the same natively; the rest say what the guest can reach.
import asyncio, hashlib, http.server, socket, sys, threading, urllib.request


def echo_server(fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.bind((addr, 0))
    s.listen(512)

    def serve(c):
        while True:
            d = c.recv(262144)
            if not d:
                break
            c.sendall(d)
        c.close()

    def loop():
        while True:
            c, _ = s.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return s.getsockname()[1]


def echoes(fam, addr, n, size):
    """n clients at once, each sending its own size bytes and half-closing;
    each checks the whole echo."""
    port = echo_server(fam, addr)
    bad, lock = [], threading.Lock()

    def client(i):
        try:
            c = socket.create_connection((addr, port))
            data = (hashlib.sha256(str(i).encode()).digest() * (size // 32 + 1))[:size]

            def w():
                c.sendall(data)
                c.shutdown(socket.SHUT_WR)

            t = threading.Thread(target=w)
            t.start()
            got = bytearray()
            while True:
                d = c.recv(262144)
                if not d:
                    break
                got += d
            t.join()
            c.close()
            if got != data:
                with lock:
                    bad.append("client %d got %d of %d bytes" % (i, len(got), size))
        except OSError as e:
            with lock:
                bad.append("client %d: %r" % (i, e))

    ts = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    print("tcp %s: %d clients of %d bytes, %d bad %s" % (addr, n, size, len(bad), bad[:3]))


echoes(socket.AF_INET, "127.0.0.1", 50, 200000)
echoes(socket.AF_INET6, "::1", 50, 200000)
echoes(socket.AF_INET, "127.0.0.1", int(sys.argv[1]), 1000000)

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 0))
v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
v.bind(("127.0.0.1", 0))
v.sendto(b"ping", u.getsockname())
d, a = u.recvfrom(100)
print("udp recvfrom", d.decode(), a == v.getsockname())
u.sendto(b"pong", a)
d, _, _, a = v.recvmsg(100)
print("udp recvmsg", d.decode(), a == u.getsockname())


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = b"hello from the guest's own server\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
threading.Thread(target=srv.serve_forever, daemon=True).start()
print("http", urllib.request.urlopen("http://127.0.0.1:%d/" % srv.server_address[1]).read().decode().strip())
srv.shutdown()


async def lines():
    async def upper(r, w):
        w.write((await r.readline()).upper())
        await w.drain()
        w.close()

    s = await asyncio.start_server(upper, "127.0.0.1", 0)
    r, w = await asyncio.open_connection("127.0.0.1", s.sockets[0].getsockname()[1])
    w.write(b"asyncio line\n")
    await w.drain()
    print("asyncio", (await r.readline()).decode().strip())
    w.close()
    s.close()


asyncio.run(lines())

print("isolation")
print("interfaces", " ".join(n for _, n in socket.if_nameindex()))
for dest in sys.argv[2:]:
    host, port = dest.rsplit(":", 1)
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        print("connect", dest, "connected")
    except OSError as e:
        print("connect", dest, "errno", e.errno)
