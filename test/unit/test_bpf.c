/* test_bpf.c: the classic BPF interpreter, instruction by instruction, and what it refuses. */
#include <stdint.h>

#include "bpf.h"
#include "test.h"

/* linux/filter.h's codes, spelt out as bpf.c does. */
#define LD_W_ABS 0x20
#define LD_W_LEN 0x80
#define LDX_W_LEN 0x81
#define LD_IMM 0x00
#define LDX_IMM 0x01
#define LD_MEM 0x60
#define LDX_MEM 0x61
#define ST 0x02
#define STX 0x03
#define ALU_K(op) (0x04 | (op))
#define ALU_X(op) (0x0c | (op))
#define JMP_K(op) (0x05 | (op))
#define JMP_X(op) (0x0d | (op))
#define RET_K 0x06
#define RET_A 0x16
#define TAX 0x07
#define TXA 0x87

#define INSN(c, t, f, kk) { .code = (c), .jt = (t), .jf = (f), .k = (kk) }
#define N(p) (sizeof(p) / sizeof((p)[0]))

static struct trc_seccomp_data
data(int nr, uint64_t a0)
{
	struct trc_seccomp_data d = { .nr = nr, .arch = 0xc000003e, .args = { a0 } };

	return d;
}

static int
run(const struct trc_bpf_insn *p, size_t n, const struct trc_seccomp_data *d, uint32_t *ret)
{
	*ret = 0xdeadbeef;
	return trc_bpf_run(p, n, d, ret);
}

static void
loads_and_jumps(void)
{
	/* A filter of the usual shape: arch, then the number, one call answered apart. */
	static const struct trc_bpf_insn p[] = {
		INSN(LD_W_ABS, 0, 0, 4), INSN(JMP_K(0x10), 1, 0, 0xc000003e), INSN(RET_K, 0, 0, 0),
		INSN(LD_W_ABS, 0, 0, 0), INSN(JMP_K(0x10), 0, 1, 41), INSN(RET_K, 0, 0, 0x80000000),
		INSN(RET_K, 0, 0, 0x7fff0000),
	};
	struct trc_seccomp_data d = data(41, 0);
	uint32_t r;

	test_note("a filter of the usual shape");
	test_cond("socket is killed", run(p, N(p), &d, &r) == 0 && r == 0x80000000);
	d.nr = 0;
	test_cond("read is allowed", run(p, N(p), &d, &r) == 0 && r == 0x7fff0000);
	d.arch = 0x40000003;
	test_cond("another arch is killed (thread)", run(p, N(p), &d, &r) == 0 && r == 0);
}

static void
arguments(void)
{
	/* args[0]'s low word at 16, its high word at 20 (little-endian). */
	static const struct trc_bpf_insn p[] = {
		INSN(LD_W_ABS, 0, 0, 16), INSN(JMP_K(0x40), 0, 1, 0x10000), INSN(RET_K, 0, 0, 1),
		INSN(LD_W_ABS, 0, 0, 20), INSN(JMP_K(0x30), 0, 1, 2), INSN(RET_K, 0, 0, 2), INSN(RET_K, 0, 0, 3),
	};
	struct trc_seccomp_data d = data(56, 0x3d0f00);
	uint32_t r;

	test_note("arguments, JSET and JGE");
	test_cond("thread flags: CLONE_THREAD set", run(p, N(p), &d, &r) == 0 && r == 1);
	d.args[0] = 0x200000000ull;
	test_cond("high word >= 2", run(p, N(p), &d, &r) == 0 && r == 2);
	d.args[0] = 0x100000000ull;
	test_cond("high word 1", run(p, N(p), &d, &r) == 0 && r == 3);
}

