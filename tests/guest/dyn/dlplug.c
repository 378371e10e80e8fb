/* dlplug: a dynamic (musl) program that dlopens a library after start,
 * calls its syscall site until the rewrite tier patched it, then maps
 * another library's code over that code (MAP_FIXED, same address, same
 * layout, another syscall) and calls it again: the new code must run,
 * not the old patch.
 *
 *   dlplug N [DIR]   call each site N times (libraries in DIR,
 *                    default /opt/tests)
 *
 * It prints the site's address and state ("patched": the rewrite tier's
 * FF 24 25 jump; "original": the library's own bytes). musl's dlclose
 * unloads nothing, so the re-mapping is done by hand. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *state(const unsigned char *s)
{
	if (s[0] == 0xFF && s[1] == 0x24 && s[2] == 0x25)
		return "patched";
	if (s[0] == 0xB8 && s[5] == 0x0F && s[6] == 0x05)
		return "original";
	return "other";
}

/* file_off finds the file offset of addr in the object loaded at base. */
static uintptr_t want_addr;
static long found_off = -1;
static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;
		if (p->p_type == PT_LOAD && want_addr >= lo && want_addr < lo + p->p_filesz) {
			found_off = (long)(p->p_offset + (want_addr - lo));
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10;
	const char *dir = argc > 2 ? argv[2] : "/opt/tests";
	char pa[512], pb[512];
	snprintf(pa, sizeof pa, "%s/libplug_a.so", dir);
	snprintf(pb, sizeof pb, "%s/libplug_b.so", dir);
	setvbuf(stdout, NULL, _IOLBF, 0);
	void *h = dlopen(pa, RTLD_NOW);
	if (h == NULL) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	long (*call)(void) = (long (*)(void))dlsym(h, "plug_call");
	if (call == NULL) {
		printf("dlsym: %s\n", dlerror());
		return 1;
	}
	const unsigned char *site = (const unsigned char *)call;
	long uid = getuid(), pid = getpid();
	for (long i = 0; i < n; i++)
		if (call() != uid) {
			printf("a: call %ld: %ld, want getuid %ld\n", i, call(), uid);
			return 1;
		}
	printf("a: %ld calls ok, site %s\n", n, state(site));
	fprintf(stderr, "dlplug: site %p\n", (void *)site);

	want_addr = (uintptr_t)site;
	dl_iterate_phdr(phdr_cb, NULL);
	if (found_off < 0) {
		printf("no file offset for %p\n", (void *)site);
		return 1;
	}
	int fd = open(pb, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror("open libplug_b.so");
		return 1;
	}
	uintptr_t page = (uintptr_t)site & ~(uintptr_t)4095;
	void *m = mmap((void *)page, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, found_off & ~4095L);
	close(fd);
	if (m != (void *)page) {
		perror("mmap libplug_b.so");
		return 1;
	}
	printf("b mapped: site %s\n", state(site));
	for (long i = 0; i < n; i++)
		if (call() != pid) {
			printf("b: call %ld: %ld, want getpid %ld\n", i, call(), pid);
			return 1;
		}
	printf("b: %ld calls ok, site %s\n", n, state(site));
	return 0;
}
