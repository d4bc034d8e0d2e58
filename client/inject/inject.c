/* inject.c: a postponed job written into a frozen Ruby process: the VM loads the agent at a safe point. */
#define _GNU_SOURCE     /* tgkill */
#include "inject.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "freeze.h"
#include "permit.h"
#include "proc.h"
#include "sandbox.h"

#define FREEZE_MS 250                   /* every thread stops within this, or nothing is done */
#define MAX_SLOW_FREEZES 4              /* then a thread is in uninterruptible I/O: give up */
#define MS 1000000ull
#define WAKE_AFTER (20 * MS)            /* a busy process runs the job before; an idle one is woken */
#define WAKE_EVERY (1000 * MS)
#define RETRY_EVERY (5 * MS)            /* a thread was inside the job functions: look again */
#define MAX_RETRIES 200
#define DROPPED_AFTER (3000 * MS)       /* the job ran, nothing loads: the VM dropped it (below) */
#define MAX_ATTEMPTS 3
#define LOADER_THREAD "tracer-inject"   /* the name of the thread that requires the agent */
#define MAX_BUFFER_SCAN 1024
#define STARTING_FOR 10                 /* s: a process this young may not have made its VM yet */
#define STARTING_EVERY (20 * MS)        /* then it is looked at again this often */

/*
 * The job is libruby's own dln_load, given the path of lib/tracer_agent/tracer_inject.so: Ruby
 * loads it and calls its Init_tracer_inject, which starts a thread of its own that requires the
 * agent (ext/tracer_inject/tracer_inject.c says why no more is done in the job itself).
 */

static bool enabled = true;

void
trc_inject_set_enabled(bool on)
{
	enabled = on;
}

bool
trc_inject_enabled(void)
{
	return enabled;
}

/*
 * Under Ruby::Box (4.0, RUBY_BOX=1) an extension required in a user box is a copy Ruby makes
 * and then deletes, named after the original's path with '+' for '/':
 * /tmp/_ruby_box_p<pid>_<box>_+srv+app+lib+tracer_agent+tracer_agent.so (deleted).
 */
bool
trc_inject_loaded(pid_t pid)
{
	return trc_rubyproc_maps_have(pid, "/" TRC_INJECT_AGENT) || trc_rubyproc_maps_have(pid, "+" TRC_INJECT_AGENT);
}

bool
trc_inject_candidate(pid_t pid)
{
	char path[64], exe[PATH_MAX];
	const char *base;
	ssize_t n;

	if (trc_rubyproc_maps_have(pid, "/libruby"))
		return true;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if ((n = readlink(path, exe, sizeof(exe) - 1)) <= 0)
		return false;
	exe[n] = '\0';
	base = strrchr(exe, '/');
	return strncmp(base ? base + 1 : exe, "ruby", 4) == 0;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void __attribute__((format(printf, 3, 4)))
fail(struct trc_inject *in, bool denied, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(in->error, sizeof(in->error), fmt, ap);
	va_end(ap);
	in->phase = TRC_INJECT_FAILED;
	in->denied = denied;
}

/* How many seconds ago pid started (its start time in /proc/PID/stat), or -1. */
static double
age(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	double uptime = 0;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* After "pid (comm) ", field 22 is the start time in clock ticks since boot. */
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	for (int field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p, "%llu", &start) != 1 ||     /* NOLINT(cert-err34-c): the kernel's digits */
	    (f = fopen("/proc/uptime", "re")) == NULL)
		return -1;
	if (fscanf(f, "%lf", &uptime) != 1)     /* NOLINT(cert-err34-c) */
		uptime = 0;
	fclose(f);
	return uptime - (double)start / (double)sysconf(_SC_CLK_TCK);
}

/* Whether pid started less than STARTING_FOR seconds ago. */
static bool
young(pid_t pid)
{
	double a = age(pid);

	return a >= 0 && a < STARTING_FOR;
}

/* ---- the process's memory ---- */

static int
rd64(const struct trc_inject *in, uint64_t addr, uint64_t *v)
{
	return trc_rubyproc_read(&in->ruby, addr, v, sizeof(*v));
}

static int
rd32(const struct trc_inject *in, uint64_t addr, uint32_t *v)
{
	return trc_rubyproc_read(&in->ruby, addr, v, sizeof(*v));
}

static int
wr(const struct trc_inject *in, uint64_t addr, const void *buf, size_t len)
{
	return trc_rubyproc_write(&in->ruby, addr, buf, len);
}

