/* sample.c: the sampling profiler: every thread's stack, taken where it is, at a set rate. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* pthread_setname_np, pthread_timedjoin_np */
#endif
#include "sample.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <ruby.h>
#include <ruby/debug.h>

#include "extconf.h"
#include "clock.h"
#include "frames.h"
#include "mem.h"
#include "names.h"
#include "stacks.h"
#include "tracer_protocol.h"

#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
#include <ruby/thread.h>
#endif

/* Exported by every libruby since 1.9, in no public header: whether this thread holds the GVL. */
int ruby_thread_has_gvl_p(void);
int ruby_native_thread_p(void);

#define MAX_THREADS 1024        /* threads sampled at once; more are left out, and counted */
#define TID_SLOTS 4096
#define MAX_DEPTH 512           /* frames kept of a stack, the innermost; the rest is one frame */
#define FRAMES_CAP (1u << 17)   /* distinct frames in one session */
#define NODES (1u << 17)        /* distinct stack nodes in one interval */
#define PENDING_MAX (8u << 20)  /* bytes of packed intervals the GVL side has not sent yet */
#define CAP_WINDOW_NS 1000000000ull     /* the cap is kept over each second */
#define MIN_HZ 1
/* The kernel checks CPU timers at its tick (CONFIG_HZ: 250 on Debian, 4 ms): faster rates are
 * kept by the sampler reading each thread's CPU clock instead. */
#define TIMER_MIN_NS 4000000ull
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid   /* glibc before 2.35 names it so only */
#endif

enum state {
	ST_UNKNOWN = 0,         /* no thread event seen yet (or none in this Ruby) */
	ST_RUNNING,             /* holds the GVL */
	ST_SUSPENDED,           /* let it go: sleeping, in IO, in C without it */
	ST_READY,               /* waits for it */
	ST_EXITED,
};

/*
 * A Ruby thread. The GVL side fills in who it is (tid, thread, clock); its own handler and
 * hooks use the rest, so that no two writers share a field but the atomics.
 */
struct th {
	pid_t tid;              /* 0: free slot */
	VALUE thread;
	clockid_t clock;        /* its CPU clock */
	int stat_fd;            /* /proc/self/task/TID/stat, where no thread event says its state */
	uint32_t retired;       /* the sampler's swap count when it went (0: it has not) */
	timer_t timer;          /* by CPU time: the kernel's timer on its CPU clock */
	int has_timer;
	uint32_t named;         /* its name was sent */
	VALUE name;             /* the name sent */

	int state;              /* enum state (atomic) */
	int busy;               /* its handler or hook is at work (atomic) */
	uint64_t wall_last, cpu_last;   /* at its last sample (atomic exchanges) */
	uint64_t cpu_tick;      /* the sampler: its CPU clock when last sampled */
	uint64_t cpu_seen;      /* the sampler: its CPU clock at the last tick */
	uint32_t tag;           /* the request or job it serves (0: none), read by its samples */
	uint32_t tags[8];       /* the GVL side: the tags it replaced, innermost last */
	uint32_t ntags;

	/* The stack it had when it last let the GVL go (or, without events, at its last sample). */
	uint32_t saved_seq;     /* odd while written */
	uint32_t saved_n;
	uint64_t saved_at;
	uint32_t saved[MAX_DEPTH + 1];  /* frame ids, outermost first */
	/* The sampler: saved's path in the current tree. */
	uint32_t blk_swap, blk_seq, blk_leaf;

	/* Its handler: the last path it walked, in the tree of swap count path_swap. */
	uint32_t path_swap, path_root, path_n;
	uint32_t path_frames[MAX_DEPTH + 1], path_nodes[MAX_DEPTH + 1];
	VALUE buf[MAX_DEPTH + 1];
	int lines[MAX_DEPTH + 1];
	uint32_t ids[MAX_DEPTH + 1];
	/* Its last numbered stack's outer frames that the table pins: frames and their ids. */
	VALUE known[MAX_DEPTH + 1];
	uint32_t known_ids[MAX_DEPTH + 1];
	int nknown;
};

/* A thread's slot by a key (tid, or Ruby thread): open addressing, 0 empty. */
#define KEY_REMOVED UINT64_MAX
struct keys {
	uint64_t key[TID_SLOTS];
	uint32_t slot[TID_SLOTS];
};

static struct {
	int active;             /* handlers and hooks work (atomic) */
	int clock;              /* enum trc_sample_clock */
	int events;             /* the VM's thread events say each thread's state */
	int magic;              /* the value of the sampler's SIGURGs */
	pid_t pid;
	uint64_t asked_ns, period_ns;   /* the tick: asked, and now (the cap may lengthen it) */
	int timers;             /* by CPU time: each thread's own kernel timer signals it */
	uint64_t interval_ns;
	uint32_t cap_ppm;

	struct th *th;          /* MAX_THREADS slots (mapped: untouched ones cost nothing) */
	size_t th_bytes;
	uint32_t nth;           /* slots ever used */
	struct keys by_tid;     /* a thread's slot by its tid */
	struct keys by_thread;  /* by its Ruby thread, for the VM's thread events (3.3 on) */
	uint32_t own_every;     /* handlers: one in OWN_EVERY reads its own time (atomic count) */

	struct trc_stacks trees[2];
	uint32_t cur;           /* the tree samples go to (atomic) */
	uint32_t swaps;         /* trees swapped so far (atomic) */
	uint32_t inside[2];     /* handlers and hooks at work in each tree (atomic) */
	int gc_phase;           /* TRC_PFRAME_MARKING or _SWEEPING during a collection */

	pthread_t sampler;
	int sampler_on;
	int wake_fd;            /* eventfd: wakes the sampler to stop */
	int stop;

	/* Counts since the last pack (atomic). */
	uint64_t samples, lost, own_ns, left_out;
	uint64_t pack_at;       /* when the last interval began (sampler) */

	/* Tags (trc_sample_tag_push), GVL side: text -> id, and those to send. */
	VALUE tag_ids;          /* Hash, or Qnil */
	VALUE tags_new;         /* Array of [id, text], or Qnil */

	/* Intervals packed by the sampler, for the GVL side: under lock. */
	pthread_mutex_t lock;
	msgpack_sbuffer pending;
	uint32_t npending;
	size_t *ends;           /* where each packed interval ends in pending */
	uint32_t ends_cap;
	uint64_t dropped;       /* intervals' samples dropped for want of room (under lock) */
} p = { .wake_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER, .tag_ids = Qnil, .tags_new = Qnil };

#define MAX_TAGS 4096           /* distinct tags a session; more share the last one, "(other)" */
/*
 * A handler's own time is read from its thread's CPU clock, a system call (1-4 us on a VM,
 * more than the rest of a sample): one handler in OWN_EVERY reads it, and counts for all.
 */
#define OWN_EVERY 16

/* ---- threads ---- */

