/* rwregs.h: the register check of rwsites and rwdyn. A site under test
 * is wrapped in RW_REGS_ENTER (magic values in every register the kernel
 * preserves across a syscall but %r10, and in xmm0) and RW_REGS_LEAVE
 * (every register, the flags and %rax stored to regs_out, then back to
 * the caller); rw_regs_bad then says which register differs. */
#include <stdint.h>
#include <stdio.h>

uint64_t regs_out[16];

#define RW_REGS_ENTER                                                        \
	"	push %rbx\n	push %rbp\n	push %r12\n	push %r13\n	push %r14\n	push %r15\n" \
	"	mov $0x1111111111111111, %rbx\n"                              \
	"	mov $0x2222222222222222, %rbp\n"                              \
	"	mov $0x3333333333333333, %rdx\n"                              \
	"	mov $0x4444444444444444, %rsi\n"                              \
	"	mov $0x5555555555555555, %rdi\n"                              \
	"	mov $0x6666666666666666, %r8\n"                               \
	"	mov $0x7777777777777777, %r9\n"                               \
	"	mov $0x9999999999999999, %r12\n"                              \
	"	mov $0xaaaaaaaaaaaaaaaa, %r13\n"                              \
	"	mov $0xbbbbbbbbbbbbbbbb, %r14\n"                              \
	"	mov $0xcccccccccccccccc, %r15\n"                              \
	"	movq %r15, %xmm0\n"

#define RW_REGS_LEAVE                                                        \
	"	pushfq\n"                                                     \
	"	cld\n"                                                        \
	"	mov %rbx, regs_out+0(%rip)\n"                                 \
	"	mov %rbp, regs_out+8(%rip)\n"                                 \
	"	mov %rdx, regs_out+16(%rip)\n"                                \
	"	mov %rsi, regs_out+24(%rip)\n"                                \
	"	mov %rdi, regs_out+32(%rip)\n"                                \
	"	mov %r8, regs_out+40(%rip)\n"                                 \
	"	mov %r9, regs_out+48(%rip)\n"                                 \
	"	mov %r10, regs_out+56(%rip)\n"                                \
	"	mov %r12, regs_out+64(%rip)\n"                                \
	"	mov %r13, regs_out+72(%rip)\n"                                \
	"	mov %r14, regs_out+80(%rip)\n"                                \
	"	mov %r15, regs_out+88(%rip)\n"                                \
	"	movq %xmm0, %rcx\n"                                           \
	"	mov %rcx, regs_out+96(%rip)\n"                                \
	"	pop %rcx\n"                                                   \
	"	mov %rcx, regs_out+104(%rip)\n" /* rflags */                  \
	"	mov %rax, regs_out+112(%rip)\n"                               \
	"	pop %r15\n	pop %r14\n	pop %r13\n	pop %r12\n	pop %rbp\n	pop %rbx\n" \
	"	ret\n"

/* rw_regs_bad prints the first register regs_out has wrong (r10, which
 * the site's own code may set, is want_r10) and returns 1; 0 if none. */
static int rw_regs_bad(const char *what, long call, uint64_t want_r10)
{
	static const uint64_t want[] = {
		0x1111111111111111, 0x2222222222222222, 0x3333333333333333, 0x4444444444444444,
		0x5555555555555555, 0x6666666666666666, 0x7777777777777777, 0,
		0x9999999999999999, 0xaaaaaaaaaaaaaaaa, 0xbbbbbbbbbbbbbbbb, 0xcccccccccccccccc,
		0xcccccccccccccccc};
	static const char *names[] = {"rbx", "rbp", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r12", "r13", "r14", "r15", "xmm0"};
	for (int r = 0; r < 13; r++)
		if (regs_out[r] != (r == 7 ? want_r10 : want[r])) {
			printf("regs: %s call %ld: %s = %#llx\n", what, call, names[r], (unsigned long long)regs_out[r]);
			return 1;
		}
	return 0;
}
