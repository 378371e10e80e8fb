//go:build lkl

package tests

import (
	"strings"
	"testing"
)

// TestNetBeforeConnect: a TCP socket before its first connect or listen,
// in each tier, compared with the same program run natively on the
// host's loopback (tests/guest/inetpre.c). Its reads fail with ENOTCONN,
// its writes with EPIPE and SIGPIPE (EPIPE alone with MSG_NOSIGNAL),
// blocking or not, poll says OUT HUP, and it still connects afterwards;
// a closed fresh socket frees its port and its place. Before, the
// guest's fd was a socket pair's end: reads gave EOF and writes were
// taken and dropped (CPython's test_ssl test_wrapped_unconnected).
//
// Then a connect again at once after a non-blocking connect that was
// refused (asyncio's test_sock_client_connect_racing, which skipped under
// kbox with ECONNABORTED in every event loop): ECONNREFUSED while the
// guest has not read the error, ECONNABORTED once it has, then a new
// connect; once connected, connect gives 0 once, then EISCONN. Before,
// kbox answered EALREADY or ECONNABORTED, and EISCONN at once.
//
// Then a peer on the guest's loopback sends and closes with SO_LINGER 0:
// getpeername says ENOTCONN at once and a non-blocking recv still reads
// what came first (CPython's test_ssl test_preauth_data_to_tls_client
// and _server: ssl's wrap_socket makes these two calls). Before, kbox
// ended the closed socket a little later: getpeername said connected and
// the recv EAGAIN.
func TestNetBeforeConnect(t *testing.T) {
	native := nativeGuest(t, "inetpre")
	io := []string{"IPv4 blocking read: -1 Socket not connected", "IPv4 blocking write: -1 Broken pipe, SIGPIPE 1",
		"IPv4 blocking send MSG_NOSIGNAL: -1 Broken pipe, SIGPIPE 0", "IPv4 blocking sendmsg: -1 Broken pipe, SIGPIPE 1",
		"IPv4 blocking poll: 1 OUT HUP", "IPv4 non-blocking recv: -1 Socket not connected",
		"IPv6 non-blocking write: -1 Broken pipe, SIGPIPE 1", "IPv6 non-blocking shutdown: -1 Socket not connected",
		"connected after the calls: read 'ping'", "bind to a closed fresh socket's port: 0", "fresh sockets opened and closed: 3000"}
	race := []string{"at once: connect again: -1 Connection refused", "at once: and again: -1 Operation in progress",
		"at once: connect once connected: 0", "at once: and again: -1 Socket is connected", "at once: echo: 4 'pong'",
		"after SO_ERROR: connect again: -1 Connection aborted", "after SO_ERROR: and again: -1 Operation in progress"}
	preauth := []string{"client: getpeername after the reset: -1 Socket not connected", "client: non-blocking recv of 1: 1 'H'",
		"server: getpeername after the reset: -1 Socket not connected", "server: non-blocking recv of 1: 1 'H'",
		"client later: getpeername after the reset: -1 Socket not connected", "client later: non-blocking recv of 1: 1 'H'",
		"server later: getpeername after the reset: -1 Socket not connected", "server later: non-blocking recv of 1: 1 'H'"}
	forEachTier(t, func(t *testing.T, tier string) {
		for _, c := range []struct {
			name, mode, addr string
			args             []string
			want             []string
		}{
			{"io", "io", "127.0.0.1", tierNetArgs(t, tier), io},
			{"io-ipv6", "io", "::1", tierNetArgs(t, tier), io},
			{"io-nonet-uid1000", "io", "127.0.0.1", []string{"image", "-R", imagePath(t), "--read-only", "--change-id", "1000:1000", "--syscall-mode=" + tier}, io},
			{"race", "race", "127.0.0.1", tierNetArgs(t, tier), race},
			{"preauth", "preauth", "127.0.0.1", tierNetArgs(t, tier), preauth},
		} {
			t.Run(c.name, func(t *testing.T) {
				args := append(c.args, "--", "/opt/tests/inetpre", c.mode, c.addr, "0")
				stdout := runNative(t, tier, native, args, c.mode, c.addr, "0", true)
				rest := stdout
				for _, w := range c.want {
					i := strings.Index(rest, w)
					if i < 0 {
						t.Errorf("stdout lacks %q (in order):\n%s", w, stdout)
						break
					}
					rest = rest[i+len(w):]
				}
			})
		}
	})
}
