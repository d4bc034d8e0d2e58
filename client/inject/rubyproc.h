/* rubyproc.h: the Ruby VM inside another process, found from outside: libruby, version, layout, VM. */
#ifndef TRC_RUBYPROC_H
#define TRC_RUBYPROC_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "elfobj.h"
#include "vmcode.h"
#include "vmlayout.h"

#define TRC_RUBYPROC_GUARDS 5

/* Caller-allocated; filled by trc_rubyproc_find, read-only after. */
struct trc_rubyproc {
	pid_t pid;
	struct trc_mem mem;             /* the process's memory (process_vm_readv) */
	char module[PATH_MAX];          /* libruby, or the executable of a static Ruby, as mapped */
	bool is_static;
	char soname[128];               /* libruby's DT_SONAME; "" for a static Ruby */
	struct trc_elf elf;
	char version[32];               /* ruby_version: "3.3.8" */
	uint64_t load_fn;               /* dln_load: the job's function */
	uint64_t guard[TRC_RUBYPROC_GUARDS][2]; /* the postponed-job functions, [start, end) */
	size_t nguard;
	struct trc_vmcode code;         /* what rb_postponed_job_trigger or _register_one names */
	const struct trc_vmlayout *layout;
	uint64_t vm;                    /* the rb_vm_t: what ruby_current_vm_ptr holds */
	uint64_t argv0;                 /* rb_argv0, set once ruby_setup is done; 0: not exported */
	uint64_t spare, spare_end;      /* zero bytes after libruby's data, up to its page's end */
};

/* What trc_rubyproc_find found, when it did not find a Ruby it can work with. */
enum trc_rubyproc_miss {
	TRC_RUBYPROC_OK = 0,
	TRC_RUBYPROC_NOT_RUBY = 1,      /* no libruby, and an executable without ruby_version */
	TRC_RUBYPROC_UNSUPPORTED = 2,   /* a Ruby, but one tracer cannot work with: why says */
	TRC_RUBYPROC_UNREADABLE = 3,    /* its memory or maps could not be read: errno */
	TRC_RUBYPROC_STARTING = 4,      /* a Ruby whose VM is not made yet (a process still booting) */
};

/*
 * Finds the Ruby in pid: its libruby mapping (or its executable, for a static Ruby), the
 * version it exports, the machine code of its postponed-job functions, the table's layout
 * that code agrees with, and the VM pointer. Reads /proc/PID/maps and the process's memory;
 * stops nothing. Returns TRC_RUBYPROC_OK, or a miss with why set to one line.
 */
enum trc_rubyproc_miss trc_rubyproc_find(struct trc_rubyproc *r, pid_t pid, char *why, size_t whylen);

/* The process's memory: 0, or -1 with errno (a short read is EFAULT). Any thread. */
int trc_rubyproc_read(const struct trc_rubyproc *r, uint64_t addr, void *buf, size_t len);
int trc_rubyproc_write(const struct trc_rubyproc *r, uint64_t addr, const void *buf, size_t len);

/* Whether pc is inside one of the postponed-job functions. */
bool trc_rubyproc_in_guard(const struct trc_rubyproc *r, uint64_t pc);

/* Whether any line of /proc/PID/maps contains needle (false when unreadable). */
bool trc_rubyproc_maps_have(pid_t pid, const char *needle);

#endif