/* The VM as it is while every thread is stopped. */
struct vmstate {
	uint64_t main_thread, main_ec;
	uint64_t running_ec;            /* 0: none, or one tracer does not flag */
	uint64_t pj;                    /* the queue, or the buffer */
	uint32_t bits;                  /* QUEUE: triggered_bitset */
	uint32_t index;                 /* BUFFER: postponed_job_index */
};

/*
 * Whether Ruby is done making its VM: ruby_setup (the Init functions, the thread system among
 * them) has returned once ruby_options sets rb_argv0. A job run before, at an interrupt check
 * inside an Init function, starts a thread in a VM not ready for one: Ruby 3.4 was left hung
 * (its main thread waiting for the GVL for good, in ruby_setup). Where libruby does not export
 * rb_argv0, only the contexts below tell.
 */
static bool
vm_made(const struct trc_inject *in)
{
	uint64_t argv0 = 0;

	return in->ruby.argv0 == 0 || (rd64(in, in->ruby.argv0, &argv0) == 0 && argv0 != 0);
}

/*
 * The main thread's context, which must point back at it, and the running one, if sound.
 * Returns 0; 1 when they do not, or the VM is not made yet, in a process young enough to be
 * still making them (Ruby sets its main thread up in steps while it boots: the next look will
 * tell); -1 failed.
 */
static int
read_contexts(struct trc_inject *in, struct vmstate *st)
{
	const struct trc_vmlayout *l = in->ruby.layout;
	uint64_t vm = in->ruby.vm, back = 0, self = 0, flags = 0, ractor = 0, th = 0, ec = 0;

	if (!vm_made(in)) {
		if ((in->starting = young(in->ruby.pid)))
			return 1;
		fail(in, false, "Ruby %s in process %d has not finished making its VM (rb_argv0 is not set) in %d s: "
		     "tracer writes nothing into a VM still being made; " TRC_PERMIT_INSTEAD, in->ruby.version,
		     (int)in->ruby.pid, STARTING_FOR);
		return -1;
	}
	if (rd64(in, vm + l->vm_main_thread, &st->main_thread) < 0 || st->main_thread == 0 ||
	    rd64(in, st->main_thread + l->thread_ec, &st->main_ec) < 0 || st->main_ec == 0 ||
	    rd64(in, st->main_ec + l->ec_thread_ptr, &back) < 0 || back != st->main_thread ||
	    rd64(in, st->main_thread + l->thread_self, &self) < 0 ||
	    rd64(in, self + l->rbasic_flags, &flags) < 0 || (flags & l->t_mask) != l->t_data) {
		if ((in->starting = young(in->ruby.pid)))
			return 1;
		fail(in, false, "Ruby %s in process %d does not look as tracer's table (from %s) says: its "
		     "main thread and context do not point at each other, " TRC_PERMIT_INSTEAD,
		     in->ruby.version, (int)in->ruby.pid, l->source);
		return -1;
	}
	in->starting = false;
	st->running_ec = 0;
	if (rd64(in, vm + l->vm_main_ractor, &ractor) == 0 && ractor != 0 &&
	    rd64(in, ractor + l->ractor_running_ec, &ec) == 0 && ec != 0 && ec != st->main_ec &&
	    rd64(in, ec + l->ec_thread_ptr, &th) == 0 && th != 0 && rd64(in, th + l->thread_ec, &back) == 0 &&
	    back == ec)
		st->running_ec = ec;
	return 0;
}

static bool
is_ours(const struct trc_inject *in, const uint64_t entry[2])
{
	return entry[0] == in->ruby.load_fn && entry[1] == in->code_at;
}

/*
 * Which entry: 0 with in->slot for writing, 1 when ours is queued already, 2 when the VM has
 * no queue yet (a process still booting), -1 failed.
 */
static int
pick_queue_slot(struct trc_inject *in, struct vmstate *st)
{
	const struct trc_vmlayout *l = in->ruby.layout;
	uint64_t table[64][2];
	int free_slot = -1;

	if (l->pj_slots > 64 || l->pj_entry != sizeof(table[0]) || rd64(in, in->ruby.vm + l->pj_queue, &st->pj) < 0)
		st->pj = UINT64_MAX;
	if (st->pj == 0 && (in->starting = young(in->ruby.pid)))
		return 2;       /* made as the VM boots: look again */
	if (st->pj == UINT64_MAX || st->pj == 0 ||
	    trc_rubyproc_read(&in->ruby, st->pj + l->pj_table, table, l->pj_slots * sizeof(table[0])) < 0 ||
	    rd32(in, st->pj + l->pj_bitset, &st->bits) < 0) {
		fail(in, false, "cannot read the postponed-job queue of process %d", (int)in->ruby.pid);
		return -1;
	}
	for (int i = 0; i < (int)l->pj_slots; i++) {
		if (is_ours(in, table[i])) {
			in->slot = i;
			return (int)((st->bits >> i) & 1);      /* queued by an earlier client, or done with */
		}
		if (free_slot < 0 && table[i][0] == 0 && table[i][1] == 0)
			free_slot = i;
	}
	if (free_slot < 0) {
		fail(in, false, "Ruby's postponed-job table in process %d is full (%u jobs registered by its "
		     "extensions): tracer leaves it alone, " TRC_PERMIT_INSTEAD, (int)in->ruby.pid, l->pj_slots);
		return -1;
	}
	in->slot = free_slot;
	return 0;
}