static inline pid_t
gettid_now(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static inline uint32_t
key_hash(uint64_t k)
{
	return ((uint32_t)(k ^ k >> 3) * 2654435761u) & (TID_SLOTS - 1);
}

/* Any thread, async-signal-safe: k's slot, or NULL. */
static struct th *
key_get(const struct keys *h, uint64_t k)
{
	uint32_t i = key_hash(k);

	for (uint32_t n = 0; n < TID_SLOTS; n++, i = (i + 1) & (TID_SLOTS - 1)) {
		uint64_t v = __atomic_load_n(&h->key[i], __ATOMIC_ACQUIRE);

		if (v == k)
			return &p.th[__atomic_load_n(&h->slot[i], __ATOMIC_ACQUIRE)];
		if (v == 0)
			return NULL;
	}
	return NULL;
}

/* GVL side only: the one writer of the tables. */
static void
key_put(struct keys *h, uint64_t k, uint32_t slot)
{
	uint32_t i = key_hash(k);

	for (uint32_t n = 0; n < TID_SLOTS; n++, i = (i + 1) & (TID_SLOTS - 1)) {
		uint64_t v = h->key[i];

		if (v == 0 || v == KEY_REMOVED || v == k) {
			__atomic_store_n(&h->slot[i], slot, __ATOMIC_RELEASE);
			__atomic_store_n(&h->key[i], k, __ATOMIC_RELEASE);
			return;
		}
	}
}

/* Unless k leads to a newer slot (a tid reused, a Ruby thread given another by M:N threads). */
static void
key_remove(struct keys *h, uint64_t k, uint32_t slot)
{
	uint32_t i = key_hash(k);

	for (uint32_t n = 0; n < TID_SLOTS; n++, i = (i + 1) & (TID_SLOTS - 1)) {
		if (h->key[i] == k) {
			if (h->slot[i] == slot)
				__atomic_store_n(&h->key[i], KEY_REMOVED, __ATOMIC_RELEASE);
			return;
		}
		if (h->key[i] == 0)
			return;
	}
}

static struct th *
th_of(pid_t tid)
{
	return key_get(&p.by_tid, (uint64_t)tid);
}

/* Thread objects are marked, so they stay put: a thread's address is its key. The VM's
 * thread events name it (3.3 on), which spares each a gettid system call. */
static void
slot_keys_put(struct th *t)
{
	key_put(&p.by_tid, (uint64_t)t->tid, (uint32_t)(t - p.th));
	key_put(&p.by_thread, (uint64_t)t->thread, (uint32_t)(t - p.th));
}

static void
slot_keys_remove(struct th *t)
{
	key_remove(&p.by_tid, (uint64_t)t->tid, (uint32_t)(t - p.th));
	key_remove(&p.by_thread, (uint64_t)t->thread, (uint32_t)(t - p.th));
}

/* The kernel's CPU clock of any thread of ours, by tid (glibc's pthread_getcpuclockid). */
static clockid_t
cpu_clock_of(pid_t tid)
{
	return (clockid_t)((~(unsigned)tid << 3) | 6);
}

static uint64_t
read_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether the kernel runs the thread now ("R"), where no thread event says more. */
static int
kernel_running(const struct th *t)
{
	char buf[256], *paren;
	ssize_t n;

	if (t->stat_fd < 0)
		return 0;
	n = pread(t->stat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	paren = strrchr(buf, ')');
	return paren != NULL && paren[1] == ' ' && paren[2] == 'R';
}

/*
 * The sampler: whether t holds the GVL now, as far as can be told without stopping it: its
 * own events say, from the first one on; before (or in a Ruby without them), a thread that
 * used CPU since the last tick and that the kernel runs now. cpu: its CPU clock now.
 */
static int
holds_gvl(struct th *t, uint64_t cpu)
{
	int s = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE), ran = cpu != t->cpu_seen;

	t->cpu_seen = cpu;
	if (p.events && s != ST_UNKNOWN)
		return s == ST_RUNNING;
	/* /proc is read only for a thread that ran: most of an app's threads wait. */
	return ran && kernel_running(t);
}

/* ---- the tree ---- */

/* Enters the current tree (handlers and hooks): its index, to leave with. */
static uint32_t
tree_enter(void)
{
	for (;;) {
		uint32_t g = __atomic_load_n(&p.cur, __ATOMIC_SEQ_CST);

		__atomic_add_fetch(&p.inside[g], 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&p.cur, __ATOMIC_SEQ_CST) == g)
			return g;
		__atomic_sub_fetch(&p.inside[g], 1, __ATOMIC_SEQ_CST);
	}
}

static void
tree_leave(uint32_t g)
{
	__atomic_sub_fetch(&p.inside[g], 1, __ATOMIC_SEQ_CST);
}

/*
 * The frame ids of the current thread's stack, innermost first, into t->ids; numbering new
 * frames only if the thread holds the GVL (frames.h). Returns how many, MAX_DEPTH + 1 when
 * deeper. Async-signal-safe; t->busy held.
 */
static int
stack_ids(struct th *t, int numbering)
{
	size_t gc = rb_gc_count();
	uint32_t added[MAX_DEPTH + 1];
	int n = rb_profile_frames(0, MAX_DEPTH + 1, t->buf, t->lines), nadded = 0, outer = n;

	/*
	 * The outer frames this stack shares with the thread's last one keep the ids they had: the
	 * table marks and pins the frames it numbered (frames.h), so such a frame's address stays
	 * its own across collections. A Rails request's stack is 150 to 200 frames deep, most of
	 * them the same from one tick to the next, and a worker collects every few requests: a
	 * comparison each instead of a lookup in the table (perf on Redmine: the lookups were a
	 * quarter of the profiler's own time when collections emptied this).
	 */
	if (numbering)
		for (int j = t->nknown - 1; outer > 0 && j >= 0 && t->buf[outer - 1] == t->known[j]; j--)
			t->ids[--outer] = t->known_ids[j];
	for (int i = 0; i < outer; i++) {
		int was_added;
		uint32_t id = trc_frames_id(t->buf[i], numbering, &was_added);

		t->ids[i] = id != 0 ? id : TRC_PFRAME_UNKNOWN;
		if (was_added)
			added[nadded++] = id;
	}
	t->nknown = 0;
	/* A collection that began meanwhile may have moved or freed what was just numbered. */
	if (rb_gc_count() != gc || rb_during_gc()) {
		for (int i = 0; i < nadded; i++)
			trc_frames_suspect(added[i]);
		return n;
	}
	if (numbering) {
		/* Only frames the table pins: another is looked up again next time. */
		int k = n;

		while (k > 0 && t->ids[k - 1] != TRC_PFRAME_UNKNOWN && trc_frames_pinned(t->ids[k - 1]))
			k--;
		memcpy(t->known, t->buf + k, (size_t)(n - k) * sizeof(VALUE));
		memcpy(t->known_ids, t->ids + k, (size_t)(n - k) * sizeof(uint32_t));
		t->nknown = n - k;
	}
	return n;
}

/* ids[0..n) (innermost first) as a path from the root into out: outermost first, MAX_DEPTH
 * frames at most after a TRUNCATED pseudo-frame standing for the rest. Returns its length. */
