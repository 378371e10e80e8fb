//go:build cgo && (amd64 || arm64)

// Package nativerun starts a program that package elfload loaded, with no
// interception at all: its syscalls go straight to the host kernel. It is
// for tests of the loader, in a throwaway process (the program's
// exit_group ends it), never for kbox itself.
package nativerun

/*
#cgo CFLAGS: -O2
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

struct kbox_nativerun { uintptr_t entry, sp; };

static const uint32_t kbox_nativerun_mxcsr = 0x1f80;

// The guest's thread: jump to entry with the stack pointer at sp and the
// registers as the kernel leaves them at process entry (zero; on x86_64
// rdx = 0 is "no atexit function", on arm64 x0 is).
static void *kbox_nativerun_thread(void *arg)
{
	struct kbox_nativerun s = *(struct kbox_nativerun *)arg;
	free(arg);
#if defined(__x86_64__)
	__asm__ volatile(
		"fninit\n\t"
		"ldmxcsr %2\n\t"
		"mov %0, %%rsp\n\t"
		"push %1\n\t"
		"xor %%eax, %%eax\n\t"
		"xor %%ebx, %%ebx\n\t"
		"xor %%ecx, %%ecx\n\t"
		"xor %%edx, %%edx\n\t"
		"xor %%esi, %%esi\n\t"
		"xor %%edi, %%edi\n\t"
		"xor %%ebp, %%ebp\n\t"
		"xor %%r8d, %%r8d\n\t"
		"xor %%r9d, %%r9d\n\t"
		"xor %%r10d, %%r10d\n\t"
		"xor %%r11d, %%r11d\n\t"
		"xor %%r12d, %%r12d\n\t"
		"xor %%r13d, %%r13d\n\t"
		"xor %%r14d, %%r14d\n\t"
		"xor %%r15d, %%r15d\n\t"
		"cld\n\t"
		"ret\n\t"
		: : "r"(s.sp), "r"(s.entry), "m"(kbox_nativerun_mxcsr) : "memory");
#elif defined(__aarch64__)
	__asm__ volatile(
		"mov sp, %0\n\t"
		"mov x16, %1\n\t"
		"msr fpcr, xzr\n\t"
		"mov x0, xzr\n\t  mov x1, xzr\n\t  mov x2, xzr\n\t  mov x3, xzr\n\t"
		"mov x4, xzr\n\t  mov x5, xzr\n\t  mov x6, xzr\n\t  mov x7, xzr\n\t"
		"mov x8, xzr\n\t  mov x9, xzr\n\t  mov x10, xzr\n\t mov x11, xzr\n\t"
		"mov x12, xzr\n\t mov x13, xzr\n\t mov x14, xzr\n\t mov x15, xzr\n\t"
		"mov x17, xzr\n\t mov x18, xzr\n\t mov x19, xzr\n\t mov x20, xzr\n\t"
		"mov x21, xzr\n\t mov x22, xzr\n\t mov x23, xzr\n\t mov x24, xzr\n\t"
		"mov x25, xzr\n\t mov x26, xzr\n\t mov x27, xzr\n\t mov x28, xzr\n\t"
		"mov x29, xzr\n\t mov x30, xzr\n\t"
		"br x16\n\t"
		: : "r"(s.sp), "r"(s.entry) : "memory");
#endif
	__builtin_unreachable();
}

// Start the guest on a new detached pthread with every signal blocked but
// the synchronous ones (a fault in the guest must be delivered to it).
static int kbox_nativerun_start(uintptr_t entry, uintptr_t sp)
{
	struct kbox_nativerun *s = malloc(sizeof *s);
	if (!s)
		return ENOMEM;
	s->entry = entry;
	s->sp = sp;
	sigset_t all, old;
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSYS);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 << 10);
	pthread_t t;
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&t, &attr, kbox_nativerun_thread, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc)
		free(s);
	return rc;
}
*/
import "C"

import "syscall"

// Start runs the program whose entry and initial stack pointer elfload
// gave on a new thread made in C (never a Go thread: the program's libc
// takes the thread pointer, which Go's signal handlers read). It returns
// once the thread exists; the program ends the process when it exits.
func Start(entry, sp uintptr) error {
	if rc := C.kbox_nativerun_start(C.uintptr_t(entry), C.uintptr_t(sp)); rc != 0 {
		return syscall.Errno(rc)
	}
	return nil
}