static int
pick_buffer_slot(struct trc_inject *in, struct vmstate *st)
{
	const struct trc_vmlayout *l = in->ruby.layout;
	uint64_t entries[MAX_BUFFER_SCAN][2];

	if (l->pj_entry != sizeof(entries[0]) || rd64(in, in->ruby.vm + l->pj_buffer, &st->pj) < 0)
		st->pj = UINT64_MAX;
	if (st->pj == 0 && (in->starting = young(in->ruby.pid)))
		return 2;       /* made as the VM boots: look again */
	if (st->pj == UINT64_MAX || st->pj == 0 || rd32(in, in->ruby.vm + l->pj_index, &st->index) < 0 ||
	    st->index > l->pj_max || st->index > MAX_BUFFER_SCAN ||
	    (st->index > 0 && trc_rubyproc_read(&in->ruby, st->pj, entries, st->index * sizeof(entries[0])) < 0)) {
		fail(in, false, "cannot read the postponed-job buffer of process %d", (int)in->ruby.pid);
		return -1;
	}
	for (uint32_t i = 0; i < st->index; i++) {
		if (is_ours(in, entries[i])) {
			in->slot = (int)i;
			return 1;
		}
	}
	if (st->index >= l->pj_max) {
		fail(in, false, "Ruby's postponed-job buffer in process %d is full: tracer leaves it alone, "
		     TRC_PERMIT_INSTEAD, (int)in->ruby.pid);
		return -1;
	}
	in->slot = (int)st->index;
	return 0;
}

/* libruby's spare bytes must be zero, or hold this very text (an earlier client's). */
static int
check_spare(struct trc_inject *in, bool *there)
{
	char buf[sizeof(in->code)];

	if (trc_rubyproc_read(&in->ruby, in->code_at, buf, in->code_len) < 0) {
		fail(in, false, "cannot read libruby's spare bytes in process %d", (int)in->ruby.pid);
		return -1;
	}
	*there = memcmp(buf, in->code, in->code_len) == 0;
	for (size_t i = 0; !*there && i < in->code_len; i++) {
		if (buf[i] != 0) {
			fail(in, false, "the spare bytes after libruby's data in process %d are in use (by "
			     "another tool?): tracer leaves them alone, " TRC_PERMIT_INSTEAD, (int)in->ruby.pid);
			return -1;
		}
	}
	return 0;
}

/* An interrupt flag gets the postponed-job bit: the VM runs its jobs at its next check. */
static int
flag(struct trc_inject *in, uint64_t ec)
{
	uint32_t v;
	uint64_t at = ec + in->ruby.layout->ec_interrupt_flag;

	if (rd32(in, at, &v) < 0)
		return -1;
	v |= in->ruby.layout->postponed_job_mask;
	return wr(in, at, &v, sizeof(v));
}

/*
 * The writes, in an order where stopping half-way leaves nothing that runs wrong: the text;
 * the entry (data before func); what makes the VM look at it (index or bit); the flags.
 */
static int
write_job(struct trc_inject *in, const struct vmstate *st, bool text_there)
{
	const struct trc_vmlayout *l = in->ruby.layout;
	uint64_t entry = st->pj + (l->pj_kind == TRC_PJ_QUEUE ? l->pj_table : 0) + (uint64_t)in->slot * l->pj_entry;
	uint32_t trigger = l->pj_kind == TRC_PJ_QUEUE ? st->bits | (1u << in->slot) : st->index + 1;
	uint64_t trigger_at = l->pj_kind == TRC_PJ_QUEUE ? st->pj + l->pj_bitset : in->ruby.vm + l->pj_index;

	if ((!text_there && wr(in, in->code_at, in->code, in->code_len) < 0) ||
	    wr(in, entry + l->pj_data, &in->code_at, 8) < 0 ||
	    wr(in, entry + l->pj_func, &in->ruby.load_fn, 8) < 0 ||
	    wr(in, trigger_at, &trigger, sizeof(trigger)) < 0 || flag(in, st->main_ec) < 0 ||
	    (st->running_ec != 0 && flag(in, st->running_ec) < 0)) {
		fail(in, false, "writing the job into process %d failed: %s", (int)in->ruby.pid, strerror(errno));
		return -1;
	}
	in->written = true;
	in->attempts++;
	return 0;
}

