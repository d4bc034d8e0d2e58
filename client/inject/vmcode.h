/* vmcode.h: what the machine code of Ruby's postponed-job functions says about the VM's layout. */
#ifndef TRC_VMCODE_H
#define TRC_VMCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elfobj.h"

/* How a Ruby keeps postponed jobs. */
enum trc_pj_kind {
	TRC_PJ_UNKNOWN = 0,
	TRC_PJ_BUFFER = 1,      /* 3.1-3.2: vm->postponed_job_buffer[], vm->postponed_job_index */
	TRC_PJ_QUEUE = 2,       /* 3.3-4.0: vm->postponed_job_queue->table[32], ->triggered_bitset */
};

#define TRC_VMCODE_NONE (-1)

/*
 * The facts, each an offset or TRC_VMCODE_NONE when the code did not name it. Read from
 * rb_postponed_job_register_one (3.1: it registers in place) or rb_postponed_job_trigger (3.3+),
 * and from the function they call with the VM to find the main Ractor's running context
 * (rb_vm_main_ractor_ec, not exported).
 */
struct trc_vmcode {
	uint64_t vm_ptr;                /* &ruby_current_vm_ptr, or 0 */
	enum trc_pj_kind kind;
	int64_t pj_buffer, pj_index;    /* TRC_PJ_BUFFER: in the VM */
	int64_t pj_queue, pj_bitset;    /* TRC_PJ_QUEUE: the queue's pointer in the VM; its bitset */
	int64_t ec_interrupt_flag;      /* where `lock or $POSTPONED_JOB_INTERRUPT_MASK` goes */
	int64_t vm_main_ractor, ractor_running_ec;      /* rb_vm_main_ractor_ec's first load pair */
	int64_t vm_main_thread, thread_ec;              /* its fallback (3.3+) */
	int nvm_loads;                  /* distinct 64-bit VM fields the function itself loads */
	int64_t vm_loads[4];
};

/*
 * Reads the function at addr (size bytes, from its symbol; 0: unknown) through mem, following
 * its branches and the call that takes the VM, for at most a few hundred instructions. The
 * POSTPONED_JOB interrupt bit is mask. Returns 0 with *out filled (some facts may be NONE:
 * the caller compares them with what it expects), or -1 with why set (an instruction this
 * decoder does not know, memory that cannot be read). Pure but for mem.
 */
int trc_vmcode_read(const struct trc_mem *mem, uint64_t addr, uint64_t size, uint32_t mask,
		    struct trc_vmcode *out, char *why, size_t whylen);

#endif
