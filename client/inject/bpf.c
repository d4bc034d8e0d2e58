/* bpf.c: a classic BPF interpreter for seccomp filters: the instructions seccomp accepts, no more. */
#include "bpf.h"

#include <string.h>

/* The instruction classes and fields of linux/filter.h (bpf_common.h), spelt out: pure C here. */
#define CLASS(c) ((c) & 0x07)
#define SIZE(c) ((c) & 0x18)
#define MODE(c) ((c) & 0xe0)
#define OP(c) ((c) & 0xf0)
#define SRC(c) ((c) & 0x08)
#define RVAL(c) ((c) & 0x18)
#define MISCOP(c) ((c) & 0xf8)

enum { LD = 0x00, LDX = 0x01, ST = 0x02, STX = 0x03, ALU = 0x04, JMP = 0x05, RET = 0x06, MISC = 0x07 };
enum { W = 0x00 };
enum { IMM = 0x00, ABS = 0x20, MEM = 0x60, LEN = 0x80 };
enum { ADD = 0x00, SUB = 0x10, MUL = 0x20, DIV = 0x30, OR = 0x40, AND = 0x50, LSH = 0x60, RSH = 0x70,
       NEG = 0x80, MOD = 0x90, XOR = 0xa0 };
enum { JA = 0x00, JEQ = 0x10, JGT = 0x20, JGE = 0x30, JSET = 0x40 };
enum { K = 0x00, X = 0x08 };
enum { RET_K = 0x00, RET_A = 0x10 };
enum { TAX = 0x00, TXA = 0x80 };

#define MEMWORDS 16

struct vm {
	uint32_t a, x, m[MEMWORDS];
	unsigned char data[sizeof(struct trc_seccomp_data)];
};

/* A 32-bit word of seccomp_data, in the machine's byte order (the kernel's load is native). */
static int
load_abs(const struct vm *v, uint32_t k, uint32_t *out)
{
	if (k >= sizeof(v->data) || k % 4 != 0)
		return -1;
	memcpy(out, v->data + k, 4);
	return 0;
}

static int
ld(struct vm *v, const struct trc_bpf_insn *in, uint32_t *dst)
{
	if (SIZE(in->code) != W)
		return -1;
	switch (MODE(in->code)) {
	case IMM:
		*dst = in->k;
		return 0;
	case ABS:
		return CLASS(in->code) == LD ? load_abs(v, in->k, dst) : -1;
	case MEM:
		if (in->k >= MEMWORDS)
			return -1;
		*dst = v->m[in->k];
		return 0;
	case LEN:
		*dst = (uint32_t)sizeof(v->data);
		return 0;
	default:
		return -1;      /* IND, MSH and byte or half-word loads: seccomp refuses them */
	}
}

/* 1: the filter returns 0 here (a division by an X of zero ends it so), else 0; -1 invalid. */
static int
alu(struct vm *v, const struct trc_bpf_insn *in)
{
	uint32_t b = SRC(in->code) == X ? v->x : in->k;

	switch (OP(in->code)) {
	case ADD: v->a += b; return 0;
	case SUB: v->a -= b; return 0;
	case MUL: v->a *= b; return 0;
	case OR: v->a |= b; return 0;
	case AND: v->a &= b; return 0;
	case XOR: v->a ^= b; return 0;
	case LSH:
	case RSH:
		/* The kernel refuses a constant shift of 32 or more, and masks a register's. */
		if (SRC(in->code) == K && b >= 32)
			return -1;
		v->a = OP(in->code) == LSH ? v->a << (b & 31) : v->a >> (b & 31);
		return 0;
	case NEG: v->a = (uint32_t)-v->a; return 0;
	case DIV:
	case MOD:
		if (b == 0)
			return SRC(in->code) == X ? 1 : -1;
		v->a = OP(in->code) == DIV ? v->a / b : v->a % b;
		return 0;
	default:
		return -1;
	}
}

static int
jump(const struct vm *v, const struct trc_bpf_insn *in, size_t *pc)
{
	uint32_t b = SRC(in->code) == X ? v->x : in->k;
	int taken;

	switch (OP(in->code)) {
	case JA:
		*pc += in->k;
		return 0;
	case JEQ: taken = v->a == b; break;
	case JGT: taken = v->a > b; break;
	case JGE: taken = v->a >= b; break;
	case JSET: taken = (v->a & b) != 0; break;
	default:
		return -1;
	}
	*pc += taken ? in->jt : in->jf;
	return 0;
}

/* One instruction: 1 returned (*ret set), 0 on to the next (*pc moved), -1 invalid. */
static int
step(struct vm *v, const struct trc_bpf_insn *in, size_t *pc, uint32_t *ret)
{
	int r;

	switch (CLASS(in->code)) {
	case LD:
		return ld(v, in, &v->a);
	case LDX:
		return ld(v, in, &v->x);
	case ST:
	case STX:
		if (in->k >= MEMWORDS)
			return -1;
		v->m[in->k] = CLASS(in->code) == ST ? v->a : v->x;
		return 0;
	case ALU:
		if ((r = alu(v, in)) == 1)
			*ret = 0;
		return r;
	case JMP:
		return jump(v, in, pc);
	case RET:
		if (RVAL(in->code) != RET_K && RVAL(in->code) != RET_A)
			return -1;
		*ret = RVAL(in->code) == RET_K ? in->k : v->a;
		return 1;
	default:        /* MISC */
		if (MISCOP(in->code) != TAX && MISCOP(in->code) != TXA)
			return -1;
		if (MISCOP(in->code) == TAX)
			v->x = v->a;
		else
			v->a = v->x;
		return 0;
	}
}

int
trc_bpf_run(const struct trc_bpf_insn *prog, size_t n, const struct trc_seccomp_data *d, uint32_t *ret)
{
	struct vm v;
	size_t pc = 0;
	int r;

	if (n == 0 || n > TRC_BPF_MAX_INSNS)
		return -1;
	memset(&v, 0, sizeof(v));
	memcpy(v.data, d, sizeof(v.data));
	/* Jumps go forward only (k and jt/jf are unsigned): at most n steps. */
	while (pc < n) {
		const struct trc_bpf_insn *in = &prog[pc++];

		if ((r = step(&v, in, &pc, ret)) != 0)
			return r < 0 ? -1 : 0;
	}
	return -1;
}