/* Under the freeze: read, check, write. 0 queued (now or before), 2 still starting, -1 failed. */
static int
frozen_write(struct trc_inject *in)
{
	struct vmstate st;
	bool text_there = false;
	int queued, rc;

	memset(&st, 0, sizeof(st));
	if ((rc = read_contexts(in, &st)) != 0)
		return rc < 0 ? -1 : 2;
	queued = in->ruby.layout->pj_kind == TRC_PJ_QUEUE ? pick_queue_slot(in, &st) : pick_buffer_slot(in, &st);
	if (queued == 2)
		return 2;
	if (queued != 0)
		return queued < 0 ? -1 : 0;     /* an earlier client's job waits: so do we */
	if (check_spare(in, &text_there) < 0)
		return -1;
	return write_job(in, &st, text_there);
}

static bool
in_job_functions(const struct trc_inject *in, const struct trc_freeze *f)
{
	uint64_t pc;

	for (size_t i = 0; i < f->n; i++)
		if (f->t[i].stopped && trc_freeze_pc(f, i, &pc) == 0 && trc_rubyproc_in_guard(&in->ruby, pc))
			return true;
	return false;
}

static void
freeze_failed(struct trc_inject *in, int err)
{
	if (err == ETIMEDOUT) {
		fail(in, false, "a thread of process %d did not stop within %d ms, %d times (in "
		     "uninterruptible I/O?): nothing was written; try again, " TRC_PERMIT_INSTEAD,
		     (int)in->ruby.pid, FREEZE_MS, MAX_SLOW_FREEZES);
		return;
	}
	in->denied = trc_permit_explain(in->ruby.pid, err, in->error, sizeof(in->error));
	in->phase = TRC_INJECT_FAILED;
}

/*
 * Holds the process still and writes the job. Returns 0 queued, 1 to try again shortly (a
 * thread was inside Ruby's postponed-job functions, which change what is written here, or
 * another tracer holds the process), 2 to look again once it has made its VM, -1 failed.
 */
static int
queue_job(struct trc_inject *in)
{
	struct trc_freeze f;
	int rc;

	if (trc_freeze(&f, in->ruby.pid, FREEZE_MS) < 0) {
		/* Another tracer loading it too, or a loaded machine that was slow to stop a thread. */
		if ((errno == EPERM && trc_permit_held_by_tracer(in->ruby.pid)) ||
		    (errno == ETIMEDOUT && ++in->slow_freezes < MAX_SLOW_FREEZES))
			return 1;
		freeze_failed(in, errno);
		return -1;
	}
	if (in_job_functions(in, &f)) {
		trc_thaw(&f);
		return 1;
	}
	rc = frozen_write(in);
	trc_thaw(&f);
	if (f.frozen_ns > in->frozen_ns)
		in->frozen_ns = f.frozen_ns;
	if (rc == 0) {
		in->phase = TRC_INJECT_QUEUED;
		in->written_ns = now_ns();
		in->woken_ns = 0;
	}
	return rc;
}

/* A retry, or the end of retrying. */
static void
queue_or_retry(struct trc_inject *in)
{
	int rc = queue_job(in);

	in->retry_ns = 0;
	if (rc == 2)
		in->retry_ns = now_ns() + STARTING_EVERY;
	else if (rc == 1 && ++in->retries < MAX_RETRIES)
		in->retry_ns = now_ns() + RETRY_EVERY;
	else if (rc == 1)
		fail(in, false, "process %d was always inside Ruby's postponed-job functions, or held by "
		     "another tracer, when tracer looked: nothing was written; try again, "
		     TRC_PERMIT_INSTEAD, (int)in->ruby.pid);
}

