package main

/*
#cgo CFLAGS: -O2
#include <fcntl.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

extern void cbfloorGo(int op);

static char path[4096];
static uint8_t area[16384] __attribute__((aligned(64)));

struct arg { int mode; long n; double ns; };

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static inline void xsave(void) { __asm__ volatile("xsave64 %0" : "=m"(area) : "a"(-1), "d"(-1) : "memory"); }
static inline void xrstor(void) { __asm__ volatile("xrstor64 %0" : : "m"(area), "a"(-1), "d"(-1) : "memory"); }

// vsave and vload: what trap/fpstate.c does instead when the CPU says
// only vector state is in use: XGETBV 1, then moves of the widest
// registers this CPU has (zmm0-31 and k0-7, ymm0-15 or xmm0-15) and
// MXCSR. vec is that width (0: no XGETBV 1, XSAVE instead).
static int vec;
static void vinit(void)
{
	unsigned a, b, c, d;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0xd), "c"(1));
	if (!(a & 4))
		return;
	uint32_t x0, x1;
	__asm__ volatile("xgetbv" : "=a"(x0), "=d"(x1) : "c"(0));
	vec = 1;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
	if (!(c & (1u << 28)) || (x0 & 6) != 6)
		return;
	vec = 2;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
	if ((b & (1u << 16)) && (b & (1u << 30)) && (x0 & 0xe6) == 0xe6)
		vec = 3;
}
#define IRP16 ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
#define IRP32 ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
static inline void vsave(void)
{
	uint32_t a, d;
	__asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(1));
	__asm__ volatile("stmxcsr %0" : "=m"(area[0]));
	if (vec == 3)
		__asm__ volatile(IRP32 "vmovdqu64 %%zmm\\i, 128+64*\\i(%0)\n.endr\n"
				 ".irp i,0,1,2,3,4,5,6,7\nkmovq %%k\\i, 64+8*\\i(%0)\n.endr\n" : : "r"(area) : "memory");
	else if (vec == 2)
		__asm__ volatile(IRP16 "vmovdqu %%ymm\\i, 128+64*\\i(%0)\n.endr\n" : : "r"(area) : "memory");
	else
		__asm__ volatile(IRP16 "movaps %%xmm\\i, 128+64*\\i(%0)\n.endr\n" : : "r"(area) : "memory");
}
static inline void vload(void)
{
	if (vec == 3)
		__asm__ volatile(IRP32 "vmovdqu64 128+64*\\i(%0), %%zmm\\i\n.endr\n"
				 ".irp i,0,1,2,3,4,5,6,7\nkmovq 64+8*\\i(%0), %%k\\i\n.endr\n" : : "r"(area) : "memory");
	else if (vec == 2)
		__asm__ volatile(IRP16 "vmovdqu 128+64*\\i(%0), %%ymm\\i\n.endr\n" : : "r"(area) : "memory");
	else
		__asm__ volatile(IRP16 "movaps 128+64*\\i(%0), %%xmm\\i\n.endr\n" : : "r"(area) : "memory");
	__asm__ volatile("ldmxcsr %0" : : "m"(area[0]));
}

static void *thread(void *p)
{
	struct arg *a = p;
	cbfloorGo(0); // the first callback binds an M to this thread
	xsave();
	double t0 = now();
	for (long i = 0; i < a->n; i++) {
		switch (a->mode) {
		case 0:
			__asm__ volatile("" ::: "memory");
			break;
		case 1:
			xsave();
			xrstor();
			break;
		case 2:
			cbfloorGo(0);
			break;
		case 3:
			xsave();
			cbfloorGo(0);
			xrstor();
			break;
		case 4:
			close(open(path, O_RDONLY | O_CLOEXEC));
			break;
		case 7:
			xsave();
			cbfloorGo(1);
			xrstor();
			xsave();
			cbfloorGo(2);
			xrstor();
			break;
		case 8:
			vsave();
			vload();
			break;
		case 9:
			vsave();
			cbfloorGo(0);
			vload();
			break;
		case 12:
			vsave();
			cbfloorGo(1);
			vload();
			vsave();
			cbfloorGo(2);
			vload();
			break;
		}
	}
	a->ns = (now() - t0) / a->n;
	return NULL;
}

static double cbfloor_run(int mode, long n)
{
	struct arg a = {mode, n, 0};
	vinit();
	if (mode >= 8 && vec == 0)
		return -1; // no XGETBV 1 here
	pthread_t t;
	if (pthread_create(&t, NULL, thread, &a) != 0)
		return -1;
	pthread_join(t, NULL);
	return a.ns;
}

static void cbfloor_path(const char *p)
{
	int i = 0;
	for (; p[i] && i < (int)sizeof(path) - 1; i++)
		path[i] = p[i];
	path[i] = 0;
}

*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

var (
	fd    int
	cpath *byte // the path for Go's open: made once, as kbox's scratch
)

// cbfloorGo is the Go side: nothing (0), or the open (1) and the close
// (2) made as kbox makes host calls, through Go's syscall entry.
//
//export cbfloorGo
func cbfloorGo(op C.int) {
	switch op {
	case 1:
		r, _, _ := unix.Syscall6(unix.SYS_OPENAT, uintptr(unix.AT_FDCWD&0xffffffff), uintptr(unsafe.Pointer(cpath)), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
		fd = int(r)
	case 2:
		unix.Close(fd)
	}
}

func setPath(p string) {
	cs := C.CString(p)
	C.cbfloor_path(cs)
	C.free(unsafe.Pointer(cs))
	var err error
	if cpath, err = unix.BytePtrFromString(p); err != nil {
		panic(err)
	}
}

func run(mode, n int) float64 { return float64(C.cbfloor_run(C.int(mode), C.long(n))) }
