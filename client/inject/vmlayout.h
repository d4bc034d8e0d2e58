/* vmlayout.h: the VM offsets of each known Ruby build, and their check against its machine code. */
#ifndef TRC_VMLAYOUT_H
#define TRC_VMLAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "vmcode.h"

/*
 * One Ruby build's layout, as script/rubyvm-probe.c printed it from that Ruby's internal
 * headers (vm_core.h, ractor_core.h, vm_trace.c) and config.h: offsets in bytes.
 */
struct trc_vmlayout {
	const char *series;     /* "3.3": RUBY_API_VERSION's major.minor */
	const char *ruby;       /* the version the headers are of: "3.3.8" */
	const char *source;     /* the source package they came from */
	const char *build;      /* the build whose config.h was used */
	uint16_t machine;       /* EM_X86_64... */
	enum trc_pj_kind pj_kind;
	uint32_t pj_buffer, pj_index, pj_max;           /* TRC_PJ_BUFFER: in rb_vm_t */
	uint32_t pj_queue, pj_slots, pj_bitset, pj_table;       /* TRC_PJ_QUEUE */
	uint32_t pj_entry, pj_func, pj_data;            /* a {func, data} entry */
	uint32_t vm_main_ractor, vm_main_thread, vm_trap_cmd;   /* rb_vm_t */
	uint32_t ractor_running_ec;                     /* rb_ractor_t */
	uint32_t thread_ec, thread_self;                /* rb_thread_t */
	uint32_t thread_unblock;                        /* its unblock.func: set while it waits */
	uint32_t ec_interrupt_flag, ec_interrupt_mask, ec_thread_ptr;   /* rb_execution_context_t */
	uint32_t postponed_job_mask;                    /* POSTPONED_JOB_INTERRUPT_MASK */
	uint32_t nsig;                                  /* entries of vm->trap_list.cmd */
	int sigchld;                                    /* RUBY_SIGCHLD */
	uint32_t rbasic_flags, rbasic_klass, t_mask, t_data;    /* struct RBasic, T_DATA */
};

/*
 * The layout of version (ruby_version: "3.4.11") on machine that the code agrees with: every
 * offset code names must be the table's. Returns it, or NULL with why set to one line (no
 * table for that Ruby; or which offset the code and the table disagree on, and where each
 * comes from). Pure.
 */
const struct trc_vmlayout *trc_vmlayout_find(const char *version, uint16_t machine,
					     const struct trc_vmcode *code, char *why, size_t whylen);

/*
 * Compares one layout with the code: 0 when they agree, else -1 with why set. Pure.
 */
int trc_vmlayout_check(const struct trc_vmlayout *l, const struct trc_vmcode *code, char *why,
		       size_t whylen);

/* The Ruby series the table knows, for messages: "3.1, 3.3, 3.4". */
const char *trc_vmlayout_known(void);

#endif
