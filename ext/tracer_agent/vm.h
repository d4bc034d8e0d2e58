/* vm.h: what the agent asks of the VM at large: which Ractor runs, a safe point soon, and when. */
#ifndef TRC_VM_H
#define TRC_VM_H

#include <stdint.h>

/*
 * From Init_, GVL held: the agent's one postponed job, run at the VM's next safe point after
 * trc_vm_poke (preregistered where the VM allows it: a Ruby 3.3 job table that is full stays
 * full), and whatever else the rest needs of the VM (which Ractor is the main one).
 */
void trc_vm_init(void (*job)(void *));
/* The eventfd the listener thread waits on, written by every poke too (-1: none). */
void trc_vm_listener_fd(int fd);
/*
 * Any thread, async-signal-safe: asks for the postponed job to run soon, on whichever thread
 * reaches a safe point first, and wakes the listener. Nothing once the VM is gone.
 */
void trc_vm_poke(void);
/* At process exit: the VM is gone, pokes do nothing from now on. */
void trc_vm_gone(void);
int trc_vm_is_gone(void);
/* In a forked child, async-signal-safe: the postponed job again, for the child's own service. */
void trc_vm_fire(void);

/* Any thread holding its Ractor's lock: whether it runs in the main Ractor, the agent's own. */
int trc_vm_main_ractor(void);
/* A wrapped call made in another Ractor was left out; how many were, so far. */
void trc_vm_other_ractor(void);
uint64_t trc_vm_other_ractor_calls(void);

/*
 * GVL held. Hooks and the session's service never interleave: a hook that calls Ruby (to name a
 * thread, say) can meet an interrupt check, where the postponed job or a thread switch could
 * run the service, which frees the tables the hook is using. So every hook runs between
 * trc_vm_hook_in and trc_vm_hook_out; trc_vm_defer says whether the service must wait, and
 * remembers to poke again when the last hook leaves. A hook that runs the app's own code (an -m
 * expression, an exception's #message), which may take as long as it likes, does so between
 * trc_vm_yield_begin and _end: the service may run then, and the hook checks after whether
 * tracing still runs.
 */
void trc_vm_hook_in(void);
void trc_vm_hook_out(void);
void trc_vm_yield_begin(void);
void trc_vm_yield_end(void);
int trc_vm_defer(void);

#endif
