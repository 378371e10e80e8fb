//go:build linux && amd64 && cgo

/* Answers prepared ahead (dispatch/hint.go): a patched site's getxattr or
 * lgetxattr of the path string and the name Go prepared an answer for is
 * answered here, on the way into kbox, without Go, while the engine's
 * clocks (the stat cache's generation, the shadows' write-backs) stand
 * where they stood before the statx that prepared it. Anything else goes
 * to Go as before. It runs with the guest's FS (kbox_ahead_serve,
 * core.c): no thread-local storage, no libc call.
 *
 * Guest memory is read by kbox_guest_eq alone, whose one load from it
 * (kbox_guest_eq_load) a fault turns into "not equal" (kbox_hint_fault,
 * from core.c's on_sync): the call then goes to Go, which answers EFAULT
 * as for any bad pointer. Comparison stops at the first byte that
 * differs, so it reads no further than the guest's own string. */
#define _GNU_SOURCE
#include "core.h"

#include <stdlib.h>
#include <sys/syscall.h>

const uint64_t *kbox_clock_gen, *kbox_clock_wb;

/* The names, in struct kbox_xhint's order, with their NULs. */
static const char name_selinux[] = "security.selinux";
static const char name_acl[] = "system.posix_acl_access";
static const char name_acl_default[] = "system.posix_acl_default";

/* One per slot, made with the slot's first thread and kept: the slot's
 * later threads reuse it (kbox_hint_alloc). */
#define HINT_SLOTS 4096
static struct kbox_xhint *hints[HINT_SLOTS];

void kbox_hint_clocks(const uint64_t *gen, const uint64_t *wb)
{
	kbox_clock_wb = wb;
	__atomic_store_n(&kbox_clock_gen, gen, __ATOMIC_RELEASE);
}

/* kbox_hint_alloc returns slot's hint, holding nothing, or NULL. */
struct kbox_xhint *kbox_hint_alloc(int slot)
{
	if (slot < 0 || slot >= HINT_SLOTS)
		return NULL;
	if (hints[slot] == NULL)
		hints[slot] = calloc(1, sizeof(struct kbox_xhint));
	if (hints[slot] != NULL) {
		hints[slot]->on = 0;
		if (hints[slot]->stab != NULL)
			hints[slot]->stab->on = 0;
	}
	return hints[slot];
}

/* kbox_hint_serve answers kt's call when a hint holds its answer: 1, with
 * the result in kt's saved rax; 0 when Go must serve it. */
int kbox_hint_serve(struct kbox_thread *kt)
{
	struct kbox_xhint *h = kt->xhint;
	int form;
	if (kt->nr == SYS_getxattr)
		form = 0;
	else if (kt->nr == SYS_lgetxattr)
		form = 1;
	else
		return 0;
	const uint64_t *gen = __atomic_load_n(&kbox_clock_gen, __ATOMIC_ACQUIRE);
	if (h == NULL || !h->on || gen == NULL)
		return 0;
	if (__atomic_load_n(gen, __ATOMIC_ACQUIRE) != h->gen || __atomic_load_n(kbox_clock_wb, __ATOMIC_ACQUIRE) != h->wb)
		return 0;
	uint64_t path = kt->gregs[REG_RDI], name = kt->gregs[REG_RSI];
	int which;
	if (kbox_guest_eq(name, name_selinux, sizeof name_selinux) == 1)
		which = 0;
	else if (kbox_guest_eq(name, name_acl, sizeof name_acl) == 1)
		which = 1;
	else if (kbox_guest_eq(name, name_acl_default, sizeof name_acl_default) == 1)
		which = 2;
	else
		return 0;
	int32_t ans = h->ans[which][form];
	if (ans == 0 || kbox_guest_eq(path, h->path, (uint64_t)h->len + 1) != 1)
		return 0;
	h->used++;
	kt->gregs[REG_RAX] = (uint64_t)(int64_t)ans;
	return 1;
}

extern char kbox_guest_eq_load[], kbox_guest_eq_fault[];

/* kbox_hint_fault: a fault at kbox_guest_eq's load of guest memory makes
 * it return -1. 1 when it was that. */
int kbox_hint_fault(ucontext_t *uc)
{
	greg_t *g = uc->uc_mcontext.gregs;
	if ((char *)g[REG_RIP] != kbox_guest_eq_load)
		return 0;
	g[REG_RIP] = (greg_t)kbox_guest_eq_fault;
	return 1;
}

/* kbox_guest_eq(g, s, n): 1 when the n bytes at guest address g are s's,
 * 0 when one differs (it reads none after it), -1 when reading faults.
 * rdi = g, rsi = s, rdx = n. */
__asm__(".text\n"
	".globl kbox_guest_eq\n"
	".type kbox_guest_eq,@function\n"
	"kbox_guest_eq:\n"
	"	xor %ecx, %ecx\n"
	"1:	cmp %rdx, %rcx\n"
	"	jae 3f\n"
	"	movzbl (%rsi,%rcx), %eax\n"
	".globl kbox_guest_eq_load\n"
	"kbox_guest_eq_load:\n"
	"	cmpb %al, (%rdi,%rcx)\n"
	"	jne 2f\n"
	"	inc %rcx\n"
	"	jmp 1b\n"
	"2:	xor %eax, %eax\n"
	"	ret\n"
	"3:	mov $1, %eax\n"
	"	ret\n"
	".globl kbox_guest_eq_fault\n"
	"kbox_guest_eq_fault:\n"
	"	mov $-1, %eax\n"
	"	ret\n"
	".size kbox_guest_eq, .-kbox_guest_eq\n");
