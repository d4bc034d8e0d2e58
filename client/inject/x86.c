/* x86.c: x86-64 instruction lengths and operands, from opcode tables (general-purpose and SSE). */
#include "x86.h"

#include <string.h>

/* What follows an opcode byte. */
enum {
	N = 0,          /* nothing */
	M = 1,          /* a ModRM byte (and SIB, displacement) */
	I = 2,          /* an 8-bit immediate */
	Z = 4,          /* a 16/32-bit immediate (16 with the 66 prefix) */
	R8 = 8,         /* an 8-bit relative target */
	R32 = 16,       /* a 32-bit relative target */
	X = 32,         /* invalid in 64-bit mode, or not decoded here (VEX, 3DNow!) */
	P = 64,         /* a prefix */
	S = 128,        /* special: see decode_special() */
	MI = M | I,
	MZ = M | Z,
};

static const uint8_t one_byte[256] = {
	/* 00 */ M, M, M, M, I, Z, X, X, M, M, M, M, I, Z, X, S,
	/* 10 */ M, M, M, M, I, Z, X, X, M, M, M, M, I, Z, X, X,
	/* 20 */ M, M, M, M, I, Z, P, X, M, M, M, M, I, Z, P, X,
	/* 30 */ M, M, M, M, I, Z, P, X, M, M, M, M, I, Z, P, X,
	/* 40 */ P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P,
	/* 50 */ N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N,
	/* 60 */ X, X, X, M, P, P, P, P, Z, MZ, I, MI, N, N, N, N,
	/* 70 */ R8, R8, R8, R8, R8, R8, R8, R8, R8, R8, R8, R8, R8, R8, R8, R8,
	/* 80 */ MI, MZ, X, MI, M, M, M, M, M, M, M, M, M, M, M, M,
	/* 90 */ N, N, N, N, N, N, N, N, N, N, X, N, N, N, N, N,
	/* a0 */ S, S, S, S, N, N, N, N, I, Z, N, N, N, N, N, N,
	/* b0 */ I, I, I, I, I, I, I, I, S, S, S, S, S, S, S, S,
	/* c0 */ MI, MI, S, N, X, X, MI, MZ, S, N, S, N, N, I, X, N,
	/* d0 */ M, M, M, M, X, X, X, N, M, M, M, M, M, M, M, M,
	/* e0 */ R8, R8, R8, R8, I, I, I, I, R32, R32, X, R8, N, N, N, N,
	/* f0 */ P, N, P, P, N, N, S, S, N, N, N, N, N, N, M, M,
};

static const uint8_t two_byte[256] = {
	/* 00 */ M, M, M, M, X, N, N, N, N, N, X, N, X, M, N, X,
	/* 10 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
	/* 20 */ M, M, M, M, X, X, X, X, M, M, M, M, M, M, M, M,
	/* 30 */ N, N, N, N, N, N, N, N, S, X, S, X, X, X, X, X,
	/* 40 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
	/* 50 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
	/* 60 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
	/* 70 */ MI, MI, MI, MI, M, M, M, N, M, M, X, X, M, M, M, M,
	/* 80 */ R32, R32, R32, R32, R32, R32, R32, R32, R32, R32, R32, R32, R32, R32, R32, R32,
	/* 90 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
	/* a0 */ N, N, N, M, MI, M, X, X, N, N, N, M, MI, M, M, M,
	/* b0 */ M, M, M, M, M, M, M, M, M, M, MI, M, M, M, M, M,
	/* c0 */ M, M, MI, M, MI, MI, MI, M, N, N, N, N, N, N, N, N,
	/* d0 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
	/* e0 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
	/* f0 */ M, M, M, M, M, M, M, M, M, M, M, M, M, M, M, M,
};

struct cursor {
	const uint8_t *p;
	size_t n, at;
	bool ok;
};

static uint8_t
byte(struct cursor *c)
{
	if (c->at >= c->n) {
		c->ok = false;
		return 0;
	}
	return c->p[c->at++];
}

/* A little-endian signed value of size bytes (1, 2, 4 or 8). */
static int64_t
take(struct cursor *c, int size)
{
	uint64_t v = 0;

	for (int i = 0; i < size; i++)
		v |= (uint64_t)byte(c) << (8 * i);
	if (size > 0 && size < 8 && (v >> (8 * size - 1)) & 1)
		v |= ~(uint64_t)0 << (8 * size);
	return (int64_t)v;
}