/* Whether one of pid's threads is named name (its comm: the first 15 bytes of a Ruby thread's name). */
static bool
thread_named(pid_t pid, const char *name)
{
	char path[96], comm[32];
	struct dirent *de;
	bool found = false;
	DIR *d;
	FILE *f;
	long tid;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if ((d = opendir(path)) == NULL)
		return false;
	while (!found && (de = readdir(d)) != NULL) {
		if ((tid = strtol(de->d_name, NULL, 10)) <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%ld/comm", (int)pid, tid);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		found = fgets(comm, sizeof(comm), f) != NULL && strncmp(comm, name, strlen(name)) == 0;
		fclose(f);
	}
	closedir(d);
	return found;
}

/* Whether the thread the job started still requires the agent. */
static bool
loader_running(pid_t pid)
{
	return thread_named(pid, LOADER_THREAD);
}

/*
 * Whether the agent, in the maps once dlopen has it, is ready for a client: its listener
 * thread is made by its Init_ (control.c), after the signal and the queue. Else, once the
 * loader thread has ended (Ruby 3.1 keeps an ended thread's native thread, with its name,
 * for 3 s: that alone would hold every load up as long).
 */
static bool
agent_ready(pid_t pid)
{
	return thread_named(pid, "tracer-listener") || !loader_running(pid);
}

/* ---- before anything: what the process is ---- */

/* TRACER_AGENT_INJECT=0 in the environment the process started with. */
static bool
opted_out(pid_t pid)
{
	static const char var[] = "TRACER_AGENT_INJECT=0";
	char path[64], buf[4096];
	size_t n, keep = 0;
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return false;
	/* NUL-separated entries, read in blocks; an entry cut by a block's end is carried over. */
	while (!found && (n = fread(buf + keep, 1, sizeof(buf) - 1 - keep, f)) > 0) {
		size_t len = keep + n, start = 0;

		for (size_t i = 0; i < len && !found; i++) {
			if (buf[i] != '\0')
				continue;
			found = strcmp(buf + start, var) == 0;
			start = i + 1;
		}
		keep = len - start < sizeof(var) ? len - start : 0;
		memmove(buf, buf + start, keep);
	}
	fclose(f);
	return found;
}

static char
thread_state(pid_t pid, pid_t tid)
{
	char path[96], buf[512], *paren;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	if ((f = fopen(path, "re")) == NULL)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	paren = strrchr(buf, ')');
	if (paren == NULL || paren[1] != ' ')
		return '?';
	return paren[2];
}

/* The characters a path may have to be put in the job's Ruby as is. */
static int
make_code(struct trc_inject *in)
{
	int n;

	n = snprintf(in->code, sizeof(in->code), "%s", in->agent.loader);
	in->code_len = (size_t)n + 1;
	in->code_at = in->ruby.spare;
	if (n < 0 || in->code_len > sizeof(in->code) || in->code_at + in->code_len > in->ruby.spare_end) {
		fail(in, false, "libruby in process %d has %llu spare bytes after its data, and the job "
		     "needs %zu: " TRC_PERMIT_INSTEAD, (int)in->ruby.pid,
		     (unsigned long long)(in->ruby.spare_end - in->ruby.spare), in->code_len);
		return -1;
	}
	return 0;
}

/* The process, as far as /proc says: there, not stopped, ours to ptrace, not opted out. */
static int
check_process(struct trc_inject *in, pid_t pid, uid_t *owner)
{
	gid_t gid;
	char state = thread_state(pid, pid);

	if (trc_proc_check(pid) == TRC_PROC_GONE || state == 'Z' || state == 'X') {
		fail(in, false, "process %d exited before tracer could load the agent", (int)pid);
		return -1;
	}
	/* 't', a tracing stop, is another tracer's hold: the freeze says whose, or waits for it. */
	if (state == 'T') {
		fail(in, false, "process %d is stopped (state T): continue it first (kill -CONT %d)",
		     (int)pid, (int)pid);
		return -1;
	}
	if (trc_permit_check(pid, in->error, sizeof(in->error)) < 0) {
		in->phase = TRC_INJECT_FAILED;
		in->denied = true;
		return -1;
	}
	if (trc_proc_owner(pid, owner, &gid) < 0) {
		fail(in, false, "cannot read the owner of process %d", (int)pid);
		return -1;
	}
	if (opted_out(pid)) {
		fail(in, false, "process %d was started with TRACER_AGENT_INJECT=0: tracer does not load the "
		     "agent into it; the app can still require 'tracer_agent' itself", (int)pid);
		return -1;
	}
	return 0;
}

/*
 * What would break the agent in the process, or refuse the attach after it, checked before
 * anything is written: the namespaces the attach enters (a user namespace that does not map
 * tracer's uid: issue 43), then its seccomp filters and limits (sandbox.c).
 */
static int
check_confinement(struct trc_inject *in)
{
	uint64_t held = 0;

	if (trc_attach_check(in->ruby.pid, &in->denied, in->error, sizeof(in->error)) < 0 ||
	    trc_sandbox_check(in->ruby.pid, TRC_SANDBOX_LOAD, &held, &in->denied, in->error, sizeof(in->error)) < 0) {
		in->phase = TRC_INJECT_FAILED;
		return -1;
	}
	in->frozen_ns = held;
	return 0;
}

/* From the process's Ruby on: again, while a young process has not made its VM yet. */
static void
begin(struct trc_inject *in)
{
	enum trc_rubyproc_miss miss;
	pid_t pid = in->ruby.pid;

	in->retry_ns = 0;
	in->restart = false;
	if ((miss = trc_rubyproc_find(&in->ruby, pid, in->error, sizeof(in->error))) != TRC_RUBYPROC_OK) {
		if (miss == TRC_RUBYPROC_STARTING && (in->starting = young(pid))) {
			in->restart = true;
			in->retry_ns = now_ns() + STARTING_EVERY;
		} else if (miss == TRC_RUBYPROC_UNREADABLE && (errno == EPERM || errno == EACCES)) {
			freeze_failed(in, errno);
		} else {
			in->phase = TRC_INJECT_FAILED;
		}
		return;
	}
	in->starting = false;
	if (!in->checked) {
		if (trc_agentfile_check(&in->agent, in->lib[0] ? in->lib : NULL, &in->ruby, in->owner, in->error,
					sizeof(in->error)) < 0) {
			in->phase = TRC_INJECT_FAILED;
			return;
		}
		if (make_code(in) < 0 || check_confinement(in) < 0)
			return;
		in->checked = true;
	}
	/* Another client's job ran already, and its thread loads the agent now: wait for it. */
	if (loader_running(pid)) {
		in->phase = TRC_INJECT_RAN;
		in->ran_ns = now_ns();
		return;
	}
	queue_or_retry(in);
}

void
trc_inject_start(struct trc_inject *in, pid_t pid, const char *lib)
{
	memset(in, 0, sizeof(*in));
	in->slot = -1;
	in->ruby.pid = pid;
	if (trc_inject_loaded(pid)) {
		in->phase = TRC_INJECT_LOADED;
		return;
	}
	if (check_process(in, pid, &in->owner) < 0)
		return;
	if (lib != NULL)
		snprintf(in->lib, sizeof(in->lib), "%s", lib);
	begin(in);
}

/* ---- after: did it run, did it load, wake it ---- */

static bool
job_ran(struct trc_inject *in)
{
	const struct trc_vmlayout *l = in->ruby.layout;
	uint64_t pj = 0, entry[2] = { 0, 0 };
	uint32_t v = 0;

	if (l->pj_kind == TRC_PJ_QUEUE)
		return rd64(in, in->ruby.vm + l->pj_queue, &pj) == 0 && rd32(in, pj + l->pj_bitset, &v) == 0 &&
		       !((v >> in->slot) & 1);
	/* The flush takes entries from the top of the buffer down, and the index with them. */
	if (rd32(in, in->ruby.vm + l->pj_index, &v) < 0 || v <= (uint32_t)in->slot)
		return true;
	return rd64(in, in->ruby.vm + l->pj_buffer, &pj) == 0 &&
	       trc_rubyproc_read(&in->ruby, pj + (uint64_t)in->slot * l->pj_entry, entry, sizeof(entry)) == 0 &&
	       !is_ours(in, entry);
}

/* Whether the process handles sig (SigCgt in /proc/PID/status). */
static bool
catches(pid_t pid, int sig)
{
	char path[64], line[256];
	bool caught = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return false;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "SigCgt:", 7) == 0)
			caught = (strtoull(line + 7, NULL, 16) >> (sig - 1)) & 1;
	fclose(f);
	return caught;
}

