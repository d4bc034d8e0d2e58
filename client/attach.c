/* attach.c: client side of the attach handshake: directory, listener, hello queue, doorbell. */
#define _GNU_SOURCE     /* accept4, struct ucred */
#include "attach.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/msg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "proc.h"

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

static const char *
tmpdir(void)
{
	const char *t = getenv("TMPDIR");

	return t != NULL && *t != '\0' ? t : "/tmp";
}

/* Removes dir/sock and dir, if dir is a real directory of ours (never follows a symlink). */
static void
remove_sock_dir(int parent, const char *name)
{
	struct stat st;
	int fd;

	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid())
		return;
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		unlinkat(fd, TRC_SOCK_NAME, 0);
		close(fd);
	}
	unlinkat(parent, name, AT_REMOVEDIR);
}

/*
 * The client pid in a name "tracer-CPID-TPID", or -1 for any other name. Anyone can make names
 * in /tmp: strtol, not sscanf("%d"), whose behaviour on an out-of-range number is undefined.
 */
static pid_t
stale_dir_client(const char *name)
{
	static const char prefix[] = "tracer-";
	long cpid, tpid;
	char *end;

	if (strncmp(name, prefix, sizeof(prefix) - 1) != 0)
		return -1;
	errno = 0;
	cpid = strtol(name + sizeof(prefix) - 1, &end, 10);
	if (*end != '-')
		return -1;
	tpid = strtol(end + 1, &end, 10);
	if (errno != 0 || *end != '\0' || cpid <= 0 || cpid > INT_MAX || tpid <= 0 || tpid > INT_MAX)
		return -1;
	return (pid_t)cpid;
}

/* Directories "tracer-CPID-TPID" left by clients that died (SIGKILL) before cleaning up. */
static void
remove_stale_dirs(const char *tmp)
{
	DIR *d = opendir(tmp);
	struct dirent *e;
	pid_t cpid;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		cpid = stale_dir_client(e->d_name);
		if (cpid <= 0 || cpid == getpid())
			continue;
		if (kill(cpid, 0) < 0 && errno == ESRCH)
			remove_sock_dir(dirfd(d), e->d_name);
	}
	closedir(d);
}

/* The 0700 directory only the client (or, for a root client, the target's user) may enter. */
static int
make_dir(struct trc_attach *a)
{
	const char *tmp = tmpdir();
	int n;

	remove_stale_dirs(tmp);
	n = snprintf(a->dir, sizeof(a->dir), TRC_SOCK_DIR_FMT, tmp, (int)getpid(), (int)a->pid);
	if (n < 0 || (size_t)n + sizeof("/" TRC_SOCK_NAME) > sizeof(a->path)) {
		errno = ENAMETOOLONG;
		return fail(a, TRC_ATTACH_FAILED, "socket path in '%s' is too long; set TMPDIR to a "
			    "shorter directory", tmp);
	}
	memcpy(a->path, a->dir, (size_t)n);
	memcpy(a->path + n, "/" TRC_SOCK_NAME, sizeof("/" TRC_SOCK_NAME));
	if (mkdir(a->dir, 0700) < 0)
		return fail(a, TRC_ATTACH_FAILED, "cannot create '%s': %s", a->dir, strerror(errno));
	a->made_dir = true;
	if (a->give_away && chown(a->dir, a->uid, a->gid) < 0)
		return fail(a, TRC_ATTACH_FAILED, "cannot chown '%s': %s", a->dir, strerror(errno));
	return 0;
}

