/* attach.c: client side of the attach handshake: listener, hello queue, doorbell. */
#define _GNU_SOURCE     /* accept4, struct ucred */
#include "attach.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/msg.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "proc.h"

#define BIND_TRIES 8            /* random names to try before giving up */

/* Records why the attach failed; keeps errno. Returns -1. */
static int __attribute__((format(printf, 3, 4)))
fail(struct trc_attach *a, enum trc_attach_failure why, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	a->failure = why;
	va_start(ap, fmt);
	vsnprintf(a->error, sizeof(a->error), fmt, ap);
	va_end(ap);
	errno = saved;
	return -1;
}

/* Records why entering the target's namespace of kind failed. Returns -1. */
static int
enter_failed(struct trc_attach *a, enum trc_ns_kind kind)
{
	if (errno == EPERM)
		return fail(a, TRC_ATTACH_DENIED, "process %d is in another %s namespace (a container?): "
			    "attaching needs root", (int)a->pid, trc_ns_label(kind));
	return fail(a, TRC_ATTACH_FAILED, "cannot enter the %s namespace of process %d: %s",
		    trc_ns_label(kind), (int)a->pid, strerror(errno));
}

/* Records that the thread could not come back to its own namespace. Returns -1. */
static int
leave_failed(struct trc_attach *a, enum trc_ns_kind kind)
{
	return fail(a, TRC_ATTACH_FAILED, "cannot return to tracer's own %s namespace: %s",
		    trc_ns_label(kind), strerror(errno));
}

/*
 * The listening socket, made in the target's network namespace: a socket stays in the
 * namespace it was made in, and its abstract name with it, wherever the thread goes next.
 */
static int
make_socket(struct trc_attach *a)
{
	int fd, saved;

	if (trc_ns_enter(&a->ns, TRC_NS_NET) < 0)
		return enter_failed(a, TRC_NS_NET);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	saved = errno;
	if (trc_ns_leave(&a->ns, TRC_NS_NET) < 0) {
		if (fd >= 0)
			close(fd);
		return leave_failed(a, TRC_NS_NET);
	}
	errno = saved;
	if (fd < 0)
		return fail(a, TRC_ATTACH_FAILED, "socket: %s", strerror(errno));
	a->lfd = fd;
	return 0;
}

/* Binds a fresh random abstract name; -1 with EADDRINUSE when that one is taken. */
static int
bind_random_name(int fd, pid_t target, char *addr, size_t size)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	uint32_t r[2];
	int n;

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -1;
	addr[0] = TRC_SOCK_ABSTRACT;
	n = snprintf(addr + 1, size - 1, TRC_SOCK_NAME_FMT, (int)getpid(), (int)target,
		     (unsigned)r[0], (unsigned)r[1]);
	/* sun_path[0] stays NUL: abstract. The length counts the name's bytes and no more. */
	memcpy(sun.sun_path + 1, addr + 1, (size_t)n);
	return bind(fd, (struct sockaddr *)&sun,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n));
}

/*
 * Anyone in the network namespace may bind any abstract name: one that is taken (by chance,
 * or by someone who saw an earlier one) is left alone, and another drawn.
 */
int
trc_attach_listen(int fd, pid_t target, char *addr, size_t size)
{
	int tries = 0, rc;

	do
		rc = bind_random_name(fd, target, addr, size);
	while (rc < 0 && errno == EADDRINUSE && ++tries < BIND_TRIES);
	return rc < 0 ? -1 : listen(fd, 8);
}

static int
make_listener(struct trc_attach *a)
{
	if (make_socket(a) < 0)
		return -1;
	if (trc_attach_listen(a->lfd, a->pid, a->addr, sizeof(a->addr)) < 0)
		return fail(a, TRC_ATTACH_FAILED, "cannot listen on a socket (%s): %s", a->addr,
			    strerror(errno));
	return 0;
}

/*
 * Runs fn in the target's IPC namespace, where its queue lives (a queue id means something
 * only in the namespace that gave it), and comes back.
 */
static int
in_target_ipc(struct trc_attach *a, int (*fn)(struct trc_attach *))
{
	int rc;

	if (trc_ns_enter(&a->ns, TRC_NS_IPC) < 0)
		return enter_failed(a, TRC_NS_IPC);
	rc = fn(a);
	if (trc_ns_leave(&a->ns, TRC_NS_IPC) < 0)
		return leave_failed(a, TRC_NS_IPC);
	return rc;
}

/* The agent ignores queues not owned by its user or root: hand ours over when root. */
static int
give_queue_away(struct trc_attach *a)
{
	struct msqid_ds ds;

	if (!a->give_away)
		return 0;
	if (msgctl(a->qid, IPC_STAT, &ds) < 0)
		return -1;
	ds.msg_perm.uid = a->uid;
	ds.msg_perm.gid = a->gid;
	return msgctl(a->qid, IPC_SET, &ds);
}

/*
 * The agent reads only a queue that its own user or root both owns and made (its creator keeps
 * every right on it, whoever it names its owner since), with mode 0600. One that anybody else
 * made under the target's key (left over, or squatted to read our hellos or keep us out) is
 * removed and remade; when that is not allowed, attaching fails and says why.
 */
