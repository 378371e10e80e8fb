/* inet_edges.h: inet's modes at a stream's edges (acceptsig, errqueue,
 * atmark, connerr, connectsig, reset, urgent, unconnected, sndbuf,
 * unreadclose, writeafterfin, resetblocked, closedlistener, readall,
 * rreset), included by inet.c where they stand in its order, after the
 * helpers they use. */

static void on_alarm(int sig) { (void)sig; }

/* alarm_in sends SIGALRM in ms milliseconds, with a handler that does not
 * restart calls. */
static void alarm_in(int ms)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { .it_value = { ms / 1000, (ms % 1000) * 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static int listener(int backlog, struct sockaddr_in *at)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		die("socket");
	if (bind(l, (struct sockaddr *)&dest, sizeof(dest)) < 0)
		die("bind");
	if (listen(l, backlog) < 0)
		die("listen");
	socklen_t al = sizeof(*at);
	getsockname(l, (struct sockaddr *)at, &al);
	return l;
}

/* loop_pair connects a client to a listener of its own on dest and
 * accepts it: the client's fd; the server's in *server. */
static int listener_fd; /* loop_pair's listener */

static int loop_pair(int *server)
{
	static struct sockaddr_in at;
	int l = listener_fd = listener(8, &at);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&at, sizeof(at)) < 0)
		die("connect");
	if ((*server = accept(l, NULL, NULL)) < 0)
		die("accept");
	return c;
}

