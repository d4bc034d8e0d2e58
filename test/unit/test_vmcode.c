/*
 * test_vmcode.c: reading VM offsets out of machine code, and checking them against the table.
 * The code read is this test's own: functions written below in assembly, in the two shapes
 * Ruby's postponed-job functions have (3.1's rb_postponed_job_register_one, which registers in
 * a buffer and reaches the VM through a GOT slot; 3.3's rb_postponed_job_trigger, which ORs a
 * bit into the queue and takes the VM pointer's address with lea), with the offsets of the
 * layouts the table has for those Rubies.
 */
#include <elf.h>
#include <stdint.h>
#include <string.h>

#include "test.h"
#include "vmcode.h"
#include "vmlayout.h"

#if defined(__x86_64__)

/* clang-format off */
__asm__(
	".pushsection .data\n"
	".balign 8\n"
	".globl trc_fx_vm_ptr\n.hidden trc_fx_vm_ptr\n"
	"trc_fx_vm_ptr: .quad 0\n"
	"trc_fx_got: .quad trc_fx_vm_ptr\n"
	"trc_fx_tls: .quad 0\n"
	".popsection\n"
	".pushsection .text\n"
	/* 3.3-3.4: trigger, then rb_vm_main_ractor_ec when the thread has no EC of its own */
	".globl trc_fx_trigger\n.hidden trc_fx_trigger\n"
	"trc_fx_trigger:\n"
	"	endbr64\n"
	"	lea trc_fx_vm_ptr(%rip), %rax\n"
	"	push %rbx\n"
	"	mov %edi, %ecx\n"
	"	mov (%rax), %rbx\n"
	"	mov $1, %eax\n"
	"	shl %cl, %eax\n"
	"	mov 0x4a0(%rbx), %rdx\n"
	"	lock or %eax, 0x200(%rdx)\n"
	"	lea trc_fx_tls(%rip), %rdi\n"
	"	call trc_fx_other\n"
	"	mov (%rax), %rax\n"
	"	test %rax, %rax\n"
	"	je 1f\n"
	"2:	lock orl $4, 0x20(%rax)\n"
	"	pop %rbx\n"
	"	ret\n"
	"1:	mov %rbx, %rdi\n"
	"	call trc_fx_main_ractor_ec\n"
	"	jmp 2b\n"
	"trc_fx_main_ractor_ec:\n"
	"	mov 0x20(%rdi), %rax\n"
	"	mov 0x180(%rax), %rax\n"
	"	test %rax, %rax\n"
	"	je 3f\n"
	"	ret\n"
	"3:	mov 0x28(%rdi), %rax\n"
	"	mov 0x30(%rax), %rax\n"
	"	ret\n"
	"trc_fx_other:\n"
	"	ret\n"
	/* 3.1: register_one, through a GOT slot, a CAS of the index, an add of the buffer */
	".globl trc_fx_register_one\n.hidden trc_fx_register_one\n"
	"trc_fx_register_one:\n"
	"	push %r12\n"
	"	mov trc_fx_got(%rip), %rax\n"
	"	push %rbp\n"
	"	mov %rdx, %rbp\n"
	"	push %rbx\n"
	"	mov %rsi, %rbx\n"
	"	mov (%rax), %r12\n"
	"	call trc_fx_other\n"
	"	mov (%rax), %rsi\n"
	"	test %rsi, %rsi\n"
	"	je 5f\n"
	"4:	mov 0x3e0(%r12), %ecx\n"
	"	mov 0x3d8(%r12), %rax\n"
	"	lea 1(%rcx), %edx\n"
	"	mov %ecx, %eax\n"
	"	lock cmpxchg %edx, 0x3e0(%r12)\n"
	"	jne 4b\n"
	"	shl $4, %rcx\n"
	"	add 0x3d8(%r12), %rcx\n"
	"	mov %rbx, (%rcx)\n"
	"	mov %rbp, 8(%rcx)\n"
	"	lock orl $4, 0x20(%rsi)\n"
	"	pop %rbx\n"
	"	pop %rbp\n"
	"	pop %r12\n"
	"	ret\n"
	"5:	mov %r12, %rdi\n"
	"	call trc_fx_main_ractor_ec31\n"
	"	mov %rax, %rsi\n"
	"	jmp 4b\n"
	"trc_fx_main_ractor_ec31:\n"
	"	mov 0x20(%rdi), %rax\n"
	"	mov 0x208(%rax), %rax\n"
	"	ret\n"
	/* two different interrupt-flag offsets: the code contradicts itself */
	".globl trc_fx_conflict\n.hidden trc_fx_conflict\n"
	"trc_fx_conflict:\n"
	"	lock orl $4, 0x20(%rax)\n"
	"	lock orl $4, 0x28(%rax)\n"
	"	ret\n"
	/* an instruction the decoder does not know */
	".globl trc_fx_vex\n.hidden trc_fx_vex\n"
	"trc_fx_vex:\n"
	"	vzeroupper\n"
	"	ret\n"
	".popsection\n");
