package usernet

import (
	"bytes"
	"strings"
)

// The guest's /etc/resolv.conf and /etc/hosts with --net
// (docs/networking.md): their texts, made from the image's copies. Package
// dispatch serves them (dispatch/sys_file_etc.go) as read-only files in
// place of the image's, which are never changed.

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
