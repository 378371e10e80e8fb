/* slotclash: a static non-PIE program linked at 0x7F060000, where the
 * rewrite tier's slot table lives (rewrite.X86SlotBase): that tier cannot
 * load it into kbox's process (its address is taken), the seccomp tier
 * and the trap tier can. auto must fall through to seccomp (docs/tiers.md,
 * Auto). Natively it just runs.
 *
 * KBOX_LDFLAGS: -Wl,-Ttext-segment=0x7F060000
 */
#include <stdio.h>

int main(void)
{
	printf("slotclash: main at %p\n", (void *)main);
	return 0;
}
