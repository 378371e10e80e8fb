//go:build lkl

/*
 * The debug mirror's storage and the functions GDB puts breakpoints on
 * (mirror.h). The functions do nothing but are kept out of line, so each
 * is one stable address with its arguments in DWARF.
 */
#include "mirror.h"

struct kbox_gdb_mirror kbox_gdb; /* zero: in .bss, no cost on disk */
volatile int32_t kbox_gdb_enabled;
volatile uint64_t kbox_gdb_kernel_req;

/* the last call seen, so the calls are not optimised away */
static volatile int64_t last[4];

/* The engine calls it before it serves a syscall (kbox-break-syscall). */
__attribute__((noinline)) void kbox_gdb_dispatch(int32_t pid, int32_t nr)
{
	last[0] = pid;
	last[1] = nr;
}

/* The engine calls it when the handler returned (kbox-syscall-trace). */
__attribute__((noinline)) void kbox_gdb_dispatched(int32_t pid, int32_t nr, int64_t val, int32_t err)
{
	last[2] = val;
	last[3] = err;
	(void)pid;
	(void)nr;
}

/* kbox calls it when a kernel snapshot asked by GDB is written. */
__attribute__((noinline)) void kbox_gdb_snapshot_done(uint64_t gen)
{
	last[2] = (int64_t)gen;
}
