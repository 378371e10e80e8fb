//go:build linux && amd64 && cgo

/* The trap tier's C core (core.c): the state of one guest thread, shared
 * with Go (trap_cgo.go) and with the assembly entry and exit in core.c.
 *
 * A guest thread is a thread kbox creates with pthread_create, so that it
 * has kbox's own thread pointer (glibc's TCB) to run Go and C code with.
 * While it runs guest code its FS base is the guest's; a trapped syscall
 * switches FS to kbox's, serves the call through Go in ordinary context
 * (never inside the signal handler) and switches back. */
#ifndef KBOX_TRAP_CORE_H
#define KBOX_TRAP_CORE_H

#include <linux/filter.h>
#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

/* Events that bring a guest thread into kbox (kt->event). */
enum {
	KT_SYSCALL = 1, /* a syscall the filter trapped: kt->nr, args in gregs */
	KT_KICK = 2,    /* kbox kicked the thread (a guest signal, an exit) */
	KT_SIGNAL = 3,  /* a synchronous signal in guest code: kt->signo, kt->si */
	KT_PATCHED = 4, /* a patched site's stub (rewrite tier): kt->nr, args in gregs */
};

/* What Go tells the C side to do after serving (kt->action). */
enum {
	KT_RESUME = 0, /* restore gregs and the FP state and run the guest */
	KT_EXIT = 1,   /* end this thread (pthread returns) */
};

/* KT_KICK_SIG is the signal kbox kicks a guest thread with. Not SIGSYS: a
 * kick pending when the thread's next syscall traps would swallow the
 * filter's SIGSYS (a standard signal already pending is not queued again),
 * and the skipped syscall would return its own number (docs/tiers.md). The
 * highest real-time signal: the host's signal 64 to kbox's pid is then not
 * passed on to the guest (the guest's own signal 64 is emulated as any). */
#define KT_KICK_SIG 64

/* The fd table's slots, grown before Go's threads exist (early.c): twice
 * the guest's fds (guestFDs, trap.go). */
#define KBOX_FD_TABLE 2048
#define KT_STR_(x) #x
#define KT_STR(x) KT_STR_(x)

/* Number of saved general registers: ucontext's gregs (R8 ... CR2). */
#define KT_NGREG 23

/* Offsets the assembly uses (checked with _Static_assert in core.c). */
#define KT_OFF_RSP (15 * 8)
#define KT_OFF_RIP (16 * 8)
#define KT_OFF_FSGUEST 192
#define KT_OFF_INKBOX 224
#define KT_OFF_KICKED 240
#define KT_OFF_SELF 424
#define KT_OFF_FPFAST 432
#define KT_OFF_FSKEPT 436
#define KT_OFF_XSAVE 512

/* The thread's area: the struct, its XSAVE area, and at its end the
 * vector registers kbox_fp_save moved by hand (fpstate.c):
 *   +0 MXCSR, +4 PKRU, +64 k0-k7 (8 bytes each), +128 register i at
 *   128 + 64*i (xmm, ymm or zmm0-31, as many bytes as the kind has). */
#define KT_AREA (16 << 10)
#define KT_FASTFP_SIZE (128 + 32 * 64)
#define KT_OFF_FASTFP 14208 /* KT_AREA - KT_FASTFP_SIZE */

/* The answers to ls -l's gets of one path, prepared ahead by Go
 * (dispatch/hint.go; filled by ArmXattr, trap_cgo.go) and given by
 * hint.c. */
#define KT_HINT_PATH 256
struct kbox_stab;
struct kbox_xhint {
	uint64_t gen, wb;  /* the engine's clocks they hold for */
	int32_t ans[3][2]; /* [security.selinux, system.posix_acl_access, system.posix_acl_default][getxattr, lgetxattr]: -errno, 0 none */
	uint32_t len;      /* of path, without its NUL */
	uint32_t used;     /* calls answered */
	int32_t on;        /* the answers hold (with the clocks) */
	char path[KT_HINT_PATH]; /* the guest's path string, NUL-terminated */
	struct kbox_stab *stab;  /* stats prepared ahead (hint_stat.c), or NULL */
};

/* Stats prepared ahead (dispatch/hint_stat.go; filled by StatBegin and
 * StatAdd, hint_stat_cgo.go; given by hint_stat.c): a hash table of
 * paths with their answers, filled as a stack of directories' batches
 * (Go takes the top ones off). */
