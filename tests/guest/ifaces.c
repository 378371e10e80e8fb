/*
 * ifaces: what the guest's sockets say of network devices (TestIfaceIoctls).
 *
 *   ifaces    for a unix socket pair and, if one can be made, an internet
 *             socket: SIOCGIFCONF's list, then for lo and eth0 the
 *             index, flags, MTU and hardware address (or the error).
 *
 * Lines: "KIND conf NAME ADDR", "KIND NAME index N flags 0xF mtu M hw HW"
 * or "KIND NAME error STRERROR".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SIOCETHTOOL
#define SIOCETHTOOL 0x8946
#endif

static void conf(const char *kind, int s)
{
	struct ifreq reqs[32];
	struct ifconf ic = { .ifc_len = sizeof(reqs), .ifc_req = reqs };
	if (ioctl(s, SIOCGIFCONF, &ic) < 0) {
		printf("%s conf error %s\n", kind, strerror(errno));
		return;
	}
	int n = ic.ifc_len / (int)sizeof(struct ifreq);
	printf("%s conf %d\n", kind, n);
	for (int i = 0; i < n; i++) {
		struct sockaddr_in *a = (struct sockaddr_in *)&reqs[i].ifr_addr;
		printf("%s conf %s %s\n", kind, reqs[i].ifr_name, inet_ntoa(a->sin_addr));
	}
	/* With no buffer: the length needed. */
	struct ifconf q = { .ifc_len = 0, .ifc_buf = NULL };
	if (ioctl(s, SIOCGIFCONF, &q) == 0)
		printf("%s conf needs %d\n", kind, q.ifc_len / (int)sizeof(struct ifreq));
	/* A buffer of no bytes is no null buffer: nothing fits, length 0. */
	struct ifconf z = { .ifc_len = 0, .ifc_req = reqs };
	if (ioctl(s, SIOCGIFCONF, &z) == 0)
		printf("%s conf in 0 bytes: %d\n", kind, z.ifc_len);
}

static void dev(const char *kind, int s, const char *name)
{
	struct ifreq r;
	memset(&r, 0, sizeof(r));
	strncpy(r.ifr_name, name, IFNAMSIZ - 1);
	if (ioctl(s, SIOCGIFINDEX, &r) < 0) {
		printf("%s %s error %s\n", kind, name, strerror(errno));
		return;
	}
	int index = r.ifr_ifindex;
	ioctl(s, SIOCGIFFLAGS, &r);
	int flags = r.ifr_flags & 0xffff;
	ioctl(s, SIOCGIFMTU, &r);
	int mtu = r.ifr_mtu;
	if (ioctl(s, SIOCGIFHWADDR, &r) < 0) {
		printf("%s %s hw error %s\n", kind, name, strerror(errno));
		return;
	}
	unsigned char *h = (unsigned char *)r.ifr_hwaddr.sa_data;
	printf("%s %s index %d flags 0x%x mtu %d hw %02x:%02x:%02x:%02x:%02x:%02x\n", kind, name, index, flags, mtu,
	       h[0], h[1], h[2], h[3], h[4], h[5]);
	/* SIOCGIFNAME of that index names it again. */
	memset(&r, 0, sizeof(r));
	r.ifr_ifindex = index;
	if (ioctl(s, SIOCGIFNAME, &r) == 0)
		printf("%s index %d is %s\n", kind, index, r.ifr_name);
}

static void all(const char *kind, int s)
{
	conf(kind, s);
	dev(kind, s, "lo");
	dev(kind, s, "eth0");
	/* ethtool's argument points further: not offered. */
	struct ifreq r;
	memset(&r, 0, sizeof(r));
	strcpy(r.ifr_name, "eth0");
	if (ioctl(s, SIOCETHTOOL, &r) < 0)
		printf("%s ethtool error %s\n", kind, strerror(errno));
}

int main(void)
{
	int p[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, p) < 0) {
		perror("socketpair");
		return 1;
	}
	all("unix", p[0]);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		printf("inet socket error %s\n", strerror(errno));
	else
		all("inet", s);
	/* Not a socket: the host's answer. */
	if (ioctl(1, SIOCGIFCONF, &(struct ifconf){ 0 }) < 0)
		printf("stdout error %s\n", strerror(errno));
	return 0;
}