/*
 * The signal that makes this Ruby look at its interrupts when idle. 3.1 sleeps in ppoll on the
 * main thread: SIGVTALRM, its own wake-up signal (a handler that does nothing; Signal.trap
 * refuses it, so no app code runs), ends the wait. 3.3 on sleep in condition variables that no
 * signal ends; SIGCHLD, which Ruby handles itself, reaches its timer thread, which interrupts
 * the main thread through Ruby's own unblocking function: the way Ruby delivers any signal. Its
 * Ruby-level handler does nothing for SIGCHLD unless the app trapped it: then tracer sends
 * nothing (the app would see a child that did not exit), and says so. 0: none to send.
 */
static int
wake_signal(struct trc_inject *in)
{
	const struct trc_vmlayout *l = in->ruby.layout;
	uint64_t trap = 1;
	int sig = l->pj_kind == TRC_PJ_BUFFER ? SIGVTALRM : l->sigchld;

	if (sig == SIGCHLD && (l->sigchld <= 0 || (uint32_t)l->sigchld >= l->nsig ||
			       rd64(in, in->ruby.vm + l->vm_trap_cmd + 8ull * (uint64_t)l->sigchld, &trap) < 0 ||
			       trap != 0)) {
		snprintf(in->error, sizeof(in->error), "process %d is idle, and it traps SIGCHLD itself, so "
			 "tracer does not wake it (its handler would run): the agent loads at its next "
			 "activity", (int)in->ruby.pid);
		return 0;
	}
	if (!catches(in->ruby.pid, sig)) {
		snprintf(in->error, sizeof(in->error), "process %d is idle, and its Ruby does not handle %s, "
			 "so tracer does not wake it: the agent loads at its next activity",
			 (int)in->ruby.pid, sig == SIGCHLD ? "SIGCHLD" : "SIGVTALRM");
		return 0;
	}
	return sig;
}

