/* test_x86.c: the instruction decoder on encodings of each kind it meets in Ruby's functions. */
#include <stdint.h>

#include "test.h"
#include "x86.h"

struct sample {
	const char *what;
	uint8_t bytes[15];
	uint8_t len;
};

/* Lengths: prefixes, REX, ModRM/SIB/displacements, immediates, the 0F maps. */
static void
lengths(void)
{
	static const struct sample s[] = {
		{ "endbr64", { 0xf3, 0x0f, 0x1e, 0xfa }, 4 },
		{ "push %r12", { 0x41, 0x54 }, 2 },
		{ "lea 0x10(%rip),%rax", { 0x48, 0x8d, 0x05, 0x10, 0, 0, 0 }, 7 },
		{ "mov 0x3e0(%r12),%ecx (SIB)", { 0x41, 0x8b, 0x8c, 0x24, 0xe0, 0x03, 0, 0 }, 8 },
		{ "lock orl $4,0x20(%rsi)", { 0xf0, 0x83, 0x4e, 0x20, 0x04 }, 5 },
		{ "lock cmpxchg %edx,0x3e0(%r12)", { 0xf0, 0x41, 0x0f, 0xb1, 0x94, 0x24, 0xe0, 0x03, 0, 0 }, 10 },
		{ "data16 data16 rex.W call rel32", { 0x66, 0x66, 0x48, 0xe8, 1, 2, 3, 4 }, 8 },
		{ "je rel32", { 0x0f, 0x84, 0x90, 0, 0, 0 }, 6 },
		{ "cmp $0x3ff,%ecx", { 0x81, 0xf9, 0xff, 0x03, 0, 0 }, 6 },
		{ "mov $1,%eax", { 0xb8, 1, 0, 0, 0 }, 5 },
		{ "movabs $imm64,%rax", { 0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8 }, 10 },
		{ "mov $1,%ax (66)", { 0x66, 0xb8, 1, 0 }, 4 },
		{ "nopw 0(%rax,%rax,1)", { 0x66, 0x0f, 0x1f, 0x44, 0, 0 }, 6 },
		{ "data16 cs nopw", { 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0 }, 10 },
		{ "test $0x10,%al... f6 /0 ib", { 0xf6, 0xc0, 0x10 }, 3 },
		{ "neg %eax: f7 /3, no immediate", { 0xf7, 0xd8 }, 2 },
		{ "pshufd: 66 0f 70 /r ib", { 0x66, 0x0f, 0x70, 0xc0, 0x1b }, 5 },
		{ "pshufb: 66 0f 38 00 /r", { 0x66, 0x0f, 0x38, 0x00, 0xc1 }, 5 },
		{ "palignr: 66 0f 3a 0f /r ib", { 0x66, 0x0f, 0x3a, 0x0f, 0xc1, 0x08 }, 6 },
		{ "mov %fs:0x28,%rax (64 prefix, SIB no base)", { 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0 }, 9 },
		{ "ret", { 0xc3 }, 1 },
	};
	struct trc_x86 x;

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		test_cond(s[i].what, trc_x86_decode(s[i].bytes, sizeof(s[i].bytes), &x) == 0 && x.len == s[i].len);
}

/* The operands the callers look at. */
static void
operands(void)
{
	static const uint8_t lea[] = { 0x48, 0x8d, 0x05, 0xfd, 0x7a, 0x1d, 0x00 };
	static const uint8_t load[] = { 0x49, 0x8b, 0x84, 0x24, 0xd8, 0x03, 0, 0 };
	static const uint8_t lock_or[] = { 0xf0, 0x09, 0x82, 0x00, 0x02, 0, 0 };
	static const uint8_t jb[] = { 0x74, 0xf0 };
	struct trc_x86 x;

	test_cond("lea: RIP-relative, wide, into rax",
		  trc_x86_decode(lea, sizeof(lea), &x) == 0 && x.op == 0x8d && x.base == TRC_X86_RIP &&
		  x.disp == 0x1d7afd && x.reg == TRC_X86_RAX && trc_x86_wide(&x));
	test_cond("mov 0x3d8(%r12),%rax: base r12 through SIB",
		  trc_x86_decode(load, sizeof(load), &x) == 0 && x.op == 0x8b && x.base == 12 &&
		  x.index == TRC_X86_NONE && x.disp == 0x3d8 && x.reg == TRC_X86_RAX);
	test_cond("lock or %eax,0x200(%rdx): locked, 32 bits",
		  trc_x86_decode(lock_or, sizeof(lock_or), &x) == 0 && x.lock && x.op == 0x09 &&
		  x.base == TRC_X86_RDX && x.disp == 0x200 && !trc_x86_wide(&x));
	test_cond("je back: a negative relative target",
		  trc_x86_decode(jb, sizeof(jb), &x) == 0 && x.has_rel && x.rel == -16);
}

/* What it does not know is said, not guessed. */
static void
unknown(void)
{
	static const uint8_t vex[] = { 0xc5, 0xf8, 0x77 };      /* vzeroupper */
	static const uint8_t old[] = { 0x06 };                  /* push %es: not in 64-bit mode */
	static const uint8_t cut[] = { 0x48, 0x8b, 0x84 };      /* a SIB and displacement missing */
	struct trc_x86 x;

	test_cond("VEX is refused", trc_x86_decode(vex, sizeof(vex), &x) < 0);
	test_cond("an opcode invalid in 64-bit mode is refused", trc_x86_decode(old, sizeof(old), &x) < 0);
	test_cond("a cut instruction is refused", trc_x86_decode(cut, sizeof(cut), &x) < 0);
}

void
test_x86(void)
{
	lengths();
	operands();
	unknown();
}
