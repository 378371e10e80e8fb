//go:build linux && amd64 && cgo

/* Stats prepared ahead (dispatch/hint_stat.go): a patched site's
 * newfstatat, stat or lstat of a path Go prepared the answer to is
 * answered here, on the way into kbox, without Go, while the engine's
 * clocks (the stat cache's generation, the shadows' write-backs) and the
 * count of removals from the guest's memory map stand where they stood
 * when Go prepared it, and the buffer lies in the stretch of guest memory
 * Go named. Anything else goes to Go as before. It runs with the guest's
 * FS (kbox_ahead_serve, core.c): no thread-local storage, no libc call.
 *
 * Guest memory is touched by kbox_guest_str (the path, read a byte at a
 * time up to its NUL) and kbox_guest_put (the answer, one rep movsb)
 * alone; a fault at either instruction returns -1 (kbox_stat_fault, from
 * core.c's on_sync), and the call goes to Go, which answers EFAULT as for
 * any bad pointer. */
#define _GNU_SOURCE
#include "core.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>

long kbox_guest_str(uint64_t g, char *buf, uint64_t n);
int kbox_guest_put(uint64_t g, const void *src, uint64_t n);

static const uint64_t *clock_rm;

/* kbox_stat_clock gives the count of removals from the guest's memory map
 * (trap/regions.go). */
void kbox_stat_clock(const uint64_t *rm)
{
	__atomic_store_n(&clock_rm, rm, __ATOMIC_RELEASE);
}

/* kbox_stab_alloc returns x's table, made (empty, off) the first time. */
struct kbox_stab *kbox_stab_alloc(struct kbox_xhint *x)
{
	if (x == NULL)
		return NULL;
	if (x->stab == NULL)
		x->stab = calloc(1, sizeof(struct kbox_stab));
	return x->stab;
}