static void
alu_and_memory(void)
{
	static const struct trc_bpf_insn p[] = {
		INSN(LD_IMM, 0, 0, 7), INSN(ST, 0, 0, 3), INSN(LDX_IMM, 0, 0, 5), INSN(ALU_X(0x00), 0, 0, 0), /* 12 */
		INSN(ALU_K(0x20), 0, 0, 3), INSN(ALU_K(0x10), 0, 0, 1), INSN(ALU_K(0x30), 0, 0, 5),   /* 35/5=7 */
		INSN(ALU_K(0x90), 0, 0, 4), INSN(ALU_K(0x60), 0, 0, 4), INSN(ALU_K(0x70), 0, 0, 1),    /* 3<<4>>1=24 */
		INSN(ALU_K(0x40), 0, 0, 1), INSN(ALU_K(0x50), 0, 0, 0xfd), INSN(ALU_K(0xa0), 0, 0, 0xff), /* 25&fd=25^ff=230 */
		INSN(TAX, 0, 0, 0), INSN(LD_MEM, 0, 0, 3), INSN(ALU_X(0x00), 0, 0, 0),                  /* 7+230, then -230 */
		INSN(STX, 0, 0, 0), INSN(LDX_MEM, 0, 0, 0), INSN(TXA, 0, 0, 0), INSN(ALU_K(0x80), 0, 0, 0),
		INSN(RET_A, 0, 0, 0),
	};
	static const struct trc_bpf_insn len[] = { INSN(LDX_W_LEN, 0, 0, 0), INSN(LD_W_LEN, 0, 0, 0), INSN(JMP_X(0x10), 1, 0, 0),
						   INSN(RET_K, 0, 0, 0), INSN(RET_K, 0, 0, 64) };
	static const struct trc_bpf_insn ja[] = { INSN(JMP_K(0x00), 0, 0, 1), INSN(RET_K, 0, 0, 1), INSN(RET_K, 0, 0, 2) };
	static const struct trc_bpf_insn divx[] = { INSN(LDX_IMM, 0, 0, 0), INSN(LD_IMM, 0, 0, 9), INSN(ALU_X(0x30), 0, 0, 0),
						    INSN(RET_K, 0, 0, 5) };
	struct trc_seccomp_data d = data(0, 0);
	uint32_t r;

	test_note("arithmetic, scratch memory, TAX/TXA, NEG, LEN, JA");
	test_cond("the sum", run(p, N(p), &d, &r) == 0 && r == (uint32_t)-230);
	test_cond("LEN is 64", run(len, N(len), &d, &r) == 0 && r == 64);
	test_cond("JA skips", run(ja, N(ja), &d, &r) == 0 && r == 2);
	test_cond("division by an X of 0 returns 0 (kill thread)", run(divx, N(divx), &d, &r) == 0 && r == 0);
}

static void
refused(void)
{
	static const struct trc_bpf_insn off[] = { INSN(LD_W_ABS, 0, 0, 64), INSN(RET_A, 0, 0, 0) };
	static const struct trc_bpf_insn odd[] = { INSN(LD_W_ABS, 0, 0, 2), INSN(RET_A, 0, 0, 0) };
	static const struct trc_bpf_insn byte[] = { INSN(0x30, 0, 0, 0), INSN(RET_A, 0, 0, 0) };         /* LD B ABS */
	static const struct trc_bpf_insn ind[] = { INSN(0x40, 0, 0, 0), INSN(RET_A, 0, 0, 0) };          /* LD W IND */
	static const struct trc_bpf_insn past[] = { INSN(JMP_K(0x10), 5, 5, 0), INSN(RET_A, 0, 0, 0) };
	static const struct trc_bpf_insn noret[] = { INSN(LD_IMM, 0, 0, 1) };
	static const struct trc_bpf_insn mem[] = { INSN(LD_MEM, 0, 0, 16), INSN(RET_A, 0, 0, 0) };
	static const struct trc_bpf_insn divk[] = { INSN(ALU_K(0x30), 0, 0, 0), INSN(RET_A, 0, 0, 0) };
	static const struct trc_bpf_insn shift[] = { INSN(ALU_K(0x60), 0, 0, 32), INSN(RET_A, 0, 0, 0) };
	static const struct trc_bpf_insn badjmp[] = { INSN(JMP_K(0x50), 0, 0, 0), INSN(RET_A, 0, 0, 0) };
	struct trc_seccomp_data d = data(0, 0);
	uint32_t r;

	test_note("programs the kernel would not take");
	test_cond("a load past seccomp_data", run(off, N(off), &d, &r) < 0);
	test_cond("an unaligned load", run(odd, N(odd), &d, &r) < 0);
	test_cond("a byte load", run(byte, N(byte), &d, &r) < 0);
	test_cond("an indirect load", run(ind, N(ind), &d, &r) < 0);
	test_cond("a jump past the end", run(past, N(past), &d, &r) < 0);
	test_cond("no return", run(noret, N(noret), &d, &r) < 0);
	test_cond("scratch word 16", run(mem, N(mem), &d, &r) < 0);
	test_cond("a division by a constant 0", run(divk, N(divk), &d, &r) < 0);
	test_cond("a constant shift of 32", run(shift, N(shift), &d, &r) < 0);
	test_cond("an unknown jump", run(badjmp, N(badjmp), &d, &r) < 0);
	test_cond("an empty program", run(off, 0, &d, &r) < 0);
	test_cond("a program too long", run(off, TRC_BPF_MAX_INSNS + 1, &d, &r) < 0);
}

void
test_bpf(void)
{
	loads_and_jumps();
	arguments();
	alu_and_memory();
	refused();
}
