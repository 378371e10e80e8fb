// Package netconf is the guest network's configuration with --net
// (docs/networking.md): its addresses, which package usernet serves, and
// the texts of the guest's /etc/resolv.conf and /etc/hosts, made from the
// image's copies. Package dispatch serves the files
// (dispatch/sys_file_etc.go) as read-only files in place of the image's,
// which are never changed. It imports no network stack, so the engine can
// use it.
package netconf

import (
	"bytes"
	"net/netip"
	"strings"
)

// The guest's network: 10.0.2.0/24, the guest at .15, kbox's gateway at
// .2 (which stands for the host's 127.0.0.1) and its DNS responder at .3;
// for IPv6 the ULA prefix fd00:6b62:6f78::/64 ("kbox" in hex), the guest
// at ::15 and the gateway at ::2, which stands for the host's ::1.
var (
	GuestAddr  = netip.MustParseAddr("10.0.2.15")
	GatewayIP  = netip.MustParseAddr("10.0.2.2")
	DNSAddr    = netip.MustParseAddr("10.0.2.3")
	PrefixLen  = 24
	GuestAddr6 = netip.MustParseAddr("fd00:6b62:6f78::15")
	GatewayIP6 = netip.MustParseAddr("fd00:6b62:6f78::2")
	PrefixLen6 = 64
)

// Paths of the guest files kbox makes with --net.
const (
	ResolvConfPath = "/etc/resolv.conf"
	HostsPath      = "/etc/hosts"
)

// ResolvConf is the guest's resolv.conf: the DNS responder (DNSAddr),
// then the image's search, domain and options lines (image is its copy,
// nil if none).
func ResolvConf(image []byte) []byte {
	var b bytes.Buffer
	b.WriteString("# kbox --net: the DNS responder (docs/networking.md)\nnameserver " + DNSAddr.String() + "\n")
	for _, line := range strings.Split(string(image), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "search" || f[0] == "domain" || f[0] == "options") {
			b.WriteString(strings.TrimSpace(line) + "\n")
		}
	}
	return b.Bytes()
}

// HostsFile is the guest's hosts: localhost (IPv4 and IPv6), the guest's
// hostname at GuestAddr, then the image's file (nil if none): resolvers
// take the first match, so these names are kbox's and the image's other
// names stay.
func HostsFile(hostname string, image []byte) []byte {
	var b bytes.Buffer
	b.WriteString("# kbox --net (docs/networking.md)\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if hostname != "" && hostname != "(none)" && hostname != "localhost" {
		short, _, _ := strings.Cut(hostname, ".")
		if short != hostname {
			b.WriteString(GuestAddr.String() + "\t" + hostname + " " + short + "\n")
		} else {
			b.WriteString(GuestAddr.String() + "\t" + hostname + "\n")
		}
	}
	if len(image) > 0 {
		b.WriteString("# the image's /etc/hosts\n")
		b.Write(image)
		if image[len(image)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