static uint64_t fnv1a(const char *p, long n)
{
	uint64_t h = 14695981039346656037ULL;
	for (long i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static const struct kbox_stab_ent *lookup(const struct kbox_stab *h, uint64_t hash, const char *p, long n)
{
	for (int32_t i = h->head[hash & (KT_STAB_BUCKETS - 1)]; i != 0;) {
		if (i < 0 || (uint32_t)i > h->n)
			return NULL;
		const struct kbox_stab_ent *e = &h->ent[i - 1];
		if (e->hash == hash && e->len == n && kt_same(h->names + e->off, p, (unsigned long)n))
			return e;
		i = e->next;
	}
	return NULL;
}

/* kbox_stat_serve answers kt's call when its path's stat is prepared: 1,
 * with the result in kt's saved rax; 0 when Go must serve it. */
int kbox_stat_serve(struct kbox_thread *kt)
{
	uint64_t path, buf, flags, size = KT_STAT_SIZE;
	int want = KT_HAS_ST;
	switch (kt->nr) {
	case SYS_newfstatat: /* (the dirfd does not matter to an absolute path) */
		path = kt->gregs[REG_RSI];
		buf = kt->gregs[REG_RDX];
		flags = kt->gregs[REG_R10];
		break;
	case SYS_lstat:
		path = kt->gregs[REG_RDI];
		buf = kt->gregs[REG_RSI];
		flags = AT_SYMLINK_NOFOLLOW;
		break;
	case SYS_stat:
		path = kt->gregs[REG_RDI];
		buf = kt->gregs[REG_RSI];
		flags = 0;
		break;
	case SYS_statx:
		path = kt->gregs[REG_RSI];
		flags = kt->gregs[REG_RDX];
		buf = kt->gregs[REG_R8];
		size = KT_STATX_SIZE;
		want = KT_HAS_STX;
		break;
	default:
		return 0;
	}
	struct kbox_stab *s = kt->xhint != NULL ? kt->xhint->stab : NULL;
	const uint64_t *gen = __atomic_load_n(&kbox_clock_gen, __ATOMIC_ACQUIRE);
	const uint64_t *rm = __atomic_load_n(&clock_rm, __ATOMIC_ACQUIRE);
	if (s == NULL || !s->on || gen == NULL || rm == NULL)
		return 0;
	if (want == KT_HAS_STX ? (uint32_t)kt->gregs[REG_R10] != s->stx_mask || (flags & ~(uint64_t)AT_SYMLINK_NOFOLLOW) != s->stx_flags
			       : (flags & ~(uint64_t)AT_SYMLINK_NOFOLLOW) != 0)
		return 0;
	if (__atomic_load_n(gen, __ATOMIC_ACQUIRE) != s->gen || __atomic_load_n(kbox_clock_wb, __ATOMIC_ACQUIRE) != s->wb ||
	    __atomic_load_n(rm, __ATOMIC_ACQUIRE) != s->rm)
		return 0;
	if (buf < s->buf_lo || buf > s->buf_hi - size)
		return 0;
	char p[KT_STAB_PATH];
	long n = kbox_guest_str(path, p, sizeof p);
	if (n <= 0 || p[0] != '/')
		return 0;
	uint64_t hash = fnv1a(p, n);
	const struct kbox_stab_ent *e = lookup(s, hash, p, n);
	if (e == NULL || !(e->has & want) || ((e->has & KT_LNK) && !(flags & AT_SYMLINK_NOFOLLOW)))
		return 0;
	const struct kbox_stab_x *x = &s->xent[e - s->ent];
	if (kbox_guest_put(buf, want == KT_HAS_STX ? x->stx : e->st, size) != 1)
		return 0;
	s->used++;
	kt->gregs[REG_RAX] = 0;
	struct kbox_xhint *h = kt->xhint;
	if (want == KT_HAS_STX && (e->has & KT_HAS_XATTR) && n < KT_HINT_PATH) {
		/* ls -l's gets next, as the statx's answer would have
		 * prepared them in Go (hint.go's armXattrHint) */
		h->on = 0;
		h->gen = s->gen;
		h->wb = s->wb;
		kt_copy(h->ans, x->ans, sizeof h->ans);
		kt_copy(h->path, p, (unsigned long)n + 1);
		h->len = (uint32_t)n;
		h->on = 1;
	}
	return 1;
}

extern char kbox_guest_str_load[], kbox_guest_str_fault[];
extern char kbox_guest_put_store[], kbox_guest_put_fault[];

/* kbox_stat_fault: a fault at kbox_guest_str's load or kbox_guest_put's
 * store makes it return -1. 1 when it was one of those. */
int kbox_stat_fault(ucontext_t *uc)
{
	greg_t *g = uc->uc_mcontext.gregs;
	char *ip = (char *)g[REG_RIP];
	if (ip == kbox_guest_str_load)
		g[REG_RIP] = (greg_t)kbox_guest_str_fault;
	else if (ip == kbox_guest_put_store)
		g[REG_RIP] = (greg_t)kbox_guest_put_fault;
	else
		return 0;
	return 1;
}

/* kbox_guest_str(g, buf, n): copies the string at guest address g, with
 * its NUL, into buf; its length, -2 when no NUL came in n bytes, -1 when
 * reading faults. It reads nothing after the NUL. rdi = g, rsi = buf,
 * rdx = n.
 * kbox_guest_put(g, src, n): copies n bytes to guest address g; 1, or -1
 * when writing faults (some bytes may be written). rdi = g, rsi = src,
 * rdx = n. */
__asm__(".text\n"
	".globl kbox_guest_str\n"
	".type kbox_guest_str,@function\n"
	"kbox_guest_str:\n"
	"	xor %ecx, %ecx\n"
	"1:	cmp %rdx, %rcx\n"
	"	jae 3f\n"
	".globl kbox_guest_str_load\n"
	"kbox_guest_str_load:\n"
	"	movzbl (%rdi,%rcx), %eax\n"
	"	mov %al, (%rsi,%rcx)\n"
	"	test %al, %al\n"
	"	jz 2f\n"
	"	inc %rcx\n"
	"	jmp 1b\n"
	"2:	mov %rcx, %rax\n"
	"	ret\n"
	"3:	mov $-2, %rax\n"
	"	ret\n"
	".globl kbox_guest_str_fault\n"
	"kbox_guest_str_fault:\n"
	"	mov $-1, %rax\n"
	"	ret\n"
	".size kbox_guest_str, .-kbox_guest_str\n"
	".globl kbox_guest_put\n"
	".type kbox_guest_put,@function\n"
	"kbox_guest_put:\n"
	"	mov %rdx, %rcx\n"
	"	cld\n"
	".globl kbox_guest_put_store\n"
	"kbox_guest_put_store:\n"
	"	rep movsb\n"
	"	mov $1, %eax\n"
	"	ret\n"
	".globl kbox_guest_put_fault\n"
	"kbox_guest_put_fault:\n"
	"	mov $-1, %eax\n"
	"	ret\n"
	".size kbox_guest_put, .-kbox_guest_put\n");
