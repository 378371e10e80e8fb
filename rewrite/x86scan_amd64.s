#include "textflag.h"

// func rel32Masks(p *byte, nblocks int, out *uint32)
//
// For each 32-byte block at p, p+32, ... (nblocks of them; the byte after
// the last block is read too), out gets a bit per byte that may start a
// rel32 branch: E8, E9, or 0F followed by a byte 80-8F. AVX2.
TEXT ·rel32Masks(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ nblocks+8(FP), CX
	MOVQ out+16(FP), DI
	MOVQ $0xE8, AX
	MOVQ AX, X0
	VPBROADCASTB X0, Y0
	MOVQ $0xE9, AX
	MOVQ AX, X1
	VPBROADCASTB X1, Y1
	MOVQ $0x0F, AX
	MOVQ AX, X2
	VPBROADCASTB X2, Y2
	MOVQ $0xF0, AX
	MOVQ AX, X3
	VPBROADCASTB X3, Y3
	MOVQ $0x80, AX
	MOVQ AX, X4
	VPBROADCASTB X4, Y4

loop:
	TESTQ CX, CX
	JZ    done
	VMOVDQU (SI), Y5
	VMOVDQU 1(SI), Y6
	VPCMPEQB Y0, Y5, Y7
	VPCMPEQB Y1, Y5, Y8
	VPOR     Y8, Y7, Y7
	VPCMPEQB Y2, Y5, Y8
	VPAND    Y3, Y6, Y6
	VPCMPEQB Y4, Y6, Y6
	VPAND    Y6, Y8, Y8
	VPOR     Y8, Y7, Y7
	VPMOVMSKB Y7, AX
	MOVL     AX, (DI)
	ADDQ     $32, SI
	ADDQ     $4, DI
	DECQ     CX
	JMP      loop

done:
	VZEROUPPER
	RET
