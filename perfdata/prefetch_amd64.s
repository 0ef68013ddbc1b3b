#include "textflag.h"

// func prefetch(b []byte)
// Asks the CPU to bring the first 512 bytes of b and its last 64 into the
// cache (PREFETCHT0: hints, never faults). b is non-empty.
TEXT ·prefetch(SB), NOSPLIT, $0-24
	MOVQ b_base+0(FP), AX
	MOVQ b_len+8(FP), BX
	PREFETCHT0 0(AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	PREFETCHT0 256(AX)
	PREFETCHT0 320(AX)
	PREFETCHT0 384(AX)
	PREFETCHT0 448(AX)
	PREFETCHT0 -8(AX)(BX*1)
	RET