static void
decode_modrm(struct cursor *c, struct trc_x86 *x)
{
	uint8_t m = byte(c), sib;
	int disp = 0;

	x->modrm = true;
	x->mod = m >> 6;
	x->reg = (uint8_t)(((m >> 3) & 7) | ((x->rex & 4) << 1));
	x->rm = (uint8_t)((m & 7) | ((x->rex & 1) << 3));
	x->base = x->index = TRC_X86_NONE;
	if (x->mod == 3)
		return;
	x->mem = true;
	if ((m & 7) == 4) {
		sib = byte(c);
		x->scale = (uint8_t)(1u << (sib >> 6));
		x->index = (int8_t)(((sib >> 3) & 7) | ((x->rex & 2) << 2));
		if (x->index == TRC_X86_RSP)
			x->index = TRC_X86_NONE;
		x->base = (int8_t)((sib & 7) | ((x->rex & 1) << 3));
		if ((sib & 7) == 5 && x->mod == 0) {
			x->base = TRC_X86_NONE;
			disp = 4;
		}
	} else if ((m & 7) == 5 && x->mod == 0) {
		x->base = TRC_X86_RIP;
		disp = 4;
	} else {
		x->base = (int8_t)x->rm;
	}
	if (x->mod == 1)
		disp = 1;
	else if (x->mod == 2)
		disp = 4;
	x->disp = (int32_t)take(c, disp);
}

static void
immediate(struct cursor *c, struct trc_x86 *x, int size)
{
	x->has_imm = true;
	x->imm = take(c, size);
}

static int
zsize(const struct trc_x86 *x)
{
	return x->opsize16 && !trc_x86_wide(x) ? 2 : 4;
}

/* The one-byte opcodes whose operands depend on more than the opcode. */
static void
decode_special(struct cursor *c, struct trc_x86 *x)
{
	uint8_t op = (uint8_t)x->op;

	if (op >= 0xa0 && op <= 0xa3) {         /* mov al/eax, moffs64 */
		x->mem = true;
		x->base = x->index = TRC_X86_NONE;
		x->disp = (int32_t)take(c, 8);
	} else if (op >= 0xb8 && op <= 0xbf) {  /* mov r, imm32/imm64 */
		immediate(c, x, trc_x86_wide(x) ? 8 : zsize(x));
	} else if (op == 0xc2 || op == 0xca) {  /* ret imm16 */
		immediate(c, x, 2);
	} else if (op == 0xc8) {                /* enter imm16, imm8 */
		immediate(c, x, 2);
		(void)byte(c);
	} else {                                /* f6, f7: test r/m, imm; the rest of group 3 has none */
		decode_modrm(c, x);
		if ((x->reg & 7) < 2)
			immediate(c, x, op == 0xf6 ? 1 : zsize(x));
	}
}

/* After 0F: the two- and three-byte maps. Returns the operand flags. */
static uint8_t
escape(struct cursor *c, struct trc_x86 *x)
{
	uint8_t b = byte(c), f = two_byte[b];

	x->op = 0x0f00u | b;
	if (f != S)
		return f;
	x->op = (b == 0x38 ? 0x0f3800u : 0x0f3a00u) | byte(c);
	return b == 0x38 ? M : MI;
}

static void
operands(struct cursor *c, struct trc_x86 *x, uint8_t f)
{
	if (f & M)
		decode_modrm(c, x);
	if (f & I)
		immediate(c, x, 1);
	if (f & Z)
		immediate(c, x, zsize(x));
	if (f & (R8 | R32)) {
		x->has_rel = true;
		x->rel = take(c, f & R8 ? 1 : 4);
	}
}

int
trc_x86_decode(const uint8_t *p, size_t n, struct trc_x86 *x)
{
	struct cursor c = { .p = p, .n = n > 15 ? 15 : n, .ok = true };
	uint8_t b, f;

	memset(x, 0, sizeof(*x));
	x->base = x->index = TRC_X86_NONE;
	for (;;) {                      /* legacy prefixes, then at most one REX right before the opcode */
		b = byte(&c);
		f = one_byte[b];
		if (!c.ok || f != P)
			break;
		if (b >= 0x40 && b <= 0x4f) {
			x->rex = b;
			continue;
		}
		if (x->rex != 0)        /* a legacy prefix after REX cancels it: not what compilers emit */
			return -1;
		x->lock |= b == 0xf0;
		x->opsize16 |= b == 0x66;
	}
	x->op = b;
	if (b == 0x0f)
		f = escape(&c, x);
	if (f & X)
		return -1;
	if (f == S)
		decode_special(&c, x);
	else
		operands(&c, x, f);
	if (!c.ok)
		return -1;
	x->len = (uint8_t)c.at;
	return 0;
}
