/*
 * rubyvm-probe.c: compiled by script/rubyvm-layouts against one Ruby's internal headers (its
 * source tree) and its build's ruby/config.h; prints that Ruby's VM offsets as one initializer
 * of struct trc_vmlayout (client/inject/vmlayout.h). Never part of the client: the client carries the
 * table the generator assembles from these lines, and checks it against the code it runs on.
 *
 * The generator also extracts from vm_trace.c (where they are private) the postponed-job types
 * into a header it passes with -include: rb_postponed_job_t and MAX_POSTPONED_JOB (3.1-3.2), or
 * rb_postponed_job_queues_t and PJOB_TABLE_SIZE (3.3 on).
 */
#include "vm_core.h"
#include "ractor_core.h"
#include "ruby/debug.h"             /* rb_postponed_job_func_t */
#include "ruby/version.h"           /* RUBY_API_VERSION_MAJOR, _MINOR */
#include "version.h"                /* the source tree's: RUBY_VERSION_TEENY */
#include "rubyvm-probe-private.h"   /* the generator's copy of vm_trace.c's types */

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#ifndef TRC_PROBE_SOURCE
#error "TRC_PROBE_SOURCE: the source package the headers come from"
#endif
#ifndef TRC_PROBE_BUILD
#error "TRC_PROBE_BUILD: the build whose config.h this is"
#endif

#if defined(__x86_64__)
#define MACHINE "EM_X86_64"
#elif defined(__aarch64__)
#define MACHINE "EM_AARCH64"
#else
#error "an architecture the client has no decoder for"
#endif

#define OFF(type, field) ((unsigned)offsetof(type, field))

static void
postponed_jobs(void)
{
#ifdef PJOB_TABLE_SIZE
	printf("\t\t.pj_kind = TRC_PJ_QUEUE, .pj_queue = %u, .pj_slots = %u, .pj_bitset = %u,\n",
	       OFF(rb_vm_t, postponed_job_queue), (unsigned)PJOB_TABLE_SIZE,
	       OFF(rb_postponed_job_queues_t, triggered_bitset));
	printf("\t\t.pj_table = %u, .pj_entry = %u, .pj_func = %u, .pj_data = %u,\n",
	       OFF(rb_postponed_job_queues_t, table),
	       (unsigned)sizeof(((rb_postponed_job_queues_t *)0)->table[0]),
	       OFF(rb_postponed_job_queues_t, table[0].func), OFF(rb_postponed_job_queues_t, table[0].data));
#else
	printf("\t\t.pj_kind = TRC_PJ_BUFFER, .pj_buffer = %u, .pj_index = %u, .pj_max = %u,\n",
	       OFF(rb_vm_t, postponed_job_buffer), OFF(rb_vm_t, postponed_job_index),
	       (unsigned)MAX_POSTPONED_JOB);
	printf("\t\t.pj_entry = %u, .pj_func = %u, .pj_data = %u,\n", (unsigned)sizeof(rb_postponed_job_t),
	       OFF(rb_postponed_job_t, func), OFF(rb_postponed_job_t, data));
#endif
}

int
main(void)
{
	printf("\t{\n");
	printf("\t\t.series = \"%d.%d\", .ruby = \"%d.%d.%d\", .machine = %s,\n", RUBY_API_VERSION_MAJOR,
	       RUBY_API_VERSION_MINOR, RUBY_VERSION_MAJOR, RUBY_VERSION_MINOR, RUBY_VERSION_TEENY, MACHINE);
	printf("\t\t.source = \"%s\",\n\t\t.build = \"%s\",\n", TRC_PROBE_SOURCE, TRC_PROBE_BUILD);
	postponed_jobs();
	printf("\t\t.vm_main_ractor = %u, .vm_main_thread = %u, .vm_trap_cmd = %u,\n",
	       OFF(rb_vm_t, ractor.main_ractor), OFF(rb_vm_t, ractor.main_thread),
	       OFF(rb_vm_t, trap_list.cmd));
	printf("\t\t.ractor_running_ec = %u, .thread_ec = %u, .thread_self = %u, .thread_unblock = %u,\n",
	       OFF(struct rb_ractor_struct, threads.running_ec), OFF(rb_thread_t, ec),
	       OFF(rb_thread_t, self), OFF(rb_thread_t, unblock.func));
	printf("\t\t.ec_interrupt_flag = %u, .ec_interrupt_mask = %u, .ec_thread_ptr = %u,\n",
	       OFF(rb_execution_context_t, interrupt_flag), OFF(rb_execution_context_t, interrupt_mask),
	       OFF(rb_execution_context_t, thread_ptr));
	printf("\t\t.postponed_job_mask = %#x, .nsig = %u, .sigchld = %d,\n",
	       (unsigned)POSTPONED_JOB_INTERRUPT_MASK, (unsigned)RUBY_NSIG, RUBY_SIGCHLD);
	printf("\t\t.rbasic_flags = %u, .rbasic_klass = %u, .t_mask = %#x, .t_data = %#x,\n",
	       OFF(struct RBasic, flags), OFF(struct RBasic, klass), (unsigned)RUBY_T_MASK,
	       (unsigned)RUBY_T_DATA);
	printf("\t},\n");
	return 0;
}