#define KT_STAB_ENTS 4096
#define KT_STAB_BUCKETS 8192 /* a power of two */
#define KT_STAB_NAMES (192 << 10)
#define KT_STAB_PATH 512 /* the longest path held, with its NUL */
#define KT_STAT_SIZE 144  /* struct stat */
#define KT_STATX_SIZE 256 /* struct statx */
enum {
	KT_HAS_ST = 1,    /* st holds the lstat */
	KT_HAS_STX = 2,   /* xent holds the statx, of the table's kind */
	KT_HAS_XATTR = 4, /* xent holds ls -l's gets' answers */
	KT_LNK = 8,       /* a symlink: no answer to a call that follows */
};
struct kbox_stab_ent {
	uint64_t hash;  /* FNV-1a of the path (dispatch.StatHash) */
	uint32_t off;   /* the path's bytes in names */
	uint16_t len;   /* without a NUL */
	uint8_t has;    /* KT_HAS_*, KT_LNK */
	uint8_t pad;
	int32_t next;   /* the bucket's next (older) entry, plus one; 0 none */
	int32_t pad2;
	uint8_t st[KT_STAT_SIZE];
};
struct kbox_stab_x { /* an entry's statx answers, apart: touched only by a statx walk */
	uint8_t stx[KT_STATX_SIZE];
	int32_t ans[3][2]; /* as struct kbox_xhint's */
};
struct kbox_stab {
	uint64_t gen, wb, rm;    /* the clocks they hold for (rm: the guest's memory map's removals) */
	uint64_t buf_lo, buf_hi; /* guest memory a buffer answered into lies in */
	uint32_t used;           /* calls answered */
	int32_t on;
	uint32_t n, names_used;
	uint32_t stx_flags, stx_mask; /* the statx answered: its flags (but AT_SYMLINK_NOFOLLOW) and mask */
	int32_t head[KT_STAB_BUCKETS]; /* the newest entry's index plus one; 0 none */
	struct kbox_stab_ent ent[KT_STAB_ENTS];
	struct kbox_stab_x xent[KT_STAB_ENTS];
	char names[KT_STAB_NAMES];
};

struct kbox_thread {
	/* The guest's registers, in ucontext's gregs order (REG_R8 = 0 ...
	 * REG_RSP = 15, REG_RIP = 16, REG_EFL = 17). */
	uint64_t gregs[KT_NGREG];
	uint64_t fs_kbox;  /* kbox's FS base on this thread (glibc's TCB) */
	uint64_t fs_guest; /* the guest's FS base */
	uint64_t kstack;   /* kbox's stack pointer for the dispatch entry */
	int32_t event;     /* KT_* */
	int32_t nr;        /* the trapped syscall's number */
	int32_t signo;     /* KT_SIGNAL: the signal */
	int32_t action;    /* KT_RESUME or KT_EXIT, set by Go */
	volatile int32_t in_kbox; /* 1 while kbox's code runs (FS kbox's but in kbox_ahead_serve) */
	int32_t tid;
	int32_t slot;      /* index of this thread's slot */
	int32_t install_filter; /* the first thread installs the filter */
	volatile int32_t kicked; /* a kick came in kbox mode: look again on the way out */
	struct sock_fprog *filter;
	void *jmp[5];      /* __builtin_setjmp: the way out at KT_EXIT */
	siginfo_t si;      /* KT_SIGNAL: the signal's info */
	struct kbox_thread *self; /* this struct: the rewrite entry finds it through %gs */
	/* Where the guest's vector state is while the thread is in kbox
	 * mode: 0 the XSAVE area below, else the kind kbox_fp_save moved
	 * by hand into the area at KT_OFF_FASTFP (fpstate.c). */
	int32_t fpfast;
	/* 1 while a call answered ahead (kbox_ahead_serve) has the way back
	 * leave FS alone: it was never switched. */
	int32_t fs_kept;
	struct kbox_xhint *xhint; /* answers prepared ahead (hint.c) */
	uint8_t pad[KT_OFF_XSAVE - 23 * 8 - 3 * 8 - 8 * 4 - 8 - 8 - 5 * 8 - sizeof(siginfo_t) - 8 - 8 - 8];
	/* The guest's FPU/SSE/AVX state, XSAVE (or FXSAVE) format. */
	uint8_t xsave[] __attribute__((aligned(64)));
};

/* Byte comparison and copy for code that runs with the guest's FS
 * (kbox_ahead_serve): no libc call, whose first call's lazy binding
 * would use thread-local storage. */
static inline int kt_same(const char *a, const char *b, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}
static inline void kt_copy(void *dst, const void *src, unsigned long n)
{
	__asm__ volatile("cld; rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

int kbox_trap_init(void);
struct kbox_thread *kbox_trap_thread(int slot);
int kbox_trap_start(struct kbox_thread *kt);
int kbox_trap_xsave_size(void);
int kbox_trap_slots(void);
int kbox_trap_slot_free(int slot);
void kbox_trap_reset_fpu(struct kbox_thread *kt);
void kbox_trap_die(int sig);
int kbox_trap_fsgsbase(void);
int kbox_trap_use_xsave(void);
int kbox_fp_init(unsigned xsave_size);
void kbox_trap_fp_sync(struct kbox_thread *kt);
uint64_t kbox_trap_xcr0(void);
uint64_t kbox_rw_entry_addr(void);
int kbox_ahead_serve(struct kbox_thread *kt);
int kbox_hint_serve(struct kbox_thread *kt);
int kbox_hint_fault(ucontext_t *uc);
void kbox_hint_clocks(const uint64_t *gen, const uint64_t *wb);
extern const uint64_t *kbox_clock_gen, *kbox_clock_wb; /* hint.c */
struct kbox_xhint *kbox_hint_alloc(int slot);
int kbox_stat_serve(struct kbox_thread *kt);
int kbox_stat_fault(ucontext_t *uc);
void kbox_stat_clock(const uint64_t *rm);
struct kbox_stab *kbox_stab_alloc(struct kbox_xhint *x);
int kbox_guest_eq(uint64_t g, const char *s, uint64_t n);
long kbox_trap_native(struct kbox_thread *kt, long nr, long a0, long a1, long a2, long a3, long a4, long a5);

#endif