static uint32_t
path_of(const uint32_t *ids, int n, uint32_t *out)
{
	int m = n > MAX_DEPTH ? MAX_DEPTH : n;
	uint32_t j = 0;

	if (n > MAX_DEPTH)
		out[j++] = TRC_PFRAME_TRUNCATED;
	for (int i = m - 1; i >= 0; i--)
		out[j++] = ids[i];
	return j;
}

/*
 * The node of ids[0..n) (innermost first) under root in tree g, reusing as much of the last
 * path the thread walked there as the two share. 0 when the tree is full.
 */
static uint32_t
walk(struct th *t, uint32_t g, uint32_t root, const uint32_t *ids, int n)
{
	struct trc_stacks *tree = &p.trees[g];
	uint32_t swap = __atomic_load_n(&p.swaps, __ATOMIC_ACQUIRE), node = root, path[MAX_DEPTH + 1];
	uint32_t len = path_of(ids, n, path), depth = 0;

	if (t->path_swap != swap || t->path_root != root)
		t->path_n = 0;
	t->path_swap = swap;
	t->path_root = root;
	while (depth < len && depth < t->path_n && t->path_frames[depth] == path[depth])
		node = t->path_nodes[depth++];
	for (; depth < len && node != 0; depth++) {
		node = trc_stacks_child(tree, node, path[depth]);
		t->path_frames[depth] = path[depth];
		t->path_nodes[depth] = node;
	}
	t->path_n = node != 0 ? depth : 0;
	return node;
}

/* Keeps ids[0..n) (innermost first) as the thread's stack for when it does not hold the GVL. */
static void
save_stack(struct th *t, const uint32_t *ids, int n, uint64_t now)
{
	__atomic_add_fetch(&t->saved_seq, 1, __ATOMIC_SEQ_CST);
	t->saved_n = path_of(ids, n, t->saved);
	t->saved_at = now;
	__atomic_add_fetch(&t->saved_seq, 1, __ATOMIC_SEQ_CST);
}

static void
count_lost(void)
{
	__atomic_add_fetch(&p.lost, 1, __ATOMIC_RELAXED);
}

/* One sample of the current thread t, which was signalled (handler). */
static void
sample_here(struct th *t, uint32_t g, uint64_t now, uint64_t cpu)
{
	struct trc_stacks *tree = &p.trees[g];
	uint64_t wall = now - __atomic_exchange_n(&t->wall_last, now, __ATOMIC_ACQ_REL);
	uint32_t root = trc_stacks_root(tree, (uint32_t)(t - p.th), t->tag), node;
	int s = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
	/* Numbering frames needs the GVL (frames.h): the thread's own events say, else the VM. */
	int gvl = p.events && s != ST_UNKNOWN ? s == ST_RUNNING : ruby_thread_has_gvl_p();

	if (root == 0) {
		count_lost();
		return;
	}
	if (rb_during_gc()) {
		/* The stacks may be moving: the collection alone, as it is, under the thread. */
		node = trc_stacks_child(tree, trc_stacks_child(tree, root, TRC_PFRAME_GC),
		    __atomic_load_n(&p.gc_phase, __ATOMIC_RELAXED) == TRC_PFRAME_SWEEPING ?
		    TRC_PFRAME_SWEEPING : TRC_PFRAME_MARKING);
	} else if (!gvl) {
		/* In C without the GVL: its stack stays as it was when it let go (ruby 3.1 only). */
		int n = stack_ids(t, 0);

		node = trc_stacks_child(tree, walk(t, g, root, t->ids, n), TRC_PFRAME_NOGVL);
	} else {
		int n = stack_ids(t, 1);

		node = walk(t, g, root, t->ids, n);
		if (!p.events)
			save_stack(t, t->ids, n, now);
	}
	if (node == 0) {
		count_lost();
		return;
	}
	trc_stacks_add(tree, node, cpu, p.clock == TRC_SAMPLE_WALL ? wall : 0);
	__atomic_add_fetch(&p.samples, 1, __ATOMIC_RELAXED);
}

int
trc_sample_signal(const siginfo_t *info)
{
	int saved = errno;
	struct th *t;
	uint64_t t0, cpu;
	uint32_t g;
	int timer, timed;

	/* The sampler's sigqueue, or a thread's own CPU timer: both carry the magic value. */
	if (info == NULL || p.magic == 0 || info->si_value.sival_int != p.magic ||
	    !((info->si_code == SI_QUEUE && info->si_pid == p.pid) || info->si_code == SI_TIMER))
		return 0;
	timer = info->si_code == SI_TIMER;
	g = tree_enter();
	if (!__atomic_load_n(&p.active, __ATOMIC_SEQ_CST) || !ruby_native_thread_p() ||
	    (t = th_of(gettid_now())) == NULL)
		goto out;
	if (__atomic_exchange_n(&t->busy, 1, __ATOMIC_ACQUIRE)) {
		count_lost();   /* its own hook was at work when the signal came */
		goto out;
	}
	/*
	 * Its own time is CPU time: a handler preempted on a busy machine costs the app nothing
	 * (by the monotonic clock, two Redmine workers under load read 1.27% of their wall time,
	 * the preemptions' turns counted in). A thread's own CPU timer fires once a period of its
	 * CPU time, the periods it missed in si_overrun: that is the sample's CPU time, and the
	 * clock is read for the handler's own time once in OWN_EVERY. The sampler's signal has no
	 * such measure: its clock is read each time.
	 */
	timed = !timer || __atomic_add_fetch(&p.own_every, 1, __ATOMIC_RELAXED) % OWN_EVERY == 0;
	t0 = timed ? read_ns(CLOCK_THREAD_CPUTIME_ID) : 0;
	if (timer)
		cpu = p.period_ns * (1 + (uint64_t)(info->si_overrun > 0 ? info->si_overrun : 0));
	else
		cpu = t0 - __atomic_exchange_n(&t->cpu_last, t0, __ATOMIC_ACQ_REL);
	sample_here(t, g, trc_clock_mono_ns(), cpu);
	__atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE);
	if (timed)
		__atomic_add_fetch(&p.own_ns, (read_ns(CLOCK_THREAD_CPUTIME_ID) - t0) * (timer ? OWN_EVERY : 1),
		    __ATOMIC_RELAXED);

out:
	tree_leave(g);
	errno = saved;
	return 1;
}

/* ---- the VM's events: a thread's state, and its stack as it lets the GVL go ---- */

#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
static rb_internal_thread_event_hook_t *thread_hook;

static void
suspended(struct th *t, uint64_t now)
{
	uint32_t g;
	int n;

	/* At most once a tick: a thread that lets the GVL go often pays for one stack a tick. */
	if (now - t->saved_at < p.period_ns || rb_during_gc())
		return;
	if (__atomic_exchange_n(&t->busy, 1, __ATOMIC_ACQUIRE))
		return;
	g = tree_enter();
	n = stack_ids(t, 1);
	save_stack(t, t->ids, n, now);
	tree_leave(g);
	__atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE);
	/* The hook cannot be preempted for long holding the GVL: its wall time is its CPU time. */
	__atomic_add_fetch(&p.own_ns, trc_clock_mono_ns() - now, __ATOMIC_RELAXED);
}