static int
replace_foreign_queue(struct trc_attach *a)
{
	struct msqid_ds ds;
	uid_t owner = a->give_away ? a->uid : geteuid();

	if (msgctl(a->qid, IPC_STAT, &ds) < 0)
		return -1;
	if ((ds.msg_perm.uid == owner || ds.msg_perm.uid == 0) && (ds.msg_perm.cuid == owner || ds.msg_perm.cuid == 0) &&
	    (ds.msg_perm.mode & 077) == 0)
		return 0;
	if (msgctl(a->qid, IPC_RMID, NULL) < 0)
		return fail(a, TRC_ATTACH_FAILED, "message queue 0x%08x of process %d was made by uid %d (owner uid %d); "
			    "remove it with ipcrm -Q 0x%08x", (unsigned)TRC_QUEUE_KEY(a->own_pid), (int)a->pid,
			    (int)ds.msg_perm.cuid, (int)ds.msg_perm.uid, (unsigned)TRC_QUEUE_KEY(a->own_pid));
	a->qid = msgget(TRC_QUEUE_KEY(a->own_pid), IPC_CREAT | IPC_EXCL | 0600);
	return a->qid < 0 ? -1 : 0;
}

static int
open_queue(struct trc_attach *a)
{
	a->qid = msgget(TRC_QUEUE_KEY(a->own_pid), IPC_CREAT | 0600);
	if (a->qid >= 0 && replace_foreign_queue(a) < 0 && a->error[0] != 0)
		return -1;
	if (a->qid < 0 || give_queue_away(a) < 0)
		return fail(a, TRC_ATTACH_FAILED, "cannot open message queue 0x%08x: %s",
			    (unsigned)TRC_QUEUE_KEY(a->own_pid), strerror(errno));
	a->hello_queued = false;
	return 0;
}

/*
 * Puts our hello in the queue. A full queue (EAGAIN) is retried on the next tick; a queue
 * removed under us (EIDRM/EINVAL: another client attached to the same target) is recreated.
 */
static int
send_hello(struct trc_attach *a)
{
	struct trc_hello h = { .mtype = TRC_HELLO_MTYPE, .magic = TRC_HELLO_MAGIC,
			       .version = TRC_PROTOCOL_VERSION, .client_pid = (int32_t)getpid() };

	memcpy(h.addr, a->addr, strlen(a->addr) + 1);
	for (int tries = 0; tries < 2; tries++) {
		if (msgsnd(a->qid, &h, TRC_HELLO_SIZE, IPC_NOWAIT) == 0) {
			a->hello_queued = true;
			return 0;
		}
		if (errno == EAGAIN)
			return 0;
		if ((errno != EIDRM && errno != EINVAL) || open_queue(a) < 0)
			break;
	}
	return fail(a, TRC_ATTACH_FAILED, "cannot queue hello for process %d: %s", (int)a->pid,
		    strerror(errno));
}

/*
 * Before each doorbell: if another client removed the queue (with our hello in it) since we
 * last looked, or replaced it by a new one, queue the hello again. Not otherwise: a second
 * hello in the same queue would make the agent connect twice.
 */
static int
refresh_hello(struct trc_attach *a)
{
	int id = msgget(TRC_QUEUE_KEY(a->own_pid), 0);

	if (id < 0 && errno == ENOENT) {
		if (open_queue(a) < 0)
			return -1;
	} else if (id < 0) {
		return fail(a, TRC_ATTACH_FAILED, "cannot open message queue 0x%08x: %s",
			    (unsigned)TRC_QUEUE_KEY(a->own_pid), strerror(errno));
	} else if (id != a->qid) {
		a->qid = id;
		a->hello_queued = false;
	}
	return a->hello_queued ? 0 : send_hello(a);
}

/* SIGURG to the main thread (tid == pid), where Ruby checks interrupts first. */
static int
ring(struct trc_attach *a)
{
	if (syscall(SYS_tgkill, a->pid, a->pid, SIGURG) == 0)
		return 0;
	/* The main thread may have exited while others run on: any thread will do then. */
	if (errno == ESRCH && kill(a->pid, SIGURG) == 0)
		return 0;
	if (errno == EPERM)
		return fail(a, TRC_ATTACH_DENIED, "permission denied: cannot signal process %d",
			    (int)a->pid);
	return fail(a, TRC_ATTACH_GONE, "process %d exited before tracer could attach",
		    (int)a->pid);
}

/* Queues the first hello: in the target's IPC namespace. */
static int
queue_hello(struct trc_attach *a)
{
	return open_queue(a) < 0 ? -1 : send_hello(a);
}

/*
 * In the target's IPC namespace, which the queue was opened in (so entering worked before).
 * What went wrong first, if anything, is what the user hears about: nothing is recorded here.
 */
static void
remove_queue(struct trc_attach *a)
{
	if (trc_ns_enter(&a->ns, TRC_NS_IPC) < 0)
		return;
	msgctl(a->qid, IPC_RMID, NULL);
	if (trc_ns_leave(&a->ns, TRC_NS_IPC) < 0)
		(void)0;        /* our own namespace, held open: leaving it again cannot fail */
}

