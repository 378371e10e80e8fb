//go:build lkl

package lkl

import "fmt"

// TuneTCP sets LKL's TCP sysctls for kbox's link through procDir, an LKL
// fd of the kernel's own proc (after boot; nothing to do without one):
// net.ipv4.tcp_wmem's maximum becomes SendBufferMax.
func TuneTCP(procDir int) error {
	if procDir < 0 {
		return nil
	}
	var err error
	AsRoot(func() {
		if werr := writeAt(procDir, "sys/net/ipv4/tcp_wmem", tcpWmem()); werr != nil {
			err = fmt.Errorf("lkl: net.ipv4.tcp_wmem: %w", werr)
		}
	})
	return err
}