static void
on_thread_event(rb_event_flag_t ev, const rb_internal_thread_event_data_t *data, void *unused)
{
	struct th *t;

	if (!__atomic_load_n(&p.active, __ATOMIC_ACQUIRE))
		return;
#ifdef HAVE_RB_INTERNAL_THREAD_EVENT_DATA_T_THREAD
	t = key_get(&p.by_thread, (uint64_t)data->thread);
#else
	(void)data;
	t = th_of(gettid_now());
#endif
	if (t == NULL)
		return;
	switch (ev) {
	case RUBY_INTERNAL_THREAD_EVENT_RESUMED:
		__atomic_store_n(&t->state, ST_RUNNING, __ATOMIC_RELEASE);
		break;
	case RUBY_INTERNAL_THREAD_EVENT_READY:
		__atomic_store_n(&t->state, ST_READY, __ATOMIC_RELEASE);
		break;
	case RUBY_INTERNAL_THREAD_EVENT_SUSPENDED:
		/* Still holding the GVL here: the stack is its own and no collection runs. */
		suspended(t, trc_clock_mono_ns());
		__atomic_store_n(&t->state, ST_SUSPENDED, __ATOMIC_RELEASE);
		break;
	case RUBY_INTERNAL_THREAD_EVENT_EXITED:
		__atomic_store_n(&t->state, ST_EXITED, __ATOMIC_RELEASE);
		break;
	default:
		break;
	}
}

static void
watch_threads(int on)
{
	if (on && thread_hook == NULL)
		thread_hook = rb_internal_thread_add_event_hook(on_thread_event, RUBY_INTERNAL_THREAD_EVENT_READY |
		    RUBY_INTERNAL_THREAD_EVENT_RESUMED | RUBY_INTERNAL_THREAD_EVENT_SUSPENDED |
		    RUBY_INTERNAL_THREAD_EVENT_EXITED, NULL);
	else if (!on && thread_hook != NULL) {
		rb_internal_thread_remove_event_hook(thread_hook);
		thread_hook = NULL;
	}
	p.events = thread_hook != NULL;
}
#else
static void
watch_threads(int on)
{
	(void)on;
	p.events = 0;
}
#endif

/* The collection's phase, for samples taken inside it. Runs inside the GC: numbers only. */
static void
gc_phase_hook(rb_event_flag_t ev, VALUE data, VALUE self, ID mid, VALUE klass)
{
	(void)data, (void)self, (void)mid, (void)klass;
	if (ev == RUBY_INTERNAL_EVENT_GC_START)
		__atomic_store_n(&p.gc_phase, TRC_PFRAME_MARKING, __ATOMIC_RELAXED);
	else if (ev == RUBY_INTERNAL_EVENT_GC_END_MARK)
		__atomic_store_n(&p.gc_phase, TRC_PFRAME_SWEEPING, __ATOMIC_RELAXED);
}

/* ---- the sampler thread ---- */

/* A SIGURG with the profiler's value to one thread: its handler takes the sample. */
static int
poke(pid_t tid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = SIGURG;
	si.si_code = SI_QUEUE;
	si.si_pid = p.pid;
	si.si_uid = getuid();
	si.si_value.sival_int = p.magic;
	return (int)syscall(SYS_rt_tgsigqueueinfo, p.pid, tid, SIGURG, &si);
}

/*
 * A sample of a thread without the GVL, from the stack it saved, under pseudo: the sampler
 * only. Its path in the current tree is kept until the stack or the tree changes.
 */
static void
sample_saved(struct th *t, uint32_t g, uint32_t pseudo, uint64_t cpu, uint64_t wall)
{
	struct trc_stacks *tree = &p.trees[g];
	uint32_t swap = __atomic_load_n(&p.swaps, __ATOMIC_ACQUIRE);
	uint32_t seq = __atomic_load_n(&t->saved_seq, __ATOMIC_ACQUIRE), node;

	if (seq & 1)
		seq = t->blk_seq + 1;   /* being written: take the last path, if any */
	if (t->blk_swap != swap || t->blk_seq != seq || t->blk_leaf == 0) {
		uint32_t ids[MAX_DEPTH + 1], n = __atomic_load_n(&t->saved_n, __ATOMIC_ACQUIRE);

		if (n > MAX_DEPTH + 1)
			n = MAX_DEPTH + 1;
		memcpy(ids, t->saved, n * sizeof(ids[0]));
		if (__atomic_load_n(&t->saved_seq, __ATOMIC_ACQUIRE) != seq)
			n = 0;  /* rewritten while copied: the thread alone, this once */
		node = trc_stacks_root(tree, (uint32_t)(t - p.th), t->tag);
		for (uint32_t i = 0; i < n && node != 0; i++)
			node = trc_stacks_child(tree, node, ids[i]); /* NOLINT(clang-analyzer-core.CallAndMessage): i < n, copied */
		t->blk_swap = swap;
		t->blk_seq = n > 0 ? seq : 0;
		t->blk_leaf = node;
	}
	node = trc_stacks_child(tree, t->blk_leaf, pseudo);
	if (node == 0) {
		count_lost();
		return;
	}
	trc_stacks_add(tree, node, cpu, wall);
	__atomic_add_fetch(&p.samples, 1, __ATOMIC_RELAXED);
}

static void
tick_thread(struct th *t, uint64_t now)
{
	int s = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
	uint64_t cpu;
	uint32_t g;

	if (s == ST_EXITED)
		return;
	if (p.clock == TRC_SAMPLE_CPU && p.timers)
		return;         /* the kernel signals each thread itself */
	/* A thread's events say where it stands; its CPU clock is read only when they do not. */
	cpu = p.clock == TRC_SAMPLE_CPU || !p.events || s == ST_UNKNOWN ? read_ns(t->clock) : t->cpu_seen;
	if (p.clock == TRC_SAMPLE_CPU) {
		uint64_t since;

		if (cpu == 0 || cpu - t->cpu_tick < p.period_ns) {
			t->cpu_seen = cpu;
			return;
		}
		/* The rest of a tick carries over: a thread at 100% of a CPU is sampled at the rate. */
		t->cpu_tick = cpu - (cpu - t->cpu_tick) % p.period_ns;
		if (holds_gvl(t, cpu)) {
			if (poke(t->tid) < 0)
				count_lost();
			return;
		}
		/* CPU used without the GVL (a C extension's work): its saved stack. */
		since = cpu - __atomic_exchange_n(&t->cpu_last, cpu, __ATOMIC_ACQ_REL);
		g = tree_enter();
		sample_saved(t, g, TRC_PFRAME_NOGVL, since, 0);
		tree_leave(g);
		return;
	}
	if (holds_gvl(t, cpu)) {
		if (poke(t->tid) < 0)
			count_lost();
		return;
	}
	g = tree_enter();
	sample_saved(t, g, s == ST_READY ? TRC_PFRAME_GVL : TRC_PFRAME_BLOCKED, 0,
	    now - __atomic_exchange_n(&t->wall_last, now, __ATOMIC_ACQ_REL));
	tree_leave(g);
}

