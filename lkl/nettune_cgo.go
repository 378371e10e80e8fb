//go:build lkl

package lkl

import "fmt"

// TuneTCP sets LKL's TCP sysctls for kbox's link through procDir, an LKL
// fd of the kernel's own proc (after boot; nothing to do without one):
// the maxima of net.ipv4.tcp_wmem and tcp_rmem become SendBufferMax and
// ReceiveBufferMax, and net.ipv4.tcp_mem grows with them for a kernel of
// memMB MiB (tcpMem). net.ipv4.ping_group_range lets every group open
// ICMP echo sockets (ping without privileges, as systemd sets it on
// today's distributions: pingGroups).
func TuneTCP(procDir, memMB int) error {
	if procDir < 0 {
		return nil
	}
	var err error
	AsRoot(func() {
		for _, c := range []struct{ name, val string }{
			{"tcp_wmem", tcpWmem()},
			{"tcp_rmem", tcpRmem()},
			{"tcp_mem", tcpMem(memMB)},
			{"ping_group_range", pingGroups},
		} {
			if werr := writeAt(procDir, "sys/net/ipv4/"+c.name, c.val); werr != nil {
				err = fmt.Errorf("lkl: net.ipv4.%s: %w", c.name, werr)
				return
			}
		}
	})
	return err
}
