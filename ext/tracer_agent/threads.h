/* threads.h: the VM's thread events: how long each thread waited for the GVL, and held it. */
#ifndef TRC_THREADS_H
#define TRC_THREADS_H

#include <ruby.h>
#include <stdint.h>

/*
 * GVL held. Watches the threads' GVL handovers from now on (on), or stops (off). -1 with errno
 * ENOSYS when this Ruby has no thread events to watch (before 3.3: rb_internal_thread_add_event_hook
 * with the thread in each event's data), ENOMEM without the memory for it.
 */
int trc_threads_watch(int on);
/* Events seen since the last fold. */
uint64_t trc_threads_events(void);
/*
 * GVL held. Hands each thread's figures since the last fold to add: how many times it got the
 * GVL, and the clock ticks (clock.h) it waited for it and held it. Threads that ended are
 * forgotten after. Returns the events lost for want of room for their thread.
 */
uint64_t trc_threads_fold(void (*add)(VALUE thread, uint64_t switches, uint64_t wait, uint64_t held, void *arg),
    void *arg);
/* From the GC's mark phase: the threads watched stay alive until folded. */
void trc_threads_mark(void);

#endif