static void
pack_u(msgpack_packer *pk, uint64_t v)
{
	msgpack_pack_uint64(pk, v);
}

/* The sampler: the old tree, once every writer left it, as an interval's fields, then cleared. */
static void
pack_interval(uint32_t old, uint64_t now)
{
	struct trc_stacks *tree = &p.trees[old];
	uint32_t count, roots = 0, nodes = 0, weights = 0;
	msgpack_packer pk;
	uint64_t full;

	while (__atomic_load_n(&p.inside[old], __ATOMIC_SEQ_CST) != 0)
		sched_yield();
	count = trc_stacks_count(tree);
	full = trc_stacks_full(tree);
	for (uint32_t id = 1; id < count; id++) {
		const struct trc_stacks_node *n = trc_stacks_node(tree, id);

		if (n == NULL)
			continue;
		roots += n->parent == 0;
		nodes += n->parent != 0;
		weights += n->samples != 0;
	}
	pthread_mutex_lock(&p.lock);
	if (p.pending.size > PENDING_MAX || p.npending == UINT32_MAX) {
		for (uint32_t id = 1; id < count; id++) {
			const struct trc_stacks_node *n = trc_stacks_node(tree, id);
			p.dropped += n != NULL ? n->samples : 0;
		}
		pthread_mutex_unlock(&p.lock);
		trc_stacks_clear(tree);
		return;
	}
	msgpack_packer_init(&pk, &p.pending, msgpack_sbuffer_write);
	/* elapsed_ns, samples, lost, hz, own_ns, roots, nodes, weights */
	pack_u(&pk, now - p.pack_at);
	pack_u(&pk, __atomic_exchange_n(&p.samples, 0, __ATOMIC_RELAXED));
	pack_u(&pk, __atomic_exchange_n(&p.lost, 0, __ATOMIC_RELAXED) + full + p.dropped);
	p.dropped = 0;
	pack_u(&pk, 1000000000ull / p.period_ns);
	pack_u(&pk, __atomic_exchange_n(&p.own_ns, 0, __ATOMIC_RELAXED));
	msgpack_pack_array(&pk, roots);
	for (uint32_t id = 1; id < count; id++) {
		const struct trc_stacks_node *n = trc_stacks_node(tree, id);

		if (n == NULL || n->parent != 0)
			continue;
		msgpack_pack_array(&pk, 3);
		msgpack_pack_uint32(&pk, id);
		msgpack_pack_uint32(&pk, n->frame);
		msgpack_pack_uint32(&pk, n->tag);
	}
	msgpack_pack_array(&pk, nodes);
	for (uint32_t id = 1; id < count; id++) {
		const struct trc_stacks_node *n = trc_stacks_node(tree, id);

		if (n == NULL || n->parent == 0)
			continue;
		msgpack_pack_array(&pk, 3);
		msgpack_pack_uint32(&pk, id);
		msgpack_pack_uint32(&pk, n->parent);
		msgpack_pack_uint32(&pk, n->frame);
	}
	msgpack_pack_array(&pk, weights);
	for (uint32_t id = 1; id < count; id++) {
		const struct trc_stacks_node *n = trc_stacks_node(tree, id);

		if (n == NULL || n->samples == 0)
			continue;
		msgpack_pack_array(&pk, 4);
		msgpack_pack_uint32(&pk, id);
		msgpack_pack_uint32(&pk, n->samples);
		msgpack_pack_uint64(&pk, n->cpu_ns);
		msgpack_pack_uint64(&pk, n->wall_ns);
	}
	if (p.npending == p.ends_cap) {
		uint32_t cap = p.ends_cap ? p.ends_cap * 2 : 8;
		size_t *ends = realloc(p.ends, cap * sizeof(*ends));

		if (ends != NULL) {
			p.ends = ends;
			p.ends_cap = cap;
		}
	}
	if (p.npending < p.ends_cap)
		p.ends[p.npending++] = p.pending.size;
	pthread_mutex_unlock(&p.lock);
	p.pack_at = now;
	trc_stacks_clear(tree);
}

/* The sampler: swaps the trees, then packs the one samples went to until now. */
static void
swap_and_pack(uint64_t now)
{
	uint32_t old = __atomic_load_n(&p.cur, __ATOMIC_SEQ_CST);

	__atomic_store_n(&p.cur, old ^ 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&p.swaps, 1, __ATOMIC_SEQ_CST);
	pack_interval(old, now);
}

/*
 * By CPU time at a rate the kernel's tick can keep (TIMER_MIN_NS), each thread gets a timer on
 * its own CPU clock that sends it the sampler's SIGURG: no thread wakes to look, and a thread
 * that uses no CPU costs nothing. A timer is the process's, not the thread's: made and deleted
 * here for the thread, and gone in a fork's child or after an exec.
 */
static void
timer_arm(struct th *t)
{
	struct sigevent sev;
	struct itimerspec its;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGURG;
	sev.sigev_value.sival_int = p.magic;
	sev.sigev_notify_thread_id = t->tid;
	if (timer_create(t->clock, &sev, &t->timer) < 0)
		return;
	t->has_timer = 1;
	its.it_interval.tv_sec = its.it_value.tv_sec = (time_t)(p.period_ns / 1000000000u);
	its.it_interval.tv_nsec = its.it_value.tv_nsec = (long)(p.period_ns % 1000000000u);
	timer_settime(t->timer, 0, &its, NULL);
}

static void
timer_disarm(struct th *t)
{
	if (t->has_timer)
		timer_delete(t->timer);
	t->has_timer = 0;
}

/* The sampler, when the cap changes the rate: every thread's timer to the new period. */
static void
timers_period(void)
{
	struct itimerspec its;
	uint32_t nth = __atomic_load_n(&p.nth, __ATOMIC_ACQUIRE);

	its.it_interval.tv_sec = its.it_value.tv_sec = (time_t)(p.period_ns / 1000000000u);
	its.it_interval.tv_nsec = its.it_value.tv_nsec = (long)(p.period_ns % 1000000000u);
	for (uint32_t i = 0; i < nth; i++)
		if (p.th[i].has_timer && !__atomic_load_n(&p.th[i].retired, __ATOMIC_ACQUIRE))
			timer_settime(p.th[i].timer, 0, &its, NULL);
}

/* The cap: over each second, the profiler's own time against the wall time. */
static void
keep_cap(uint64_t own, uint64_t wall)
{
	if (p.cap_ppm == 0 || wall == 0)
		return;
	uint64_t was = p.period_ns;

	if (own * 1000000u > (uint64_t)p.cap_ppm * wall) {
		if (p.period_ns < 1000000000ull / MIN_HZ)
			p.period_ns *= 2;
	} else if (own * 4000000u < (uint64_t)p.cap_ppm * wall && p.period_ns > p.asked_ns) {
		p.period_ns = p.period_ns / 2 < p.asked_ns ? p.asked_ns : p.period_ns / 2;
	}
	if (p.timers && p.period_ns != was)
		timers_period();
}