/* clang-format on */

extern const unsigned char trc_fx_trigger[], trc_fx_register_one[], trc_fx_conflict[], trc_fx_vex[];
extern uint64_t trc_fx_vm_ptr;

/* This process's own memory. */
static int
self_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

static const struct trc_mem self = { self_read, NULL };

static int
read_fn(const unsigned char *fn, struct trc_vmcode *c, char *why, size_t n)
{
	return trc_vmcode_read(&self, (uint64_t)(uintptr_t)fn, 0, 4, c, why, n);
}

static void
queue_shape(void)
{
	struct trc_vmcode c;
	char why[256] = "";

	test_cond("3.3's shape is read", read_fn(trc_fx_trigger, &c, why, sizeof(why)) == 0);
	test_cond("the VM pointer is what lea named", c.vm_ptr == (uint64_t)(uintptr_t)&trc_fx_vm_ptr);
	test_cond("a queue: at 0x4a0, its bitset at 0x200",
		  c.kind == TRC_PJ_QUEUE && c.pj_queue == 0x4a0 && c.pj_bitset == 0x200);
	test_cond("the interrupt flag at 0x20", c.ec_interrupt_flag == 0x20);
	test_cond("the callee: main_ractor->running_ec, then main_thread->ec",
		  c.vm_main_ractor == 0x20 && c.ractor_running_ec == 0x180 && c.vm_main_thread == 0x28 &&
		  c.thread_ec == 0x30);
	test_cond("no buffer", c.pj_buffer == TRC_VMCODE_NONE && c.pj_index == TRC_VMCODE_NONE);
}

static void
buffer_shape(void)
{
	struct trc_vmcode c;
	char why[256] = "";

	test_cond("3.1's shape is read", read_fn(trc_fx_register_one, &c, why, sizeof(why)) == 0);
	test_cond("the VM pointer is what the GOT slot holds", c.vm_ptr == (uint64_t)(uintptr_t)&trc_fx_vm_ptr);
	test_cond("a buffer at 0x3d8, its index at 0x3e0",
		  c.kind == TRC_PJ_BUFFER && c.pj_buffer == 0x3d8 && c.pj_index == 0x3e0);
	test_cond("the interrupt flag at 0x20", c.ec_interrupt_flag == 0x20);
	test_cond("the callee: main_ractor->running_ec only",
		  c.vm_main_ractor == 0x20 && c.ractor_running_ec == 0x208 &&
		  c.vm_main_thread == TRC_VMCODE_NONE && c.thread_ec == TRC_VMCODE_NONE);
}

static void
refusals(void)
{
	struct trc_vmcode c;
	char why[256] = "";

	test_cond("two values for one offset: refused",
		  read_fn(trc_fx_conflict, &c, why, sizeof(why)) < 0 && strstr(why, "two values") != NULL);
	test_cond("an unknown instruction: refused, and said where",
		  read_fn(trc_fx_vex, &c, why, sizeof(why)) < 0 && strstr(why, "does not know") != NULL);
}

