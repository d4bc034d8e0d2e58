/* ns.h: a target's network, IPC and user namespaces: told apart from ours, entered and left. */
#ifndef TRC_NS_H
#define TRC_NS_H

#include <sys/types.h>

enum trc_ns_kind {
	TRC_NS_NET = 0,         /* where the listening socket must be made */
	TRC_NS_IPC = 1,         /* where the target's SysV queue lives */
	TRC_NS_KINDS = 2,
};

/* Caller-allocated; fields are private to ns.c. */
struct trc_ns {
	int target[TRC_NS_KINDS];       /* the target's namespace when it is not ours, else -1 */
	int home[TRC_NS_KINDS];         /* ours, to come back to, while target[] is open */
};

/* Holds nothing yet: trc_ns_close and the others are no-ops on it. */
void trc_ns_init(struct trc_ns *ns);
/*
 * Opens those of pid's namespaces that differ from the client's. One the client may not look
 * at (/proc/PID/ns needs the right to ptrace-read the process: another user's) counts as ours,
 * so attaching goes as it always did. Returns 0, or -1 with errno. Main thread.
 */
int trc_ns_open(struct trc_ns *ns, pid_t pid);
/*
 * Moves the calling thread into the target's namespace of this kind; nothing when it is ours.
 * Returns 0, or -1 with errno (EPERM: it needs CAP_SYS_ADMIN, root). The client has one thread.
 */
int trc_ns_enter(struct trc_ns *ns, enum trc_ns_kind kind);
/* Moves the calling thread back into its own namespace of this kind. Returns 0, or -1 + errno. */
int trc_ns_leave(struct trc_ns *ns, enum trc_ns_kind kind);
/* Closes what trc_ns_open opened. Safe to repeat. */
void trc_ns_close(struct trc_ns *ns);
/* "network" or "IPC", for messages. */
const char *trc_ns_label(enum trc_ns_kind kind);

/*
 * Whether uid (ours) has a mapping in pid's user namespace: 1 if it does (always, in a shared
 * one), 0 if it does not, and the process would see us as the overflow uid ("nobody"). -1
 * with errno when that cannot be known.
 */
int trc_ns_uid_mapped(pid_t pid, uid_t uid);

#endif