/* The sampler's own: a number below n (xorshift; n > 0 or 0). */
static uint64_t
jitter(uint64_t n)
{
	static uint64_t x = 0x9E3779B97F4A7C15ull;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return n ? x % n : 0;
}

static void *
sampler_main(void *unused)
{
	uint64_t next, now, window_at, window_own = 0, self_cpu0, own_total = 0;
	struct pollfd pfd = { .fd = p.wake_fd, .events = POLLIN };

	(void)unused;
	pthread_setname_np(pthread_self(), "tracer-sampler");
	now = trc_clock_mono_ns();
	next = now + p.period_ns;
	window_at = p.pack_at = now;
	self_cpu0 = read_ns(CLOCK_THREAD_CPUTIME_ID);
	while (!__atomic_load_n(&p.stop, __ATOMIC_ACQUIRE)) {
		uint64_t wait_ns, self_cpu;
		uint32_t nth;

		now = trc_clock_mono_ns();
		if (now < next) {
			struct timespec ts;

			wait_ns = next - now;
			ts.tv_sec = (time_t)(wait_ns / 1000000000u);
			ts.tv_nsec = (long)(wait_ns % 1000000000u);
			if (ppoll(&pfd, 1, &ts, NULL) > 0)
				continue;       /* the stop */
			now = trc_clock_mono_ns();
		}
		nth = __atomic_load_n(&p.nth, __ATOMIC_ACQUIRE);
		for (uint32_t i = 0; i < nth; i++) {
			struct th *t = &p.th[i];

			if (__atomic_load_n(&t->tid, __ATOMIC_ACQUIRE) > 0 && !__atomic_load_n(&t->retired,
			    __ATOMIC_ACQUIRE))
				tick_thread(t, now);
		}
		/*
		 * With timers, the kernel ticks: the sampler only packs, and keeps the cap. Its own
		 * ticks move by up to a tenth of a period either way, at random: a tick that kept
		 * perfect time would see one part of a program that loops in step with it.
		 */
		next += p.timers ? CAP_WINDOW_NS / 2 : p.period_ns + jitter(p.period_ns / 5) - p.period_ns / 10;
		if (next < now)
			next = now + (p.timers ? CAP_WINDOW_NS / 2 : p.period_ns);     /* late: no burst */
		self_cpu = read_ns(CLOCK_THREAD_CPUTIME_ID);
		__atomic_add_fetch(&p.own_ns, self_cpu - self_cpu0, __ATOMIC_RELAXED);
		own_total += self_cpu - self_cpu0;
		self_cpu0 = self_cpu;
		if (now - window_at >= CAP_WINDOW_NS) {
			keep_cap(own_total - window_own + 0, now - window_at);
			window_own = own_total;
			window_at = now;
		}
		if (now - p.pack_at >= p.interval_ns)
			swap_and_pack(now);
	}
	return NULL;
}

/* ---- the GVL side ---- */

static VALUE
native_tid(VALUE th)
{
	return rb_funcall(th, rb_intern("native_thread_id"), 0);
}

/* A slot for thread th with tid: a free one, or one whose thread went two swaps ago. */
static struct th *
slot_for(VALUE th, pid_t tid)
{
	uint32_t swaps = __atomic_load_n(&p.swaps, __ATOMIC_ACQUIRE), i;
	struct th *t = NULL;
	char path[64];

	for (i = 0; i < p.nth && t == NULL; i++)
		if (p.th[i].retired != 0 && swaps >= p.th[i].retired + 2)
			t = &p.th[i];
	if (t == NULL) {
		if (p.nth == MAX_THREADS)
			return NULL;
		t = &p.th[p.nth];
	}
	/* Nothing of the slot's last thread is read again: the sampler skips it while retired. */
	__atomic_store_n(&t->retired, UINT32_MAX, __ATOMIC_RELEASE);
	if (t->stat_fd > 0)
		close(t->stat_fd);
	timer_disarm(t);
	memset(&t->state, 0, sizeof(*t) - offsetof(struct th, state));
	t->thread = th;
	t->name = Qnil;
	t->named = 0;
	t->clock = cpu_clock_of(tid);
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	/* Until its first event (or in a Ruby without them), the kernel says whether it runs. */
	t->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	t->wall_last = trc_clock_mono_ns();
	t->cpu_last = t->cpu_tick = t->cpu_seen = read_ns(t->clock);
	__atomic_store_n(&t->tid, tid, __ATOMIC_RELEASE);
	slot_keys_put(t);
	__atomic_store_n(&t->retired, 0, __ATOMIC_RELEASE);
	if (p.timers)
		timer_arm(t);
	if (t == &p.th[p.nth])
		__atomic_store_n(&p.nth, p.nth + 1, __ATOMIC_RELEASE);
	return t;
}

/*
 * GVL held: the stack of another thread, which has had no event since the profiler began (it
 * was asleep before): it cannot run while this one holds the GVL, so it is read as it stands.
 */
static void
save_other(struct th *t)
{
#ifdef HAVE_RB_PROFILE_THREAD_FRAMES
	VALUE buf[MAX_DEPTH + 1];
	int lines[MAX_DEPTH + 1], n;
	uint32_t ids[MAX_DEPTH + 1];

	if (t->thread == rb_thread_current() || __atomic_exchange_n(&t->busy, 1, __ATOMIC_ACQUIRE))
		return;
	n = rb_profile_thread_frames(t->thread, 0, MAX_DEPTH + 1, buf, lines);
	for (int i = 0; i < n; i++) {
		int added;
		uint32_t id = trc_frames_id(buf[i], 1, &added);

		ids[i] = id != 0 ? id : TRC_PFRAME_UNKNOWN;
	}
	save_stack(t, ids, n, trc_clock_mono_ns());
	__atomic_store_n(&t->busy, 0, __ATOMIC_RELEASE);
	RB_GC_GUARD(t->thread);
#else
	(void)t;
#endif
}

/*
 * GVL held: the main Ractor's threads as Thread.list has them now. New ones get a slot; the
 * slots of those gone are retired (their tid no longer leads to them).
 */
