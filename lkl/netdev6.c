//go:build lkl

/* IPv6 on kbox's network device (netdev6_cgo.go). */
#include <lkl.h>
#include <lkl_host.h>
#include "lkl_glue.h"

int kbox_net_if_set_ipv6(int ifindex, void *addr, unsigned int plen)
{
	return lkl_if_set_ipv6(ifindex, addr, plen);
}

int kbox_net_set_ipv6_gateway(void *addr) { return lkl_set_ipv6_gateway(addr); }