/* Closing the listener frees its name: nothing of it is left in any file system. */
static void
cleanup(struct trc_attach *a)
{
	ev_io_stop(a->loop, &a->accept_w);
	ev_timer_stop(a->loop, &a->resignal_w);
	if (a->lfd >= 0)
		close(a->lfd);
	a->lfd = -1;
	if (a->qid >= 0)
		remove_queue(a);
	a->qid = -1;
	trc_ns_close(&a->ns);
}

static void
finish(struct trc_attach *a, int fd)
{
	cleanup(a);
	a->done(a, fd, a->ctx);
}

/*
 * Only the target may connect: anyone else who found the socket is turned away. Returns 1 once
 * the attach is over (the target connected, or accept failed), 0 while it goes on.
 */
static int
take_connection(struct trc_attach *a)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd;

	while ((fd = accept4(a->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid == a->pid) {
			finish(a, fd);
			return 1;
		}
		close(fd);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
		fail(a, TRC_ATTACH_FAILED, "accept: %s", strerror(errno));
		finish(a, -1);
		return 1;
	}
	return 0;
}

static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop, (void)revents;
	take_connection(w->data);
}

/*
 * A target that connected, said what it had to say (a refusal, say) and exited may still be
 * waiting in the listener's backlog when this timer fires in the same loop iteration: take it
 * before concluding from a failed doorbell that the process exited without answering.
 */
static void
on_resignal(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_attach *a = w->data;

	(void)loop, (void)revents;
	if (take_connection(a))
		return;
	if (in_target_ipc(a, refresh_hello) < 0 || ring(a) < 0)
		finish(a, -1);
}

/*
 * Where the target lives: the pid it knows itself by (its queue's key), and its namespaces.
 * A root client whose uid the target's user namespace does not map would reach an agent that
 * sees it as the overflow uid and hangs up: say so now rather than time out.
 */
static int
find_target(struct trc_attach *a)
{
	int levels;

	if (trc_proc_nspid(a->pid, &a->own_pid, &levels) < 0)
		return fail(a, TRC_ATTACH_GONE, "process %d exited before tracer could attach",
			    (int)a->pid);
	if (trc_ns_open(&a->ns, a->pid) < 0)
		return fail(a, TRC_ATTACH_FAILED, "cannot open the namespaces of process %d: %s",
			    (int)a->pid, strerror(errno));
	if (trc_ns_uid_mapped(a->pid, geteuid()) == 0)
		return fail(a, TRC_ATTACH_DENIED, "process %d is in another user namespace (a rootless "
			    "container?) that has no mapping for uid %d, so its agent cannot trust "
			    "tracer: run tracer inside that namespace", (int)a->pid, (int)geteuid());
	return 0;
}

/* Entering the target's namespace of kind, and back, as the attach will. */
static int
try_enter(struct trc_attach *a, enum trc_ns_kind kind)
{
	if (trc_ns_enter(&a->ns, kind) < 0)
		return enter_failed(a, kind);
	if (trc_ns_leave(&a->ns, kind) < 0)
		return leave_failed(a, kind);
	return 0;
}

int
trc_attach_check(pid_t pid, bool *denied, char *why, size_t n)
{
	struct trc_attach a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.pid = pid;
	trc_ns_init(&a.ns);
	rc = find_target(&a) < 0 || try_enter(&a, TRC_NS_NET) < 0 || try_enter(&a, TRC_NS_IPC) < 0 ? -1 : 0;
	trc_ns_close(&a.ns);
	if (rc < 0) {
		snprintf(why, n, "%s", a.error);
		*denied = a.failure == TRC_ATTACH_DENIED;
	}
	return rc;
}

int
trc_attach_start(struct trc_attach *a, struct ev_loop *loop, pid_t pid,
		 trc_attach_done_fn *done, void *ctx)
{
	memset(a, 0, sizeof(*a));
	a->loop = loop;
	a->pid = pid;
	a->lfd = -1;
	a->qid = -1;
	trc_ns_init(&a->ns);
	a->done = done;
	a->ctx = ctx;
	ev_io_init(&a->accept_w, on_accept, -1, EV_READ);
	ev_timer_init(&a->resignal_w, on_resignal, TRC_RESIGNAL_MS / 1000.0,
		      TRC_RESIGNAL_MS / 1000.0);
	a->accept_w.data = a;
	a->resignal_w.data = a;
	if (geteuid() == 0 && trc_proc_owner(pid, &a->uid, &a->gid) == 0)
		a->give_away = a->uid != 0;
	if (find_target(a) < 0 || make_listener(a) < 0 || in_target_ipc(a, queue_hello) < 0 ||
	    ring(a) < 0) {
		cleanup(a);
		return -1;
	}
	ev_io_set(&a->accept_w, a->lfd, EV_READ);
	ev_io_start(loop, &a->accept_w);
	ev_timer_start(loop, &a->resignal_w);
	return 0;
}

void
trc_attach_stop(struct trc_attach *a)
{
	cleanup(a);
}
