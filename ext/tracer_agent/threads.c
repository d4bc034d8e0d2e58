/* threads.c: the VM's thread events: how long each thread waited for the GVL, and held it. */
#include "threads.h"

#include <errno.h>
#include <stdlib.h>

#include "extconf.h"
#include "clock.h"
#include "mem.h"

#ifdef HAVE_RB_INTERNAL_THREAD_EVENT_DATA_T_THREAD
#include <ruby/thread.h>

/*
 * The hook runs on whichever native thread hands the GVL over, mostly without the GVL, so
 * nothing here may touch Ruby or a table of the GVL side: each thread has a slot, claimed with
 * a compare-and-swap, whose timestamps only its own events write (one thread's events come one
 * after another) and whose sums are atomics, taken and zeroed by the fold.
 */
#define SLOTS 4096              /* threads one session may see; beyond, their events are lost */
#define GONE ((VALUE)1)         /* a slot whose thread ended and was folded: never reused */

struct slot {
	VALUE thread;           /* 0: free */
	uint64_t ready;         /* ticks: it asked for the GVL (0: it has not) */
	uint64_t resumed;       /* ticks: it got it (0: it does not hold it) */
	uint64_t switches, wait, held;
	int ended;
};

static struct {
	rb_internal_thread_event_hook_t *hook;
	struct slot *slots;
	uint64_t events, lost;
} watch;

static struct slot *
slot_of(VALUE th)
{
	uint32_t i = (uint32_t)(((uint64_t)th >> 3) * 0x9E3779B97F4A7C15ull >> 52) & (SLOTS - 1);

	for (uint32_t n = 0; n < SLOTS; n++, i = (i + 1) & (SLOTS - 1)) {
		struct slot *s = &watch.slots[i];
		VALUE was = __atomic_load_n(&s->thread, __ATOMIC_ACQUIRE);

		if (was == th)
			return s;
		if (was == 0 && __atomic_compare_exchange_n(&s->thread, &was, th, 0, __ATOMIC_ACQ_REL,
		    __ATOMIC_ACQUIRE))
			return s;
		if (was == th)
			return s;
	}
	return NULL;
}

static void
on_event(rb_event_flag_t ev, const rb_internal_thread_event_data_t *data, void *unused)
{
	uint64_t now = trc_clock_now();
	struct slot *s;

	__atomic_fetch_add(&watch.events, 1, __ATOMIC_RELAXED);
	if ((s = slot_of(data->thread)) == NULL) {
		__atomic_fetch_add(&watch.lost, 1, __ATOMIC_RELAXED);
		return;
	}
	switch (ev) {
	case RUBY_INTERNAL_THREAD_EVENT_READY:
		s->ready = now;
		break;
	case RUBY_INTERNAL_THREAD_EVENT_RESUMED:
		if (s->ready != 0)
			__atomic_fetch_add(&s->wait, now - s->ready, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->switches, 1, __ATOMIC_RELAXED);
		s->ready = 0;
		s->resumed = now;
		break;
	case RUBY_INTERNAL_THREAD_EVENT_SUSPENDED:
		if (s->resumed != 0)
			__atomic_fetch_add(&s->held, now - s->resumed, __ATOMIC_RELAXED);
		s->resumed = 0;
		break;
	case RUBY_INTERNAL_THREAD_EVENT_EXITED:
		__atomic_store_n(&s->ended, 1, __ATOMIC_RELEASE);
		break;
	default:
		break;
	}
}

int
trc_threads_watch(int on)
{
	if (on && watch.hook == NULL) {
		if ((watch.slots = trc_calloc(SLOTS, sizeof(struct slot))) == NULL) {
			errno = ENOMEM;
			return -1;
		}
		watch.events = watch.lost = 0;
		watch.hook = rb_internal_thread_add_event_hook(on_event, RUBY_INTERNAL_THREAD_EVENT_READY |
		    RUBY_INTERNAL_THREAD_EVENT_RESUMED | RUBY_INTERNAL_THREAD_EVENT_SUSPENDED |
		    RUBY_INTERNAL_THREAD_EVENT_EXITED, NULL);
	} else if (!on && watch.hook != NULL) {
		rb_internal_thread_remove_event_hook(watch.hook);
		watch.hook = NULL;
		free(watch.slots);
		watch.slots = NULL;
	}
	return 0;
}

uint64_t
trc_threads_events(void)
{
	return __atomic_exchange_n(&watch.events, 0, __ATOMIC_RELAXED);
}

uint64_t
trc_threads_fold(void (*add)(VALUE thread, uint64_t switches, uint64_t wait, uint64_t held, void *arg), void *arg)
{
	for (uint32_t i = 0; watch.slots != NULL && i < SLOTS; i++) {
		struct slot *s = &watch.slots[i];
		VALUE th = __atomic_load_n(&s->thread, __ATOMIC_ACQUIRE);
		uint64_t n, wait, held;

		if (th == 0 || th == GONE)
			continue;
		n = __atomic_exchange_n(&s->switches, 0, __ATOMIC_RELAXED);
		wait = __atomic_exchange_n(&s->wait, 0, __ATOMIC_RELAXED);
		held = __atomic_exchange_n(&s->held, 0, __ATOMIC_RELAXED);
		if (n != 0 || wait != 0 || held != 0)
			add(th, n, wait, held, arg);
		/* Its events are over: the slot is left as a marker that others probe past. */
		if (__atomic_load_n(&s->ended, __ATOMIC_ACQUIRE))
			__atomic_store_n(&s->thread, GONE, __ATOMIC_RELEASE);
	}
	return __atomic_exchange_n(&watch.lost, 0, __ATOMIC_RELAXED);
}

void
trc_threads_mark(void)
{
	for (uint32_t i = 0; watch.slots != NULL && i < SLOTS; i++) {
		VALUE th = __atomic_load_n(&watch.slots[i].thread, __ATOMIC_ACQUIRE);

		if (th != 0 && th != GONE)
			rb_gc_mark(th);
	}
}

#else /* no thread events in this Ruby */

int
trc_threads_watch(int on)
{
	errno = ENOSYS;
	return on ? -1 : 0;
}

uint64_t
trc_threads_events(void)
{
	return 0;
}

uint64_t
trc_threads_fold(void (*add)(VALUE thread, uint64_t switches, uint64_t wait, uint64_t held, void *arg), void *arg)
{
	return 0;
}

void
trc_threads_mark(void)
{
}

#endif
