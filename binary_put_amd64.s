//go:build amd64 && !purego

#include "textflag.h"

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// func putRunAVX(out []byte, ps [][]byte, ts []uint64) (written, entries int)
//
// DI out base, R8 len(out), SI &ps[i], CX entry limit, R9 ts base,
// R10 prefix length (4, or 12 when timed), AX written, BX entries,
// R11 payload pointer, R12 payload length, R13 end of the entry,
// DX where the payload goes, R14/R15 scratch.
TEXT ·putRunAVX(SB), NOSPLIT, $0-88
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), R8
	MOVQ ps_base+24(FP), SI
	MOVQ ps_len+32(FP), CX
	MOVQ ts_base+48(FP), R9
	MOVQ ts_len+56(FP), R14
	MOVQ $4, R10
	TESTQ R14, R14
	JZ   start
	MOVQ $12, R10
	CMPQ R14, CX
	CMOVQLT R14, CX

start:
	XORQ AX, AX
	XORQ BX, BX

loop:
	CMPQ BX, CX
	JAE  done
	MOVQ 0(SI), R11
	MOVQ 8(SI), R12
	CMPQ R12, $256
	JA   done
	LEAQ (AX)(R10*1), R13
	ADDQ R12, R13
	CMPQ R13, R8
	JA   done
	LEAQ (DI)(AX*1), DX
	CMPQ R10, $4
	JE   length
	MOVQ (R9)(BX*8), R14
	BSWAPQ R14
	MOVQ R14, 0(DX)
	ADDQ $8, DX

length:
	MOVL R12, R14
	BSWAPL R14
	MOVL R14, 0(DX)
	ADDQ $4, DX
	CMPQ R12, $32
	JB   lt32
	CMPQ R12, $64
	JBE  c32to64
	CMPQ R12, $128
	JBE  c65to128

	// 129..256: 4 blocks from the start, 4 ending at the end.
	LEAQ -128(R11)(R12*1), R14
	VMOVDQU 0(R11), Y0
	VMOVDQU 32(R11), Y1
	VMOVDQU 64(R11), Y2
	VMOVDQU 96(R11), Y3
	VMOVDQU 0(R14), Y4
	VMOVDQU 32(R14), Y5
	VMOVDQU 64(R14), Y6
	VMOVDQU 96(R14), Y7
	LEAQ -128(DX)(R12*1), R15
	VMOVDQU Y0, 0(DX)
	VMOVDQU Y1, 32(DX)
	VMOVDQU Y2, 64(DX)
	VMOVDQU Y3, 96(DX)
	VMOVDQU Y4, 0(R15)
	VMOVDQU Y5, 32(R15)
	VMOVDQU Y6, 64(R15)
	VMOVDQU Y7, 96(R15)
	JMP  next

c65to128:
	LEAQ -64(R11)(R12*1), R14
	VMOVDQU 0(R11), Y0
	VMOVDQU 32(R11), Y1
	VMOVDQU 0(R14), Y2
	VMOVDQU 32(R14), Y3
	LEAQ -64(DX)(R12*1), R15
	VMOVDQU Y0, 0(DX)
	VMOVDQU Y1, 32(DX)
	VMOVDQU Y2, 0(R15)
	VMOVDQU Y3, 32(R15)
	JMP  next

c32to64:
	VMOVDQU 0(R11), Y0
	VMOVDQU -32(R11)(R12*1), Y1
	VMOVDQU Y0, 0(DX)
	VMOVDQU Y1, -32(DX)(R12*1)
	JMP  next

lt32:
	CMPQ R12, $16
	JB   lt16
	MOVOU 0(R11), X0
	MOVOU -16(R11)(R12*1), X1
	MOVOU X0, 0(DX)
	MOVOU X1, -16(DX)(R12*1)
	JMP  next

lt16:
	CMPQ R12, $8
	JB   lt8
	MOVQ 0(R11), R14
	MOVQ -8(R11)(R12*1), R15
	MOVQ R14, 0(DX)
	MOVQ R15, -8(DX)(R12*1)
	JMP  next

lt8:
	CMPQ R12, $4
	JB   lt4
	MOVL 0(R11), R14
	MOVL -4(R11)(R12*1), R15
	MOVL R14, 0(DX)
	MOVL R15, -4(DX)(R12*1)
	JMP  next

lt4:
	TESTQ R12, R12
	JZ   next
	CMPQ R12, $2
	JB   one
	MOVWLZX 0(R11), R14
	MOVBLZX -1(R11)(R12*1), R15
	MOVW R14, 0(DX)
	MOVB R15, -1(DX)(R12*1)
	JMP  next

one:
	MOVBLZX 0(R11), R14
	MOVB R14, 0(DX)

next:
	MOVQ R13, AX
	INCQ BX
	ADDQ $24, SI
	JMP  loop

done:
	VZEROUPPER
	MOVQ AX, written+72(FP)
	MOVQ BX, entries+80(FP)
	RET