/*
 * Whether the main thread waits where Ruby itself would interrupt it: in a sleep, a queue, a
 * join or a blocking region, Ruby sets the thread's unblocking function. A thread that sleeps
 * without one (a C extension's own system call, holding Ruby's lock) is left alone: a signal
 * could cut its call short (EINTR), and the job could not run there anyway.
 */
static bool
waits_in_ruby(struct trc_inject *in)
{
	const struct trc_vmlayout *l = in->ruby.layout;
	uint64_t th = 0, ubf = 0;

	return rd64(in, in->ruby.vm + l->vm_main_thread, &th) == 0 && th != 0 &&
	       rd64(in, th + l->thread_unblock, &ubf) == 0 && ubf != 0;
}

/* An idle main thread is woken, the way its Ruby wakes itself; a busy one is left to run. */
static void
maybe_wake(struct trc_inject *in, uint64_t now)
{
	pid_t pid = in->ruby.pid;
	char state;
	int sig;

	if (now - in->written_ns < WAKE_AFTER || (in->woken_ns != 0 && now - in->woken_ns < WAKE_EVERY))
		return;
	in->woken_ns = now;
	state = thread_state(pid, pid);
	in->busy_in_c = state == 'R' || (state == 'S' && !waits_in_ruby(in));
	if (state != 'S' || in->busy_in_c)
		return;         /* running (a long C call?): the VM checks its interrupts when it returns */
	in->idle_untouched = (sig = wake_signal(in)) == 0;
	if (sig != 0 && syscall(SYS_tgkill, pid, pid, sig) == 0)
		in->wakes++;
}

/* Whether an entry of the queue or buffer still holds the job (one not run yet). */
static bool
still_referenced(struct trc_inject *in)
{
	const struct trc_vmlayout *l = in->ruby.layout;
	uint64_t pj = 0, entries[MAX_BUFFER_SCAN][2];
	uint32_t n = 0;

	if (l->pj_kind == TRC_PJ_QUEUE)
		return !job_ran(in);
	if (rd64(in, in->ruby.vm + l->pj_buffer, &pj) < 0 || rd32(in, in->ruby.vm + l->pj_index, &n) < 0 ||
	    n > MAX_BUFFER_SCAN || (n > 0 && trc_rubyproc_read(&in->ruby, pj, entries, n * sizeof(entries[0])) < 0))
		return true;
	for (uint32_t i = 0; i < n; i++)
		if (is_ours(in, entries[i]))
			return true;
	return false;
}

/*
 * Once loaded: the job's queue slot (3.3 on: the table has 32, shared by every extension) and
 * its text are taken back out, as if never there. Only what is still this job's, and only
 * once the VM is done with it.
 */
static void
cleanup(struct trc_inject *in)
{
	const struct trc_vmlayout *l = in->ruby.layout;
	static const char nothing[sizeof(in->code)];
	uint64_t pj = 0, entry[2] = { 0, 0 }, at, zero = 0;
	char text[sizeof(in->code)];
	struct trc_freeze f;

	/* Whoever wrote it: a client that left before the load leaves it to the next one. */
	if (in->slot < 0 || trc_freeze(&f, in->ruby.pid, FREEZE_MS) < 0)
		return;
	if (!in_job_functions(in, &f) && !still_referenced(in)) {
		if (l->pj_kind == TRC_PJ_QUEUE && rd64(in, in->ruby.vm + l->pj_queue, &pj) == 0) {
			at = pj + l->pj_table + (uint64_t)in->slot * l->pj_entry;
			if (trc_rubyproc_read(&in->ruby, at, entry, sizeof(entry)) == 0 && is_ours(in, entry) &&
			    wr(in, at + l->pj_func, &zero, 8) == 0)
				(void)wr(in, at + l->pj_data, &zero, 8);
		}
		if (trc_rubyproc_read(&in->ruby, in->code_at, text, in->code_len) == 0 &&
		    memcmp(text, in->code, in->code_len) == 0)
			(void)wr(in, in->code_at, nothing, in->code_len);
	}
	trc_thaw(&f);
	in->cleanup_ns = f.frozen_ns;
}

