/* vmlayout.c: the generated table of Ruby VM layouts, chosen by version and checked against the code. */
#include "vmlayout.h"

#include <elf.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "vmlayout_table.h"

#define NLAYOUTS (sizeof(vmlayouts) / sizeof(vmlayouts[0]))

/* "3.4.11" is of series "3.4"; "3.40.0" is not. */
static int
of_series(const char *version, const char *series)
{
	size_t n = strlen(series);

	return strncmp(version, series, n) == 0 && (version[n] == '.' || version[n] == '\0');
}

static const char *
machine_name(uint16_t m)
{
	switch (m) {
	case EM_X86_64: return "x86-64";
	case EM_AARCH64: return "arm64";
	case EM_386: return "i386";
	default: return "an unknown architecture";
	}
}

const char *
trc_vmlayout_known(void)
{
	static char list[128];
	size_t at = 0;

	if (list[0] != '\0')
		return list;
	for (size_t i = 0; i < NLAYOUTS; i++) {
		if (strstr(list, vmlayouts[i].series) != NULL)
			continue;
		at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", at ? ", " : "", vmlayouts[i].series);
		if (at >= sizeof(list))
			break;
	}
	return list;
}

/* One offset: the code's (NONE: it did not say) against the table's. 0 if they agree. */
static int
agree(const struct trc_vmlayout *l, const char *what, int64_t code, uint32_t table, char *why, size_t n)
{
	if (code == (int64_t)table)
		return 0;
	if (code == TRC_VMCODE_NONE)
		snprintf(why, n, "Ruby %s's code does not show where %s is (tracer's table, from %s: %" PRIu32 ")",
			 l->series, what, l->source, table);
	else
		snprintf(why, n, "Ruby %s's code puts %s at %" PRId64 ", tracer's table (from %s) at %" PRIu32,
			 l->series, what, code, l->source, table);
	return -1;
}

int
trc_vmlayout_check(const struct trc_vmlayout *l, const struct trc_vmcode *c, char *why, size_t n)
{
	if (c->vm_ptr == 0) {
		snprintf(why, n, "Ruby %s's code does not show where ruby_current_vm_ptr is", l->series);
		return -1;
	}
	if (c->kind != l->pj_kind) {
		snprintf(why, n, "Ruby %s's code keeps postponed jobs in a %s, tracer's table (from %s) in a %s",
			 l->series, c->kind == TRC_PJ_QUEUE ? "queue" : c->kind == TRC_PJ_BUFFER ? "buffer" : "way it does not know",
			 l->source, l->pj_kind == TRC_PJ_QUEUE ? "queue" : "buffer");
		return -1;
	}
	if (l->pj_kind == TRC_PJ_BUFFER &&
	    (agree(l, "vm->postponed_job_buffer", c->pj_buffer, l->pj_buffer, why, n) < 0 ||
	     agree(l, "vm->postponed_job_index", c->pj_index, l->pj_index, why, n) < 0))
		return -1;
	if (l->pj_kind == TRC_PJ_QUEUE &&
	    (agree(l, "vm->postponed_job_queue", c->pj_queue, l->pj_queue, why, n) < 0 ||
	     agree(l, "the queue's triggered_bitset", c->pj_bitset, l->pj_bitset, why, n) < 0 ||
	     agree(l, "vm->ractor.main_thread", c->vm_main_thread, l->vm_main_thread, why, n) < 0 ||
	     agree(l, "the thread's ec", c->thread_ec, l->thread_ec, why, n) < 0))
		return -1;
	return agree(l, "ec->interrupt_flag", c->ec_interrupt_flag, l->ec_interrupt_flag, why, n) < 0 ||
	       agree(l, "vm->ractor.main_ractor", c->vm_main_ractor, l->vm_main_ractor, why, n) < 0 ||
	       agree(l, "the ractor's running_ec", c->ractor_running_ec, l->ractor_running_ec, why, n) < 0
		       ? -1 : 0;
}

const struct trc_vmlayout *
trc_vmlayout_find(const char *version, uint16_t machine, const struct trc_vmcode *code, char *why,
		  size_t n)
{
	const struct trc_vmlayout *first = NULL;
	char first_why[512] = "";

	for (size_t i = 0; i < NLAYOUTS; i++) {
		const struct trc_vmlayout *l = &vmlayouts[i];

		if (!of_series(version, l->series) || l->machine != machine)
			continue;
		if (trc_vmlayout_check(l, code, first == NULL ? first_why : why, first == NULL ? sizeof(first_why) : n) == 0)
			return l;
		if (first == NULL)
			first = l;
	}
	if (first != NULL)
		snprintf(why, n, "%s", first_why);
	else
		snprintf(why, n, "tracer has no VM layout for Ruby %s on %s (it knows Ruby %s on x86-64)",
			 version, machine_name(machine), trc_vmlayout_known());
	return NULL;
}
