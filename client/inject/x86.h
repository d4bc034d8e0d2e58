/* x86.h: an x86-64 instruction decoder, just enough to read what a few of Ruby's functions do. */
#ifndef TRC_X86_H
#define TRC_X86_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Registers as the encoding numbers them: 0 rax, 1 rcx, 2 rdx, 3 rbx, 4 rsp, 5 rbp, 6 rsi,
 * 7 rdi, 8-15 r8-r15. */
enum {
	TRC_X86_RAX = 0, TRC_X86_RCX = 1, TRC_X86_RDX = 2, TRC_X86_RBX = 3, TRC_X86_RSP = 4,
	TRC_X86_RBP = 5, TRC_X86_RSI = 6, TRC_X86_RDI = 7,
	TRC_X86_RIP = 16,       /* base of a RIP-relative operand */
	TRC_X86_NONE = -1,      /* no base or no index register */
};

/* One decoded instruction. Opcodes: 0x00-0xff, 0x0f00-0x0fff, 0x0f3800-0x0f38ff, 0x0f3a00-... */
struct trc_x86 {
	uint8_t len;
	bool lock;              /* F0 */
	bool opsize16;          /* 66 */
	uint8_t rex;            /* 0x40-0x4f, or 0 */
	uint32_t op;
	bool modrm;
	uint8_t mod, reg, rm;   /* reg, and rm when mod == 3, extended by REX to 0-15 */
	bool mem;               /* a memory operand (modrm with mod != 3, or moffs) */
	int8_t base, index;     /* 0-15, TRC_X86_RIP or TRC_X86_NONE */
	uint8_t scale;
	int32_t disp;
	bool has_imm;
	int64_t imm;
	bool has_rel;           /* a direct jump or call: its target is the next instruction + rel */
	int64_t rel;
};

/* REX.W: the operation is 64 bits wide. */
static inline bool
trc_x86_wide(const struct trc_x86 *x)
{
	return (x->rex & 0x08) != 0;
}

/*
 * Decodes the instruction at p (n bytes readable). Returns 0, or -1 when the bytes are not an
 * instruction this decoder knows (VEX, an opcode invalid in 64-bit mode, too short): callers
 * then know nothing, and say so. Pure.
 */
int trc_x86_decode(const uint8_t *p, size_t n, struct trc_x86 *x);

#endif