static void
scan_threads(void)
{
	VALUE list = rb_funcall(rb_cThread, rb_intern("list"), 0);
	long n = RARRAY_LEN(list);
	uint8_t seen[MAX_THREADS];

	memset(seen, 0, sizeof(seen));
	for (long i = 0; i < n; i++) {
		VALUE th = RARRAY_AREF(list, i), tid;
		int state = 0;
		struct th *t;

		if (trc_thread_is_agent(th))
			continue;
		tid = rb_protect(native_tid, th, &state);
		if (state) {
			rb_set_errinfo(Qnil);
			continue;
		}
		if (!FIXNUM_P(tid) || FIX2LONG(tid) <= 0)
			continue;       /* not started, or ended */
		t = th_of((pid_t)FIX2LONG(tid));
		if (t != NULL && t->thread != th) {
			/* The tid went to another thread: the old one's slot goes first. */
			slot_keys_remove(t);
			timer_disarm(t);
			__atomic_store_n(&t->retired, __atomic_load_n(&p.swaps, __ATOMIC_ACQUIRE) + 1,
			    __ATOMIC_RELEASE);
			t = NULL;
		}
		if (t == NULL && (t = slot_for(th, (pid_t)FIX2LONG(tid))) == NULL) {
			__atomic_add_fetch(&p.left_out, 1, __ATOMIC_RELAXED);
			continue;
		}
		seen[t - p.th] = 1;
		if (t->saved_n == 0 && __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == ST_UNKNOWN)
			save_other(t);
	}
	for (uint32_t i = 0; i < p.nth; i++) {
		struct th *t = &p.th[i];

		if (seen[i] || t->retired != 0 || t->tid <= 0)
			continue;
		slot_keys_remove(t);
		timer_disarm(t);
		__atomic_store_n(&t->retired, __atomic_load_n(&p.swaps, __ATOMIC_ACQUIRE) + 1, __ATOMIC_RELEASE);
	}
	RB_GC_GUARD(list);
}

static VALUE
scan_protected(VALUE unused)
{
	scan_threads();
	return Qnil;
}

/* A thread's label: its name, "main", or "thread-N" (N its slot) as --top threads says. */
static VALUE
label_of(struct th *t)
{
	VALUE name = trc_thread_name_now(t->thread);

	if (!NIL_P(name))
		return name;
	if (t->thread == rb_thread_main())
		return rb_str_new_cstr("main");
	return rb_sprintf("thread-%u", (unsigned)(t - p.th));
}

static VALUE
label_protected(VALUE arg)
{
	return label_of((struct th *)arg);
}

/* [[idx, name]...]: the threads new, or named anew, since the last time. */
static void
pack_threads(msgpack_packer *pk)
{
	VALUE labels = rb_ary_new();
	uint32_t n = 0;

	for (uint32_t i = 0; i < p.nth; i++) {
		struct th *t = &p.th[i];
		int state = 0;
		VALUE label;

		if (t->tid <= 0 || t->retired != 0)
			continue;
		label = rb_protect(label_protected, (VALUE)t, &state);
		if (state) {
			rb_set_errinfo(Qnil);
			continue;
		}
		if (t->named && rb_str_equal(label, t->name) == Qtrue)
			continue;
		t->name = label;
		t->named = 1;
		rb_ary_push(labels, INT2FIX(i));
		rb_ary_push(labels, label);
		n++;
	}
	msgpack_pack_array(pk, n);
	for (long i = 0; i < RARRAY_LEN(labels); i += 2) {
		VALUE label = RARRAY_AREF(labels, i + 1);

		msgpack_pack_array(pk, 2);
		msgpack_pack_uint32(pk, (uint32_t)FIX2LONG(RARRAY_AREF(labels, i)));
		msgpack_pack_str(pk, (size_t)RSTRING_LEN(label));
		msgpack_pack_str_body(pk, RSTRING_PTR(label), (size_t)RSTRING_LEN(label));
	}
	RB_GC_GUARD(labels);
}

/* [[id, text]...]: the tags made since the last message. */
static void
pack_tags(msgpack_packer *pk)
{
	long n = NIL_P(p.tags_new) ? 0 : RARRAY_LEN(p.tags_new);

	msgpack_pack_array(pk, (size_t)n);
	for (long i = 0; i < n; i++) {
		VALUE pair = RARRAY_AREF(p.tags_new, i), text = RARRAY_AREF(pair, 1);

		msgpack_pack_array(pk, 2);
		msgpack_pack_uint32(pk, (uint32_t)FIX2LONG(RARRAY_AREF(pair, 0)));
		msgpack_pack_str(pk, (size_t)RSTRING_LEN(text));
		msgpack_pack_str_body(pk, RSTRING_PTR(text), (size_t)RSTRING_LEN(text));
	}
	if (n > 0)
		rb_ary_clear(p.tags_new);
}

/* GVL held: text's id, made (and queued to be sent) if new. */
static uint32_t
tag_id(VALUE text)
{
	VALUE id;

	if (NIL_P(p.tag_ids)) {
		p.tag_ids = rb_hash_new();
		p.tags_new = rb_ary_new();
	}
	id = rb_hash_lookup2(p.tag_ids, text, Qnil);
	if (!NIL_P(id))
		return (uint32_t)FIX2LONG(id);
	if (RHASH_SIZE(p.tag_ids) >= MAX_TAGS - 1)
		text = rb_str_new_cstr("(other)");
	id = rb_hash_lookup2(p.tag_ids, text, Qnil);
	if (!NIL_P(id))
		return (uint32_t)FIX2LONG(id);
	text = rb_str_new_frozen(text);
	id = LONG2FIX((long)RHASH_SIZE(p.tag_ids) + 1);
	rb_hash_aset(p.tag_ids, text, id);
	rb_ary_push(p.tags_new, rb_assoc_new(id, text));
	return (uint32_t)FIX2LONG(id);
}

void
trc_sample_tag_push(VALUE text)
{
	struct th *t;

	if (!p.active || p.th == NULL || !RB_TYPE_P(text, T_STRING) || (t = th_of(gettid_now())) == NULL)
		return;
	if (t->ntags < sizeof(t->tags) / sizeof(t->tags[0]))
		t->tags[t->ntags] = t->tag;
	t->ntags++;
	__atomic_store_n(&t->tag, tag_id(text), __ATOMIC_RELEASE);
}

void
trc_sample_tag_pop(void)
{
	struct th *t;

	if (!p.active || p.th == NULL || (t = th_of(gettid_now())) == NULL || t->ntags == 0)
		return;
	t->ntags--;
	__atomic_store_n(&t->tag, t->ntags < sizeof(t->tags) / sizeof(t->tags[0]) ? t->tags[t->ntags] : t->tag,
	    __ATOMIC_RELEASE);
}

/* The empty interval: nothing was packed since the last message. */
static void
pack_nothing(msgpack_packer *pk)
{
	for (int i = 0; i < 5; i++)
		msgpack_pack_uint64(pk, 0);
	for (int i = 0; i < 3; i++)
		msgpack_pack_array(pk, 0);
}

void
trc_sample_pack(msgpack_packer *pk)
{
	int state = 0;

	if (p.th != NULL && p.active)
		rb_protect(scan_protected, Qnil, &state);
	if (state)
		rb_set_errinfo(Qnil);
	msgpack_pack_array(pk, TRC_MSG_PROFILE_FIELDS);
	msgpack_pack_uint8(pk, TRC_MSG_PROFILE);
	trc_frames_pack(pk);
	if (p.th != NULL)
		pack_threads(pk);
	else
		msgpack_pack_array(pk, 0);
	pack_tags(pk);
	/* Every interval the sampler packed since: their counts add up, their trees follow. */
	pthread_mutex_lock(&p.lock);
	if (p.npending == 0) {
		pthread_mutex_unlock(&p.lock);
		pack_nothing(pk);
		return;
	}
	/* One message carries one interval: the first; the rest wait for the next call. */
	msgpack_pack_str_body(pk, p.pending.data, p.ends[0]);
	memmove(p.pending.data, p.pending.data + p.ends[0], p.pending.size - p.ends[0]);
	p.pending.size -= p.ends[0];
	for (uint32_t i = 1; i < p.npending; i++)
		p.ends[i - 1] = p.ends[i] - p.ends[0];
	p.npending--;
	pthread_mutex_unlock(&p.lock);
}