static int
make_listener(struct trc_attach *a)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	memcpy(sun.sun_path, a->path, strlen(a->path) + 1);
	a->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->lfd < 0)
		return fail(a, TRC_ATTACH_FAILED, "socket: %s", strerror(errno));
	unlink(a->path);
	if (bind(a->lfd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		return fail(a, TRC_ATTACH_FAILED, "cannot bind '%s': %s", a->path, strerror(errno));
	/* connect() needs write permission on the socket file, which root's umask may deny. */
	if (a->give_away && chown(a->path, a->uid, a->gid) < 0)
		return fail(a, TRC_ATTACH_FAILED, "cannot chown '%s': %s", a->path, strerror(errno));
	if (listen(a->lfd, 8) < 0)
		return fail(a, TRC_ATTACH_FAILED, "cannot listen on '%s': %s", a->path,
			    strerror(errno));
	return 0;
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
 * The agent reads only a queue of its own user or root with mode 0600. One that anybody else
 * made under the target's key (left over, or squatted to keep us out) is removed and remade;
 * when that is not allowed, attaching fails and says why.
 */
static int
replace_foreign_queue(struct trc_attach *a)
{
	struct msqid_ds ds;
	uid_t owner = a->give_away ? a->uid : geteuid();

	if (msgctl(a->qid, IPC_STAT, &ds) < 0)
		return -1;
	if ((ds.msg_perm.uid == owner || ds.msg_perm.uid == 0) && (ds.msg_perm.mode & 077) == 0)
		return 0;
	if (msgctl(a->qid, IPC_RMID, NULL) < 0)
		return fail(a, TRC_ATTACH_FAILED, "message queue 0x%08x of process %d belongs to uid %d; remove it with ipcrm -Q 0x%08x",
			    (unsigned)TRC_QUEUE_KEY(a->pid), (int)a->pid, (int)ds.msg_perm.uid,
			    (unsigned)TRC_QUEUE_KEY(a->pid));
	a->qid = msgget(TRC_QUEUE_KEY(a->pid), IPC_CREAT | IPC_EXCL | 0600);
	return a->qid < 0 ? -1 : 0;
}

static int
open_queue(struct trc_attach *a)
{
	a->qid = msgget(TRC_QUEUE_KEY(a->pid), IPC_CREAT | 0600);
	if (a->qid >= 0 && replace_foreign_queue(a) < 0 && a->error[0] != 0)
		return -1;
	if (a->qid < 0 || give_queue_away(a) < 0)
		return fail(a, TRC_ATTACH_FAILED, "cannot open message queue 0x%08x: %s",
			    (unsigned)TRC_QUEUE_KEY(a->pid), strerror(errno));
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

	memcpy(h.path, a->path, strlen(a->path) + 1);
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
	int id = msgget(TRC_QUEUE_KEY(a->pid), 0);

	if (id < 0 && errno == ENOENT) {
		if (open_queue(a) < 0)
			return -1;
	} else if (id < 0) {
		return fail(a, TRC_ATTACH_FAILED, "cannot open message queue 0x%08x: %s",
			    (unsigned)TRC_QUEUE_KEY(a->pid), strerror(errno));
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

static void
cleanup(struct trc_attach *a)
{
	ev_io_stop(a->loop, &a->accept_w);
	ev_timer_stop(a->loop, &a->resignal_w);
	if (a->lfd >= 0)
		close(a->lfd);
	a->lfd = -1;
	if (a->qid >= 0)
		msgctl(a->qid, IPC_RMID, NULL);
	a->qid = -1;
	if (a->made_dir) {
		unlink(a->path);
		rmdir(a->dir);
	}
	a->made_dir = false;
}

static void
finish(struct trc_attach *a, int fd)
{
	cleanup(a);
	a->done(a, fd, a->ctx);
}

/* Only the target may connect: anyone else who found the socket is turned away. */
static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct trc_attach *a = w->data;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd;

	(void)loop, (void)revents;
	while ((fd = accept4(a->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid == a->pid) {
			finish(a, fd);
			return;
		}
		close(fd);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
		fail(a, TRC_ATTACH_FAILED, "accept: %s", strerror(errno));
		finish(a, -1);
	}
}

static void
on_resignal(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct trc_attach *a = w->data;

	(void)loop, (void)revents;
	if (refresh_hello(a) < 0 || ring(a) < 0)
		finish(a, -1);
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
	a->done = done;
	a->ctx = ctx;
	ev_io_init(&a->accept_w, on_accept, -1, EV_READ);
	ev_timer_init(&a->resignal_w, on_resignal, TRC_RESIGNAL_MS / 1000.0,
		      TRC_RESIGNAL_MS / 1000.0);
	a->accept_w.data = a;
	a->resignal_w.data = a;
	if (geteuid() == 0 && trc_proc_owner(pid, &a->uid, &a->gid) == 0)
		a->give_away = a->uid != 0;
	if (make_dir(a) < 0 || make_listener(a) < 0 || open_queue(a) < 0 || send_hello(a) < 0 ||
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