enum trc_inject_phase
trc_inject_poll(struct trc_inject *in)
{
	uint64_t now = now_ns();

	if (in->phase == TRC_INJECT_FAILED || in->phase == TRC_INJECT_LOADED)
		return in->phase;
	if (in->retry_ns != 0) {
		if (now >= in->retry_ns && in->restart)
			begin(in);
		else if (now >= in->retry_ns)
			queue_or_retry(in);
		return in->phase;
	}
	/* In the maps is not enough: an attach there and then met an agent not yet made. */
	if (trc_inject_loaded(in->ruby.pid) && (!in->written || agent_ready(in->ruby.pid))) {
		cleanup(in);
		in->phase = TRC_INJECT_LOADED;
		return in->phase;
	}
	if (trc_proc_check(in->ruby.pid) == TRC_PROC_GONE) {
		fail(in, false, "process %d exited before the agent loaded", (int)in->ruby.pid);
		return in->phase;
	}
	if (in->phase == TRC_INJECT_QUEUED && job_ran(in)) {
		in->phase = TRC_INJECT_RAN;
		in->ran_ns = now;
	} else if (in->phase == TRC_INJECT_QUEUED) {
		maybe_wake(in, now);
	}
	/*
	 * The job ran and nobody loads the agent: the VM dropped it (dln_load raised, and the VM
	 * swallows that), or the loader's thread has come and gone already.
	 */
	if (in->phase == TRC_INJECT_RAN && now - in->ran_ns > DROPPED_AFTER && !loader_running(in->ruby.pid) &&
	    in->attempts < MAX_ATTEMPTS)
		queue_or_retry(in);
	return in->phase;
}

const char *
trc_inject_stalled(struct trc_inject *in, double secs)
{
	pid_t pid = in->ruby.pid;
	char why[512];

	if (in->starting)
		snprintf(in->error, sizeof(in->error), "process %d is still starting: its Ruby had not made its VM "
			 "and main thread yet whenever tracer looked, for %g s; run tracer again once it runs",
			 (int)pid, secs);
	else if (in->phase == TRC_INJECT_RAN && trc_sandbox_explain(pid, why, sizeof(why)) == 0)
		snprintf(in->error, sizeof(in->error), "process %d ran the job that loads the agent, but the agent "
			 "has not loaded within %g s: %s", (int)pid, secs, why);
	else if (in->phase == TRC_INJECT_RAN && loader_running(pid))
		snprintf(in->error, sizeof(in->error), "process %d is loading the agent, in its thread "
			 LOADER_THREAD ", and has not finished within %g s: its other threads hold Ruby's lock "
			 "for long stretches (long C calls?), which the load waits for each time it reads a "
			 "file; it goes on: run tracer again, or give it a longer --timeout", (int)pid, secs);
	else if (in->phase == TRC_INJECT_RAN)
		snprintf(in->error, sizeof(in->error), "process %d ran the job that loads the agent, but the "
			 "agent has not loaded within %g s: a busy process lets the loading thread have Ruby's "
			 "lock a slice at a time (run tracer again, or give it a longer --timeout), or the "
			 "load failed (the process's own output may say why)", (int)pid, secs);
	else if (in->retry_ns != 0)
		snprintf(in->error, sizeof(in->error), "process %d was inside Ruby's postponed-job functions "
			 "whenever tracer looked, for %g s: nothing was written; try again", (int)pid, secs);
	else if (in->idle_untouched)
		snprintf(in->error + strlen(in->error), sizeof(in->error) - strlen(in->error),
			 "; run tracer again then (it waited %g s)", secs);
	else if (in->busy_in_c)
		snprintf(in->error, sizeof(in->error), "process %d did not reach a point where Ruby runs "
			 "the job that loads the agent within %g s (its main thread is in a long C call, "
			 "holding Ruby's lock): the agent loads when it returns; run tracer again then",
			 (int)pid, secs);
	else
		snprintf(in->error, sizeof(in->error), "process %d did not run the job that loads the agent "
			 "within %g s%s: the agent loads at its next activity; run tracer again then",
			 (int)pid, secs, in->wakes > 0 ? ", though woken" : "");
	return in->error;
}