int
trc_sample_more(void)
{
	int more;

	pthread_mutex_lock(&p.lock);
	more = p.npending > 0;
	pthread_mutex_unlock(&p.lock);
	return more;
}

static int
random_magic(void)
{
	int m = 0;

	while (m == 0 || m == -1) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		m = (int)((uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)getpid() << 16 ^ (uint64_t)(uintptr_t)&p);
	}
	return m;
}

static void
release(void)
{
	p.tag_ids = p.tags_new = Qnil;
	for (uint32_t i = 0; i < p.nth; i++) {
		if (p.th[i].stat_fd > 0)
			close(p.th[i].stat_fd);
		timer_disarm(&p.th[i]);
	}
	if (p.th != NULL)
		munmap(p.th, p.th_bytes);
	p.th = NULL;
	p.nth = 0;
	memset(&p.by_tid, 0, sizeof(p.by_tid));
	memset(&p.by_thread, 0, sizeof(p.by_thread));
	trc_stacks_release(&p.trees[0]);
	trc_stacks_release(&p.trees[1]);
	trc_frames_release();
	if (p.wake_fd >= 0)
		close(p.wake_fd);
	p.wake_fd = -1;
	pthread_mutex_lock(&p.lock);
	msgpack_sbuffer_destroy(&p.pending);
	memset(&p.pending, 0, sizeof(p.pending));
	free(p.ends);
	p.ends = NULL;
	p.ends_cap = p.npending = 0;
	p.dropped = 0;
	pthread_mutex_unlock(&p.lock);
}

static VALUE
call_tags(VALUE on)
{
	return rb_funcall(rb_const_get(rb_cObject, rb_intern("TracerAgent")), rb_intern("__profile_tags"), 1, on);
}

/* GVL held: the app's requests and jobs tag the samples of their threads, or stop to. */
static void
watch_tags(int on)
{
	int state = 0;

	rb_protect(call_tags, on ? Qtrue : Qfalse, &state);
	if (state)
		rb_set_errinfo(Qnil);
}

int
trc_sample_start(int clock, uint32_t hz, uint64_t interval_ms, uint32_t cap_ppm, const char **why)
{
	pthread_attr_t attr;
	int rc;

	if (hz == 0 || hz > TRC_PROFILE_MAX_HZ) {
		*why = "the sampling rate is out of range";
		return -1;
	}
	if (p.th != NULL) {
		*why = "the profiler is already running";
		return -1;
	}
	memset(&p.samples, 0, sizeof(p.samples) * 4);
	p.clock = clock;
	p.pid = getpid();
	p.magic = random_magic();
	p.asked_ns = p.period_ns = 1000000000ull / hz;
	p.timers = clock == TRC_SAMPLE_CPU && p.period_ns >= TIMER_MIN_NS;
	p.interval_ns = interval_ms * 1000000ull;
	p.cap_ppm = cap_ppm;
	p.cur = 0;
	p.swaps = 0;
	p.stop = 0;
	p.th_bytes = MAX_THREADS * sizeof(struct th);
	/* cppcheck-suppress invalidFunctionArg ; MAP_ANONYMOUS takes -1 */
	p.th = mmap(NULL, p.th_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p.th == MAP_FAILED) {
		p.th = NULL;
		*why = "no memory for the profiler's threads";
		return -1;
	}
	msgpack_sbuffer_init(&p.pending);
	if (trc_frames_init(FRAMES_CAP) < 0 || trc_stacks_init(&p.trees[0], NODES) < 0 ||
	    trc_stacks_init(&p.trees[1], NODES) < 0 ||
	    (p.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		release();
		*why = "no memory for the profiler's tables";
		return -1;
	}
	watch_threads(1);
	rb_add_event_hook(gc_phase_hook, RUBY_INTERNAL_EVENT_GC_START | RUBY_INTERNAL_EVENT_GC_END_MARK, Qnil);
	__atomic_store_n(&p.active, 1, __ATOMIC_SEQ_CST);
	scan_threads();
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256u << 10);
	/* Not a Ruby thread: it never takes the GVL, and no signal of the app is for it. */
	{
		sigset_t all, old;

		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = pthread_create(&p.sampler, &attr, sampler_main, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		__atomic_store_n(&p.active, 0, __ATOMIC_SEQ_CST);
		watch_threads(0);
		rb_remove_event_hook(gc_phase_hook);
		release();
		*why = "cannot start the profiler's thread (a limit on threads?)";
		return -1;
	}
	p.sampler_on = 1;
	watch_tags(1);
	return 0;
}

int
trc_sample_running(void)
{
	return p.th != NULL;
}

/* Waits for the handlers and hooks still at work in either tree. */
static void
wait_writers(void)
{
	while (__atomic_load_n(&p.inside[0], __ATOMIC_SEQ_CST) != 0 ||
	    __atomic_load_n(&p.inside[1], __ATOMIC_SEQ_CST) != 0)
		sched_yield();
}

/*
 * Stops the sampler, then packs what the trees hold, so that the last TRC_MSG_PROFILE has it
 * (trc_sample_pack, after). The tables stay until trc_sample_release... here, after the pack.
 */
void
trc_sample_stop(void)
{
	uint64_t one = 1;

	if (p.th == NULL)
		return;
	__atomic_store_n(&p.active, 0, __ATOMIC_SEQ_CST);
	if (p.sampler_on) {
		__atomic_store_n(&p.stop, 1, __ATOMIC_RELEASE);
		if (write(p.wake_fd, &one, sizeof(one)) < 0)
			(void)0;
		pthread_join(p.sampler, NULL);
		p.sampler_on = 0;
	}
	watch_threads(0);
	rb_remove_event_hook(gc_phase_hook);
	watch_tags(0);
	wait_writers();
	/* The samples since the last interval: the tree samples went to, then the other. */
	pack_interval(p.cur, trc_clock_mono_ns());
}

/* GVL held, after the last pack: everything goes. */
void
trc_sample_release(void)
{
	if (p.th == NULL)
		return;
	release();
}

void
trc_sample_mark(void)
{
	if (p.th == NULL)
		return;
	trc_frames_mark();
	rb_gc_mark(p.tag_ids);
	rb_gc_mark(p.tags_new);
	for (uint32_t i = 0; i < p.nth; i++) {
		rb_gc_mark(p.th[i].thread);
		rb_gc_mark(p.th[i].name);
	}
}

void
trc_sample_forked(void)
{
	/* The sampler thread is not here; the trees and tables are the parent's copy. */
	__atomic_store_n(&p.active, 0, __ATOMIC_SEQ_CST);
	p.sampler_on = 0;
	p.magic = 0;
}
