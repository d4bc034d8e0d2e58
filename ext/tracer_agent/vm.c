/* vm.c: what the agent asks of the VM at large: which Ractor runs, a safe point soon, and when. */
#include "vm.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <ruby.h>
#include <ruby/debug.h>

#include "extconf.h"
#ifdef HAVE_RUBY_RACTOR_H
#include <ruby/ractor.h>
#endif

static volatile sig_atomic_t gone;
static volatile int listener_fd = -1;
static void (*job_fn)(void *);
static uint64_t other_ractor_calls;

#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
static rb_postponed_job_handle_t job = POSTPONED_JOB_HANDLE_INVALID;

static void
job_init(void)
{
	job = rb_postponed_job_preregister(0, job_fn, NULL);
	if (job == POSTPONED_JOB_HANDLE_INVALID)
		rb_raise(rb_eRuntimeError, "tracer_agent: the postponed job table is full");
}

void
trc_vm_fire(void)
{
	rb_postponed_job_trigger(job);
}
#else
static void
job_init(void)
{
}

void
trc_vm_fire(void)
{
	rb_postponed_job_register_one(0, job_fn, NULL);
}
#endif

void
trc_vm_listener_fd(int fd)
{
	listener_fd = fd;
}

void
trc_vm_poke(void)
{
	uint64_t one = 1;
	int saved = errno, fd = listener_fd;

	if (gone)
		return;
	trc_vm_fire();
	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0)
		(void)0;        /* a full counter already says "look" */
	errno = saved;
}

void
trc_vm_gone(void)
{
	gone = 1;
}

int
trc_vm_is_gone(void)
{
	return gone;
}

#if defined(HAVE_RB_RACTOR_MAIN_P)
int
trc_vm_main_ractor(void)
{
	return rb_ractor_main_p();
}

static void
main_ractor_init(void)
{
}
#elif defined(HAVE_RB_RACTOR_LOCAL_STORAGE_VALUE_NEWKEY)
/* Ruby 3.1 has no rb_ractor_main_p: a Ractor-local value, set in the main Ractor only. */
static rb_ractor_local_key_t main_mark;

int
trc_vm_main_ractor(void)
{
	VALUE v;
	return rb_ractor_local_storage_value_lookup(main_mark, &v);
}

static void
main_ractor_init(void)
{
	main_mark = rb_ractor_local_storage_value_newkey();
	rb_ractor_local_storage_value_set(main_mark, Qtrue);
}
#else
int
trc_vm_main_ractor(void)
{
	return 1;
}

static void
main_ractor_init(void)
{
}
#endif

void
trc_vm_init(void (*fn)(void *))
{
	job_fn = fn;
	main_ractor_init();
	job_init();
}

void
trc_vm_other_ractor(void)
{
	__atomic_fetch_add(&other_ractor_calls, 1, __ATOMIC_RELAXED);
}

uint64_t
trc_vm_other_ractor_calls(void)
{
	return __atomic_load_n(&other_ractor_calls, __ATOMIC_RELAXED);
}

/* ---- hooks and the service ---- */

static int hook_depth;          /* hooks running now, all threads together */
static int hook_yielding;       /* of those, hooks running the app's code */
static int service_waits;       /* the service was put off by a running hook */

static void
service_may_run(void)
{
	if (hook_depth == hook_yielding && service_waits) {
		service_waits = 0;
		trc_vm_poke();
	}
}

void
trc_vm_hook_in(void)
{
	hook_depth++;
}

void
trc_vm_hook_out(void)
{
	hook_depth--;
	service_may_run();
}

void
trc_vm_yield_begin(void)
{
	hook_yielding++;
	service_may_run();
}

void
trc_vm_yield_end(void)
{
	hook_yielding--;
}

int
trc_vm_defer(void)
{
	if (hook_depth == hook_yielding)
		return 0;
	service_waits = 1;
	return 1;
}