static int do_acceptsig(void)
{
	static struct sockaddr_in at;
	int l = listener(8, &at);
	alarm_in(300);
	int r = accept(l, NULL, NULL);
	printf("accept: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	pthread_t c;
	pthread_create(&c, NULL, server_client, &at);
	struct sockaddr_in peer;
	socklen_t pl = sizeof(peer);
	int s = accept(l, (struct sockaddr *)&peer, &pl);
	if (s < 0)
		die("accept after the signal");
	printf("accept after: ok from %s\n", inet_ntoa(peer.sin_addr));
	char buf[32] = { 0 };
	int n = read(s, buf, sizeof(buf) - 1);
	printf("server got %d '%s'\n", n, buf);
	write(s, "from server", 11);
	pthread_join(c, NULL);
	return 0;
}

static void connerr_one(int nonblock, const char *what, const struct sockaddr *a, socklen_t al)
{
	int s = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	int r = connect(s, a, al);
	printf("%s %s: %d %s\n", nonblock ? "non-blocking" : "blocking", what, r, r < 0 ? strerror(errno) : "ok");
	close(s);
}

/* errq_one prints what one read of c's error queue gives. */
static void errq_one(int c, const char *what, int how)
{
	char buf[16];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;
	switch (how) {
	case 0:
		r = recv(c, buf, sizeof(buf), MSG_ERRQUEUE);
		break;
	case 1:
		r = recvfrom(c, buf, sizeof(buf), MSG_ERRQUEUE, NULL, NULL);
		break;
	case 2:
		r = recvfrom(c, buf, sizeof(buf), MSG_ERRQUEUE, (struct sockaddr *)&from, &fl);
		break;
	default:
		r = recvmsg(c, &m, MSG_ERRQUEUE);
	}
	printf("%s: %zd %s\n", what, r, r < 0 ? strerror(errno) : "ok");
}

static int do_errqueue(void)
{
	int server;
	int c = loop_pair(&server);
	const char *how[] = { "recv", "recvfrom", "recvfrom with a source", "recvmsg" };
	for (int i = 0; i < 4; i++)
		errq_one(c, how[i], i);
	write(server, "x", 1);
	usleep(100000);
	for (int i = 0; i < 4; i++) {
		char what[64];
		snprintf(what, sizeof(what), "%s with data waiting", how[i]);
		errq_one(c, what, i);
	}
	char buf[8] = { 0 };
	int n = recv(c, buf, sizeof(buf) - 1, 0);
	printf("then recv: %d '%s'\n", n, buf);
	return 0;
}

static int do_atmark(void)
{
	int at = -1, u = socket(AF_INET, SOCK_DGRAM, 0);
	int r = ioctl(u, SIOCATMARK, &at);
	printf("SIOCATMARK on UDP: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	int server, c = loop_pair(&server);
	r = ioctl(c, SIOCATMARK, &at);
	printf("SIOCATMARK on TCP: %d %s, at the mark %d\n", r, r < 0 ? strerror(errno) : "ok", at);
	return 0;
}

static int do_connerr(void)
{
	static struct sockaddr_in at;
	int l = listener(1, &at);
	struct sockaddr_in bc = { .sin_family = AF_INET, .sin_port = htons(80) };
	bc.sin_addr.s_addr = htonl(INADDR_BROADCAST);
	struct sockaddr_in6 six = { .sin6_family = AF_INET6, .sin6_port = htons(80) };
	for (int nb = 1; nb >= 0; nb--) {
		connerr_one(nb, "broadcast", (struct sockaddr *)&bc, sizeof(bc));
		connerr_one(nb, "short address", (struct sockaddr *)&at, 4);
		connerr_one(nb, "IPv6 address", (struct sockaddr *)&six, sizeof(six));
	}
	/* A failed connect leaves the socket usable: the next one works. */
	int s = socket(AF_INET, SOCK_STREAM, 0);
	int r = connect(s, (struct sockaddr *)&bc, sizeof(bc));
	printf("first: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	r = connect(s, (struct sockaddr *)&at, sizeof(at));
	printf("then: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	int a = accept(l, NULL, NULL);
	write(s, "x", 1);
	char c = 0;
	ssize_t n = read(a, &c, 1);
	printf("accepted: %s, read %zd '%c'\n", a >= 0 ? "ok" : strerror(errno), n, c);
	/* A blocking connect refused leaves the socket unconnected: the next
	 * connect is a new one, which checks its address (LTP's connect01). */
	static struct sockaddr_in gone;
	close(listener(1, &gone));
	int u = socket(AF_INET, SOCK_STREAM, 0);
	r = connect(u, (struct sockaddr *)&gone, sizeof(gone));
	printf("refused: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	struct sockaddr_in bogus = gone;
	bogus.sin_family = 47;
	r = connect(u, (struct sockaddr *)&bogus, sizeof(bogus));
	printf("then a bad family: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	/* accept on a datagram socket (LTP's accept01). */
	int d = socket(AF_INET, SOCK_DGRAM, 0);
	r = accept(d, NULL, NULL);
	printf("accept on UDP: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	/* SO_SNDTIMEO limits a blocking connect to a full queue: EINPROGRESS. */
	static struct sockaddr_in at2;
	listener(1, &at2);
	for (int queued = 0;; queued++) {
		int q = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(q, (struct sockaddr *)&at2, sizeof(at2));
		struct pollfd pf = { q, POLLOUT, 0 };
		if (poll(&pf, 1, 500) != 1)
			break;
		if (queued > 8)
			die("the queue never fills");
	}
	int t = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval tv = { 0, 200000 };
	setsockopt(t, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	r = connect(t, (struct sockaddr *)&at2, sizeof(at2));
	printf("connect with SO_SNDTIMEO: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	return 0;
}

static int do_connectsig(void)
{
	static struct sockaddr_in at;
	/* Fill the listener's queue (backlog 1: how many fit differs
	 * between kernels): then a SYN is dropped and retried, so the next
	 * blocking connect waits. */
	int l = listener(1, &at), queued = 0;
	for (;;) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(c, (struct sockaddr *)&at, sizeof(at));
		struct pollfd pf = { c, POLLOUT, 0 };
		if (poll(&pf, 1, 500) != 1) {
			close(c);
			break;
		}
		if (++queued > 8)
			die("the queue never fills");
	}
	int c2 = socket(AF_INET, SOCK_STREAM, 0);
	alarm_in(300);
	int r = connect(c2, (struct sockaddr *)&at, sizeof(at));
	printf("connect: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	int fl = fcntl(c2, F_GETFL);
	fcntl(c2, F_SETFL, fl | O_NONBLOCK);
	r = connect(c2, (struct sockaddr *)&at, sizeof(at));
	printf("non-blocking connect again: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	fcntl(c2, F_SETFL, fl);
	struct pollfd pf = { c2, POLLOUT, 0 };
	printf("poll while connecting: %d\n", poll(&pf, 1, 0));
	int a1 = accept(l, NULL, NULL);
	printf("first accepted: %s\n", a1 >= 0 ? "ok" : strerror(errno));
	/* A blocking connect on a connecting socket waits for it. */
	r = connect(c2, (struct sockaddr *)&at, sizeof(at));
	printf("blocking connect again: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	pf.revents = 0;
	int n = poll(&pf, 1, 0);
	printf("poll once connected: %d %s\n", n, ev(pf.revents));
	int err = -1;
	socklen_t el = sizeof(err);
	getsockopt(c2, SOL_SOCKET, SO_ERROR, &err, &el);
	printf("SO_ERROR: %s\n", err ? strerror(err) : "0");
	r = connect(c2, (struct sockaddr *)&at, sizeof(at));
	printf("connect once done: %d %s\n", r, r < 0 ? strerror(errno) : "ok");
	/* The server side of c2: after the other queued ones. */
	struct sockaddr_in me, peer;
	socklen_t ml = sizeof(me);
	getsockname(c2, (struct sockaddr *)&me, &ml);
	int a2;
	for (;;) {
		socklen_t pl = sizeof(peer);
		a2 = accept(l, (struct sockaddr *)&peer, &pl);
		if (a2 < 0)
			die("second accept");
		if (peer.sin_port == me.sin_port)
			break;
		close(a2);
	}
	write(c2, "late", 4);
	char buf[16] = { 0 };
	n = read(a2, buf, sizeof(buf) - 1);
	printf("server got %d '%s'\n", n, buf);
	return 0;
}

static int do_reset(void)
{
	int s, c = loop_pair(&s);
	write(s, "last", 4);
	usleep(100000);
	struct linger lg = { 1, 0 };
	setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(s);
	struct pollfd pf = { c, POLLIN, 0 };
	int n = poll(&pf, 1, 5000);
	usleep(200000);
	printf("poll: %d%s\n", n, n == 1 && (pf.revents & POLLIN) ? " IN" : "");
	char buf[16] = { 0 };
	int m = read(c, buf, sizeof(buf) - 1);
	printf("read: %d '%s'\n", m, m > 0 ? buf : "");
	m = read(c, buf, sizeof(buf));
	printf("read after reset: %d %s\n", m, m < 0 ? strerror(errno) : "");
	m = read(c, buf, sizeof(buf));
	printf("read again: %d %s\n", m, m < 0 ? strerror(errno) : "");
	int err = -1;
	socklen_t el = sizeof(err);
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
	printf("SO_ERROR: %s\n", err ? strerror(err) : "0");
	return 0;
}

/* TCP urgent data on the loopback: the client's send with MSG_OOB
 * (its last byte urgent), then more; the server's poll says POLLPRI, its
 * read stops at the mark, SIOCATMARK says so, recv(MSG_OOB) takes the
 * byte, the read after it the rest. With SO_OOBINLINE the urgent byte is
 * read in line. Then the same from the server to the client. */
static void urgent_round(int from, int to, const char *who)
{
	char buf[16] = { 0 }, o = 0;
	/* Apart: urgent data that comes while kbox's pump is reading may
	 * reach the guest in line (docs/networking.md, "Urgent data"). */
	if (send(from, "ab", 2, 0) != 2 || usleep(100000) || send(from, "cd", 2, MSG_OOB) != 2 || usleep(100000) ||
	    send(from, "ef", 2, 0) != 2)
		die("send");
	usleep(200000);
	struct pollfd pf = { to, POLLIN | POLLPRI, 0 };
	int n = poll(&pf, 1, 5000), mark = -1;
	printf("%s poll: %d%s%s\n", who, n, pf.revents & POLLIN ? " IN" : "", pf.revents & POLLPRI ? " PRI" : "");
	int m = recv(to, buf, sizeof(buf) - 1, 0);
	ioctl(to, SIOCATMARK, &mark);
	printf("%s read: %d '%s', at mark %d\n", who, m, m > 0 ? buf : "", mark);
	m = recv(to, &o, 1, MSG_OOB);
	printf("%s urgent: %d '%c'\n", who, m, m == 1 ? o : '?');
	memset(buf, 0, sizeof(buf));
	m = recv(to, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	printf("%s read after: %d '%s'\n", who, m, m > 0 ? buf : "");
	m = recv(to, &o, 1, MSG_OOB | MSG_DONTWAIT);
	printf("%s urgent again: %d %s\n", who, m, m < 0 ? strerror(errno) : "");
}

static int do_urgent(void)
{
	int s, c = loop_pair(&s), one = 1;
	urgent_round(c, s, "server");
	urgent_round(s, c, "client");
	setsockopt(s, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
	if (send(c, "gh", 2, MSG_OOB) != 2 || send(c, "ij", 2, 0) != 2)
		die("send");
	char buf[16] = { 0 };
	int got = 0;
	while (got < 4) {
		struct pollfd pf = { s, POLLIN, 0 };
		int m = poll(&pf, 1, 5000) == 1 ? recv(s, buf + got, sizeof(buf) - 1 - got, 0) : -1;
		if (m <= 0)
			break;
		got += m;
	}
	printf("inline: %d '%s'\n", got, buf);
	return 0;
}

/* Reads of a TCP socket before it connects fail at once (Linux:
 * ENOTCONN), blocking or not; nothing waits. Then, with O_NONBLOCK set
 * before connect, a non-blocking connect to a listener of its own, poll
 * for POLLOUT, and an echo both ways. */
static int do_unconnected(void)
{
	static struct sockaddr_in at;
	int l = listener(8, &at);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	char b = 0;
	alarm(5); /* a read that waits is the fault */
	int m = recv(c, &b, 1, 0);
	printf("blocking read before connect: %s\n", m == 0 || (m < 0 && errno == ENOTCONN) ? "at once, nothing" : strerror(errno));
	fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
	m = recv(c, &b, 1, 0);
	printf("non-blocking read before connect: %s\n", m == 0 || (m < 0 && errno == ENOTCONN) ? "at once, nothing" : strerror(errno));
	alarm(0);
	m = connect(c, (struct sockaddr *)&at, sizeof(at));
	printf("connect: %s\n", m < 0 ? strerror(errno) : "0");
	struct pollfd pf = { c, POLLOUT, 0 };
	int n = poll(&pf, 1, 5000);
	printf("poll: %d%s\n", n, pf.revents & POLLOUT ? " OUT" : "");
	int s = accept(l, NULL, NULL);
	if (s < 0 || write(c, "ping", 4) != 4 || read(s, &b, 1) != 1 || write(s, "pong", 4) != 4)
		die("echo");
	char buf[8] = { 0 };
	pf.events = POLLIN;
	poll(&pf, 1, 5000);
	m = read(c, buf, sizeof(buf) - 1);
	printf("still non-blocking: %d, read %d '%s'\n", (fcntl(c, F_GETFL) & O_NONBLOCK) != 0, m, m > 0 ? buf : "");
	/* A receive timeout set before connect holds after it. */
	int t = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval tv = { 0, 200000 };
	setsockopt(t, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(t, (struct sockaddr *)&at, sizeof(at)) < 0 || accept(l, NULL, NULL) < 0)
		die("connect t");
	alarm(5);
	m = read(t, buf, sizeof(buf));
	printf("read with SO_RCVTIMEO set before connect: %d %s\n", m, m < 0 ? strerror(errno) : "");
	return 0;
}

/* Writes to non-blocking socket c until 20 tries in a row over 200 ms
 * would block (the peer reads nothing); what they queued. */
static long fill(int c)
{
	static char chunk[4096];
	long queued = 0;
	for (int idle = 0; idle < 20;) {
		int m = write(c, chunk, sizeof(chunk));
		if (m > 0) {
			queued += m;
			idle = 0;
		} else if (errno == EAGAIN) {
			idle++;
			usleep(10000);
		} else
			die("write");
	}
	return queued;
}

/* A small SO_SNDBUF bounds what a client queues while its peer reads
 * nothing; the peer's close (with unread data: a reset) then fails the
 * client's writes. */
static int do_sndbuf(void)
{
	static struct sockaddr_in at;
	int l = socket(AF_INET, SOCK_STREAM, 0), small = 4096;
	signal(SIGPIPE, SIG_IGN);
	setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	socklen_t al = sizeof(at);
	at.sin_family = AF_INET;
	at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (struct sockaddr *)&at, sizeof(at)) < 0 || listen(l, 4) < 0 || getsockname(l, (struct sockaddr *)&at, &al) < 0)
		die("listen");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)&at, sizeof(at)) < 0)
		die("connect");
	int s = accept(l, NULL, NULL);
	if (s < 0)
		die("accept");
	setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	fcntl(c, F_SETFL, O_NONBLOCK);
	static char chunk[4096];
	long queued = fill(c);
	printf("queued while the peer reads nothing: %s\n", queued < 256 * 1024 ? "under 256 KiB" : "256 KiB or more");
	close(s);
	int err = 0;
	for (int i = 0; i < 200 && !err; i++) {
		if (write(c, chunk, sizeof(chunk)) < 0 && errno != EAGAIN)
			err = errno;
		usleep(10000);
	}
	printf("write after the peer's close: %s\n", err == EPIPE || err == ECONNRESET ? "fails" : "goes on");
	return 0;
}

/* Writes after the peer's close, every 10 ms for at most 2 s: the first
 * error they get, or "goes on". */
static const char *writes_after_close(int c)
{
	static char chunk[1024];
	for (int i = 0; i < 200; i++) {
		if (write(c, chunk, sizeof(chunk)) < 0 && errno != EAGAIN)
			return errno == EPIPE || errno == ECONNRESET ? "fail" : strerror(errno);
		usleep(10000);
	}
	return "go on";
}

/* The peer closes with data unread: Linux resets the connection at the
 * close, so the client's writes fail at once. */
static int do_unreadclose(void)
{
	int s, c = loop_pair(&s);
	signal(SIGPIPE, SIG_IGN);
	fcntl(c, F_SETFL, O_NONBLOCK);
	if (write(c, "unread", 6) != 6)
		die("write");
	usleep(100000);
	close(s);
	usleep(100000);
	char b[8];
	int m = read(c, b, sizeof(b));
	printf("read after the peer's close with data unread: %d %s\n", m, m < 0 ? strerror(errno) : "");
	printf("writes after it: %s\n", writes_after_close(c));
	return 0;
}

/* The peer reads everything and closes (a FIN); the client reads EOF,
 * then writes: the first write draws the peer's reset, and the writes
 * after it fail. The peer is on the loopback (PORT 0), or a host server
 * at ADDR PORT that reads 4 bytes and closes. */
static int do_writeafterfin(void)
{
	int s = -1, c = ntohs(dest.sin_port) ? tcp_connect() : loop_pair(&s);
	char b[8];
	signal(SIGPIPE, SIG_IGN);
	fcntl(c, F_SETFL, O_NONBLOCK);
	if (write(c, "read", 4) != 4)
		die("write");
	if (s >= 0) {
		for (int got = 0, k; got < 4; got += k)
			if ((k = read(s, b, 4 - got)) <= 0)
				die("read");
		close(s);
	}
	struct pollfd pf = { c, POLLIN, 0 };
	poll(&pf, 1, 5000);
	int m = read(c, b, sizeof(b));
	printf("read after the peer's close: %d\n", m);
	printf("writes after it: %s\n", writes_after_close(c));
	return 0;
}

static int blocked_fd;
static volatile int blocked_err;

static void *blocked_writer(void *arg)
{
	static char chunk[4096];
	(void)arg;
	while (write(blocked_fd, chunk, sizeof(chunk)) > 0)
		;
	blocked_err = errno;
	return NULL;
}

/* Both ways full, then a reset: a thread blocked in write on the server
 * end, the client writing until its writes would block, then closing
 * with data unread (a reset). The blocked write fails on Linux
 * (ECONNRESET); kbox's pump into the server's full end never saw the
 * reset, and the write waited for ever (test_ssl's
 * test_nonblocking_send hung). */
static int do_resetblocked(void)
{
	int s, c = loop_pair(&s);
	pthread_t w;
	signal(SIGPIPE, SIG_IGN);
	blocked_fd = s;
	pthread_create(&w, NULL, blocked_writer, NULL);
	fcntl(c, F_SETFL, O_NONBLOCK);
	fill(c);
	close(c);
	for (int i = 0; i < 500 && !blocked_err; i++)
		usleep(10000);
	printf("blocked write after the peer's reset: %s\n",
	       blocked_err == ECONNRESET || blocked_err == EPIPE ? "fails" : blocked_err ? strerror(blocked_err) : "still blocked");
	fflush(stdout);
	_exit(0);
}

/* A connect right after the listener's close is refused, 50 times:
 * Linux frees the port at close. */
static int do_closedlistener(void)
{
	int refused = 0;
	for (int i = 0; i < 50; i++) {
		int s, c = loop_pair(&s);
		struct sockaddr_in at;
		socklen_t al = sizeof(at);
		getsockname(s, (struct sockaddr *)&at, &al);
		close(s);
		close(c);
		close(listener_fd);
		int d = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(d, (struct sockaddr *)&at, sizeof(at)) < 0 && errno == ECONNREFUSED)
			refused++;
		close(d);
	}
	printf("connects refused after the listener's close: %d of 50\n", refused);
	return 0;
}

static int do_readall(void)
{
	int s = tcp_connect(), got = 0, m;
	char buf[256] = { 0 };
	while (got < (int)sizeof(buf) - 1 && (m = read(s, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += m;
	printf("read all: %d '%s'\n", got, buf);
	return 0;
}

static int do_rreset(void)
{
	int s = tcp_connect();
	char buf[16];
	int m = read(s, buf, sizeof(buf));
	printf("read: %d %s\n", m, m < 0 ? strerror(errno) : "");
	return 0;
}
