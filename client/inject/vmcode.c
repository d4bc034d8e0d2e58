/* vmcode.c: follows a Ruby function's instructions and what its registers hold, to name VM offsets. */
#include "vmcode.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "x86.h"

#define MAX_INSNS 256           /* per function: the postponed-job functions have 20 to 60 */
#define MAX_PENDING 32          /* branch targets not yet followed */
#define MAX_PAIRS 2

/* What a register is known to hold, as far as this matters here. */
enum role {
	R_UNKNOWN = 0,
	R_ADDR,         /* a known address (lea of a RIP-relative one, or what a GOT slot holds) */
	R_VM,           /* the rb_vm_t pointer: what ruby_current_vm_ptr holds */
	R_VMFIELD,      /* a pointer loaded from the VM at offset v */
};

struct reg {
	enum role role;
	uint64_t v;
};

struct state {
	struct reg r[16];
};

struct walk {
	const struct trc_mem *mem;
	uint64_t lo, hi;                /* the function's extent when known; hi 0: unknown */
	uint32_t mask;
	bool callee;                    /* in the function called with the VM */
	uint64_t seen[MAX_INSNS];
	size_t nseen;
	struct {
		uint64_t at;
		struct state st;
	} pending[MAX_PENDING];
	size_t npending;
	struct trc_vmcode *out;
	int npairs;
	bool conflict;
	char *why;
	size_t whylen;
};

static int __attribute__((format(printf, 2, 3)))
fail(struct walk *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->why, w->whylen, fmt, ap);
	va_end(ap);
	return -1;
}

/* Sets a fact, or notes that the code named two different values for it. */
static void
fact(struct walk *w, int64_t *slot, int64_t v)
{
	if (*slot != TRC_VMCODE_NONE && *slot != v)
		w->conflict = true;
	*slot = v;
}

static void
vm_load(struct walk *w, int64_t off)
{
	struct trc_vmcode *o = w->out;

	for (int i = 0; i < o->nvm_loads; i++)
		if (o->vm_loads[i] == off)
			return;
	if (o->nvm_loads < (int)(sizeof(o->vm_loads) / sizeof(o->vm_loads[0])))
		o->vm_loads[o->nvm_loads++] = off;
	else
		w->conflict = true;
}

/* In the callee: a pointer loaded from the VM, then a pointer loaded from what it points to. */
static void
pair(struct walk *w, int64_t first, int64_t second)
{
	struct trc_vmcode *o = w->out;

	if (!w->callee)
		return;
	if (w->npairs == 0) {
		fact(w, &o->vm_main_ractor, first);
		fact(w, &o->ractor_running_ec, second);
	} else if (w->npairs == 1) {
		fact(w, &o->vm_main_thread, first);
		fact(w, &o->thread_ec, second);
	} else {
		w->conflict = true;
	}
	w->npairs++;
}

static void
set(struct state *st, int r, enum role role, uint64_t v)
{
	st->r[r].role = role;
	st->r[r].v = v;
}

static bool
seen(struct walk *w, uint64_t at)
{
	for (size_t i = 0; i < w->nseen; i++)
		if (w->seen[i] == at)
			return true;
	return false;
}

static void
push(struct walk *w, uint64_t at, const struct state *st)
{
	if (w->npending == MAX_PENDING) {
		w->conflict = true;
		return;
	}
	w->pending[w->npending].at = at;
	w->pending[w->npending].st = *st;
	w->npending++;
}

static void
clobber_call(struct state *st)
{
	static const int volatile_regs[] = { 0, 1, 2, 6, 7, 8, 9, 10, 11 };

	for (size_t i = 0; i < sizeof(volatile_regs) / sizeof(volatile_regs[0]); i++)
		set(st, volatile_regs[i], R_UNKNOWN, 0);
}

/* mov r64, r/m64: the loads that matter are from RIP-relative addresses, the VM, VM fields. */
static void
apply_load(struct walk *w, const struct trc_x86 *x, struct state *st, uint64_t next)
{
	uint64_t v;
	/* A copy: the destination may be the base register itself. */
	struct reg base = x->base >= 0 && x->base < 16 ? st->r[x->base] : (struct reg){ R_UNKNOWN, 0 };
	const struct reg *b = x->base >= 0 && x->base < 16 ? &base : NULL;

	if (!x->mem) {
		st->r[x->reg] = st->r[x->rm];
		return;
	}
	set(st, x->reg, R_UNKNOWN, 0);
	if (x->index != TRC_X86_NONE)
		return;
	if (x->base == TRC_X86_RIP) {
		/* A GOT slot (3.1 reaches ruby_current_vm_ptr through one): what the loader put there. */
		if (w->mem->read(w->mem->ctx, next + (uint64_t)(int64_t)x->disp, &v, sizeof(v)) == 0)
			set(st, x->reg, R_ADDR, v);
	} else if (b != NULL && b->role == R_ADDR && x->disp == 0) {
		if (w->out->vm_ptr != 0 && w->out->vm_ptr != b->v)
			w->conflict = true;
		w->out->vm_ptr = b->v;
		set(st, x->reg, R_VM, 0);
	} else if (b != NULL && b->role == R_VM) {
		if (!w->callee)
			vm_load(w, x->disp);
		set(st, x->reg, R_VMFIELD, (uint64_t)(int64_t)x->disp);
	} else if (b != NULL && b->role == R_VMFIELD) {
		pair(w, (int64_t)b->v, x->disp);
	}
}