/* The generated table, against the code: the offsets agree for 3.1, 3.2, 3.3, 3.4 and 4.0. */
static void
table(void)
{
	struct trc_vmcode q, q4, b, b2;
	const struct trc_vmlayout *l;
	char why[512] = "";

	read_fn(trc_fx_trigger, &q, why, sizeof(why));
	read_fn(trc_fx_register_one, &b, why, sizeof(why));
	l = trc_vmlayout_find("3.3.8", EM_X86_64, &q, why, sizeof(why));
	test_cond("3.3.8 finds the 3.3 layout", l != NULL && strcmp(l->series, "3.3") == 0);
	l = trc_vmlayout_find("3.4.11", EM_X86_64, &q, why, sizeof(why));
	test_cond("3.4.11 finds a 3.4 layout", l != NULL && strcmp(l->series, "3.4") == 0);
	l = trc_vmlayout_find("3.1.2", EM_X86_64, &b, why, sizeof(why));
	test_cond("3.1.2 finds the 3.1 layout", l != NULL && strcmp(l->series, "3.1") == 0);
	l = trc_vmlayout_find("3.1.2", EM_X86_64, &q, why, sizeof(why));
	test_cond("3.1 with a queue's code: refused", l == NULL && strstr(why, "in a queue") != NULL);
	/* 3.2 keeps the buffer 64 bytes further into the VM than 3.1. */
	b2 = b;
	b2.pj_buffer = 1024;
	b2.pj_index = 1032;
	l = trc_vmlayout_find("3.2.11", EM_X86_64, &b2, why, sizeof(why));
	test_cond("3.2.11 with 3.2's offsets finds the 3.2 layout", l != NULL && strcmp(l->series, "3.2") == 0);
	l = trc_vmlayout_find("3.2.11", EM_X86_64, &b, why, sizeof(why));
	test_cond("3.2 with 3.1's offsets: refused, naming the buffer",
		  l == NULL && strstr(why, "postponed_job_buffer at 984") != NULL && strstr(why, "at 1024") != NULL);
	l = trc_vmlayout_find("3.0.7", EM_X86_64, &q, why, sizeof(why));
	test_cond("3.0: no layout, and which there are",
		  l == NULL && strstr(why, "no VM layout for Ruby 3.0.7") != NULL && strstr(why, "3.1, 3.2, 3.3") != NULL);
	/* 4.0 keeps the queue where 3.3 kept it less 48 bytes, and the ractor's running_ec 72 sooner. */
	q4 = q;
	q4.pj_queue = 1136;
	q4.ractor_running_ec = 312;
	l = trc_vmlayout_find("4.0.2", EM_X86_64, &q4, why, sizeof(why));
	test_cond("4.0.2 with 4.0's offsets finds the 4.0 layout", l != NULL && strcmp(l->series, "4.0") == 0);
	l = trc_vmlayout_find("4.0.2", EM_X86_64, &q, why, sizeof(why));
	test_cond("4.0 with 3.3's offsets: refused, naming the queue",
		  l == NULL && strstr(why, "postponed_job_queue at 1184") != NULL && strstr(why, "at 1136") != NULL);
	l = trc_vmlayout_find("3.40.0", EM_X86_64, &q, why, sizeof(why));
	test_cond("3.40 is not 3.4", l == NULL);
	l = trc_vmlayout_find("3.3.8", EM_AARCH64, &q, why, sizeof(why));
	test_cond("another architecture: refused", l == NULL && strstr(why, "arm64") != NULL);
	q.pj_bitset = 0x208;
	l = trc_vmlayout_find("3.3.8", EM_X86_64, &q, why, sizeof(why));
	test_cond("one offset off: refused, naming it",
		  l == NULL && strstr(why, "triggered_bitset at 520") != NULL && strstr(why, "at 512") != NULL);
	q.pj_bitset = 0x200;
	q.vm_main_thread = TRC_VMCODE_NONE;
	l = trc_vmlayout_find("3.3.8", EM_X86_64, &q, why, sizeof(why));
	test_cond("an offset the code does not show: refused",
		  l == NULL && strstr(why, "does not show where vm->ractor.main_thread") != NULL);
}

void
test_vmcode(void)
{
	queue_shape();
	buffer_shape();
	refusals();
	table();
}

#else

void
test_vmcode(void)
{
	test_cond("the decoder reads x86-64 only: nothing to test here", 1);
}

#endif
