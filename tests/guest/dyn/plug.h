/* A plugin of dlplug (tests/guest/dyn): one syscall site of the shape the
 * rewrite tier patches, `mov $PLUG_NR,%eax; syscall; ret`, exported as
 * plug_call. plug_a.c and plug_b.c differ only in PLUG_NR, so their code
 * has the same layout: dlplug maps b's code over a's, at the same
 * address. */
#define PLUG_STR2(x) #x
#define PLUG_STR(x) PLUG_STR2(x)
__asm__(".text\n"
	".p2align 6\n"
	".globl plug_call\n"
	".type plug_call,@function\n"
	"plug_call:\n"
	"	mov $" PLUG_STR(PLUG_NR) ", %eax\n"
	"	syscall\n"
	"	ret\n"
	".size plug_call, .-plug_call\n");