static enum role
base_role(const struct trc_x86 *x, const struct state *st)
{
	return x->mem && x->base >= 0 && x->base < 16 && x->index == TRC_X86_NONE ? st->r[x->base].role
										    : R_UNKNOWN;
}

/* The locked read-modify-writes: the facts themselves. */
static void
apply_lock(struct walk *w, const struct trc_x86 *x, const struct state *st)
{
	enum role r = base_role(x, st);
	struct trc_vmcode *o = w->out;

	if (x->op == 0x0fb1 && r == R_VM && !trc_x86_wide(x))
		fact(w, &o->pj_index, x->disp);         /* CAS of postponed_job_index */
	else if (x->op == 0x09 && r == R_VMFIELD && !trc_x86_wide(x)) {
		fact(w, &o->pj_queue, (int64_t)st->r[x->base].v);
		fact(w, &o->pj_bitset, x->disp);        /* OR into triggered_bitset */
	} else if (x->op == 0x83 && (x->reg & 7) == 1 && x->imm == (int64_t)w->mask && x->mem &&
		   r != R_VM && r != R_VMFIELD)
		fact(w, &o->ec_interrupt_flag, x->disp); /* RUBY_VM_SET_POSTPONED_JOB_INTERRUPT */
}

/* Whether a ModRM instruction writes its reg operand (op is one-byte or 0F-prefixed). */
static bool
writes_reg(uint32_t op)
{
	static const uint32_t no[] = { 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8c, 0x8e, 0x8f, 0x80,
				       0x81, 0x83, 0xc0, 0xc1, 0xc6, 0xc7, 0xd0, 0xd1, 0xd2, 0xd3,
				       0xf6, 0xf7, 0xfe, 0xff, 0x0f1e, 0x0f1f, 0x0f11, 0x0fb1 };

	if (op < 0x40 && (op & 7) < 4)
		return (op & 2) != 0 && (op & 0x38) != 0x38;    /* ALU r, r/m; cmp writes nothing */
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (no[i] == op)
			return false;
	return true;
}

/* Any other instruction: what it may write is no longer known. */
static void
apply_other(const struct trc_x86 *x, struct state *st)
{
	uint32_t op = x->op;

	if (x->modrm) {
		bool reads_only = op == 0x84 || op == 0x85 || (op >= 0x38 && op <= 0x3b) ||
				  ((op >= 0x80 && op <= 0x83) && (x->reg & 7) == 7);
		if (!x->mem && !reads_only)
			set(st, x->rm, R_UNKNOWN, 0);
		if (writes_reg(op))
			set(st, x->reg, R_UNKNOWN, 0);
		if (op == 0x0fb1 || op == 0xf6 || op == 0xf7) {
			set(st, TRC_X86_RAX, R_UNKNOWN, 0);
			set(st, TRC_X86_RDX, R_UNKNOWN, 0);
		}
	} else if ((op >= 0x58 && op <= 0x5f) || (op >= 0xb0 && op <= 0xbf) ||
		   (op >= 0x90 && op <= 0x97 && (op != 0x90 || (x->rex & 1u)))) {
		/* pop r, mov r, imm, xchg rax, r (0x90 alone is nop) */
		set(st, (int)((op & 7) | ((x->rex & 1u) << 3)), R_UNKNOWN, 0);
		if (op >= 0x90 && op <= 0x97)
			set(st, TRC_X86_RAX, R_UNKNOWN, 0);
	} else if (op == 0x98 || op == 0x99) {
		set(st, TRC_X86_RAX, R_UNKNOWN, 0);
		set(st, TRC_X86_RDX, R_UNKNOWN, 0);
	}
}

static int walk_function(struct walk *w, uint64_t entry, const struct state *st0);

/* A direct call: the one that takes the VM in rdi is the main Ractor's EC lookup. */
static int
apply_call(struct walk *w, uint64_t target, struct state *st)
{
	struct walk sub;
	struct state in;

	if (!w->callee && st->r[TRC_X86_RDI].role == R_VM) {
		memset(&sub, 0, sizeof(sub));
		sub.mem = w->mem;
		sub.mask = w->mask;
		sub.callee = true;
		sub.out = w->out;
		sub.why = w->why;
		sub.whylen = w->whylen;
		memset(&in, 0, sizeof(in));
		set(&in, TRC_X86_RDI, R_VM, 0);
		if (walk_function(&sub, target, &in) < 0)
			return -1;
		w->conflict |= sub.conflict;
	}
	clobber_call(st);
	return 0;
}

static bool
is_jcc(uint32_t op)
{
	return (op >= 0x70 && op <= 0x7f) || (op >= 0x0f80 && op <= 0x0f8f) || (op >= 0xe0 && op <= 0xe3);
}

