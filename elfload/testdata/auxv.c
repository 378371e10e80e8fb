/* auxv: prints what a program finds at its entry (argc, argv, envp, the
 * auxiliary vector, the stack's layout) in a form that is the same for one
 * binary whether the kernel or kbox's loader started it: values the kernel
 * randomizes are printed as facts about them (inside which mapping, at
 * which offset from the program's own ELF header, aligned or not).
 * Built by elfload's tests with every compiler and link mode at hand. */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern const char __ehdr_start[];

/* The mapping of /proc/self/maps that holds addr: its end and permissions. */
static int mapping(uintptr_t addr, uintptr_t *end, char perms[5])
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char p[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3 && lo <= addr && addr < hi) {
			*end = hi;
			memcpy(perms, p, 5);
			fclose(f);
			return 1;
		}
	}
	fclose(f);
	return 0;
}

static int is_elf(uintptr_t p, int *type)
{
	const Elf64_Ehdr *e = (const Elf64_Ehdr *)p;
	if (memcmp(e->e_ident, ELFMAG, SELFMAG) != 0)
		return 0;
	*type = e->e_type;
	return 1;
}

int main(int argc, char **argv, char **envp)
{
	uintptr_t self = (uintptr_t)__ehdr_start;
	int envc = 0;
	while (envp[envc])
		envc++;
	Elf64_auxv_t *auxv = (Elf64_auxv_t *)(envp + envc + 1);
	int n = 0;
	while (auxv[n].a_type != AT_NULL)
		n++;
	uintptr_t auxend = (uintptr_t)(auxv + n + 1);
	uintptr_t strings = (uintptr_t)argv[0];

	printf("argc %d\n", argc);
	printf("sp%%16 %lu\n", (unsigned long)(((uintptr_t)argv - 8) % 16));
	for (int i = 0; i < argc; i++)
		printf("argv[%d] %s\n", i, argv[i]);
	for (int i = 0; i < envc; i++)
		printf("envp[%d] %s\n", i, envp[i]);
	/* The strings lie end to end: argv, then envp, then AT_EXECFN's. */
	uintptr_t next = strings;
	int contiguous = 1;
	for (int i = 0; i < argc; i++) {
		contiguous &= (uintptr_t)argv[i] == next;
		next = (uintptr_t)argv[i] + strlen(argv[i]) + 1;
	}
	for (int i = 0; i < envc; i++) {
		contiguous &= (uintptr_t)envp[i] == next;
		next = (uintptr_t)envp[i] + strlen(envp[i]) + 1;
	}
	printf("strings contiguous %d\n", contiguous);

	for (int i = 0; i < n; i++) {
		unsigned long t = auxv[i].a_type, v = auxv[i].a_un.a_val;
		uintptr_t end;
		char perms[5];
		int type;
		switch (t) {
		case AT_PHDR: {
			/* The program headers of this very binary, at their file offset. */
			const Elf64_Ehdr *e = (const Elf64_Ehdr *)self;
			const Elf64_Phdr *ph = (const Elf64_Phdr *)v;
			printf("AT_PHDR self+%#lx", (unsigned long)(v - self));
			printf(" (e_phoff %#lx) types", (unsigned long)e->e_phoff);
			for (int j = 0; j < e->e_phnum; j++)
				printf(" %u", ph[j].p_type);
			printf("\n");
			break;
		}
		case AT_ENTRY:
			printf("AT_ENTRY self+%#lx\n", (unsigned long)(v - self));
			break;
		case AT_BASE: {
			if (v == 0) {
				printf("AT_BASE 0\n");
				break;
			}
			type = -1;
			int elf = is_elf(v, &type);
			printf("AT_BASE elf %d type %d page-aligned %d\n", elf, type, v % 4096 == 0);
			break;
		}
		case AT_SYSINFO_EHDR: {
			type = -1;
			int elf = is_elf(v, &type);
			printf("AT_SYSINFO_EHDR elf %d type %d mapped %d\n", elf, type, mapping(v, &end, perms));
			break;
		}
		case AT_RANDOM:
			printf("AT_RANDOM between-auxv-and-strings %d\n", v >= auxend && v + 16 <= strings);
			break;
		case AT_EXECFN:
			/* Right after the last environment string, 8 bytes below the
			 * top of the stack's mapping. */
			printf("AT_EXECFN %s after-strings %d top-gap %ld\n", (char *)v, v == next,
			       mapping(v, &end, perms) ? (long)(end - (v + strlen((char *)v) + 1)) : -1L);
			break;
		case AT_PLATFORM:
		case 24: /* AT_BASE_PLATFORM */
			printf("AT_%lu %s between-auxv-and-strings %d\n", t, (char *)v, v >= auxend && v < strings);
			break;
		default:
			printf("AT_%lu %#lx\n", t, v);
		}
	}
	uintptr_t end;
	char perms[5];
	if (mapping((uintptr_t)argv, &end, perms))
		printf("stack %s\n", perms);
	return 3;
}