/* One instruction's effect. Returns 1 when its path ends here, 0 to go on at *next. */
static int
step(struct walk *w, const struct trc_x86 *x, struct state *st, uint64_t *next)
{
	uint64_t target = *next + (uint64_t)x->rel;

	if (x->op == 0xc3 || x->op == 0xc2 || (x->op == 0xff && ((x->reg & 7) == 4 || (x->reg & 7) == 5)))
		return 1;
	if (x->op == 0xe9 || x->op == 0xeb) {
		if (w->hi != 0 && (target < w->lo || target >= w->hi))
			return 1;       /* a tail call out of the function */
		*next = target;
		return 0;
	}
	if (is_jcc(x->op)) {
		push(w, target, st);
		return 0;
	}
	if (x->op == 0xe8)
		return apply_call(w, target, st) < 0 ? -1 : 0;
	if (x->op == 0xff && (x->reg & 7) == 2) {
		clobber_call(st);
		return 0;
	}
	if (x->lock)
		apply_lock(w, x, st);
	if (x->op == 0x8d && trc_x86_wide(x))
		set(st, x->reg, x->base == TRC_X86_RIP && x->index == TRC_X86_NONE ? R_ADDR : R_UNKNOWN,
		    *next + (uint64_t)(int64_t)x->disp);
	else if (x->op == 0x8b && trc_x86_wide(x))
		apply_load(w, x, st, *next);
	else if (x->op == 0x89 && !x->mem)
		st->r[x->rm] = trc_x86_wide(x) ? st->r[x->reg] : (struct reg){ R_UNKNOWN, 0 };
	else if (x->op == 0x03 && trc_x86_wide(x) && base_role(x, st) == R_VM) {
		vm_load(w, x->disp);
		set(st, x->reg, R_UNKNOWN, 0);
	} else if (x->op != 0x89)
		apply_other(x, st);
	return 0;
}

static int
walk_path(struct walk *w, uint64_t at, struct state *st)
{
	uint8_t code[16];
	struct trc_x86 x;
	uint64_t next;
	int end;

	while (!seen(w, at)) {
		if (w->nseen == MAX_INSNS)
			return fail(w, "more than %d instructions from %#llx", MAX_INSNS,
				    (unsigned long long)w->lo);
		w->seen[w->nseen++] = at;
		if (w->mem->read(w->mem->ctx, at, code, sizeof(code)) < 0)
			return fail(w, "cannot read the code at %#llx", (unsigned long long)at);
		if (trc_x86_decode(code, sizeof(code), &x) < 0)
			return fail(w, "an instruction this decoder does not know at %#llx (%02x %02x %02x)",
				    (unsigned long long)at, code[0], code[1], code[2]);
		next = at + x.len;
		if ((end = step(w, &x, st, &next)) != 0)
			return end < 0 ? -1 : 0;
		at = next;
	}
	return 0;
}

static int
walk_function(struct walk *w, uint64_t entry, const struct state *st0)
{
	struct state st;

	w->lo = entry;
	push(w, entry, st0);
	while (w->npending > 0) {
		w->npending--;
		st = w->pending[w->npending].st;
		if (walk_path(w, w->pending[w->npending].at, &st) < 0)
			return -1;
	}
	return 0;
}

static void
init_out(struct trc_vmcode *o)
{
	memset(o, 0, sizeof(*o));
	o->pj_buffer = o->pj_index = o->pj_queue = o->pj_bitset = TRC_VMCODE_NONE;
	o->ec_interrupt_flag = o->vm_main_ractor = o->ractor_running_ec = TRC_VMCODE_NONE;
	o->vm_main_thread = o->thread_ec = TRC_VMCODE_NONE;
}

int
trc_vmcode_read(const struct trc_mem *mem, uint64_t addr, uint64_t size, uint32_t mask,
		struct trc_vmcode *out, char *why, size_t whylen)
{
	struct walk w;
	struct state st;

	init_out(out);
	memset(&w, 0, sizeof(w));
	memset(&st, 0, sizeof(st));
	w.mem = mem;
	w.mask = mask;
	w.out = out;
	w.why = why;
	w.whylen = whylen;
	w.hi = size ? addr + size : 0;
	if (walk_function(&w, addr, &st) < 0)
		return -1;
	if (w.conflict)
		return fail(&w, "the code at %#llx names two values for one offset", (unsigned long long)addr);
	if (out->pj_index != TRC_VMCODE_NONE && out->pj_queue != TRC_VMCODE_NONE)
		return fail(&w, "the code at %#llx has both a postponed-job buffer and a queue",
			    (unsigned long long)addr);
	if (out->pj_index != TRC_VMCODE_NONE) {
		out->kind = TRC_PJ_BUFFER;
		if (out->nvm_loads == 1)
			out->pj_buffer = out->vm_loads[0];
	} else if (out->pj_queue != TRC_VMCODE_NONE) {
		out->kind = TRC_PJ_QUEUE;
	}
	errno = 0;
	return 0;
}
