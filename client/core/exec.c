/* exec.c: tracer --exec: the program's start, environment and end, and its connections. */
#define _GNU_SOURCE     /* accept4, execvpe, pipe2, struct ucred */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attach.h"
#include "proc.h"
#include "xmalloc.h"

extern char **environ;

/* The dispositions tracer changes for itself (libev's handlers, SIGPIPE ignored): the program
 * gets those tracer was started with. */
static const int kept_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD };
#define NKEPT (sizeof(kept_signals) / sizeof(kept_signals[0]))
static struct sigaction kept_actions[NKEPT];

void
trc_exec_init(struct trc_exec *x)
{
	memset(x, 0, sizeof(*x));
	x->lfd = -1;
	sigprocmask(SIG_BLOCK, NULL, &x->mask);
	for (size_t i = 0; i < NKEPT; i++)
		sigaction(kept_signals[i], NULL, &kept_actions[i]);
}

/* Records what went wrong; keeps errno. Returns -1. */
static int __attribute__((format(printf, 2, 3)))
fail(struct trc_exec *x, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->error, sizeof(x->error), fmt, ap);
	va_end(ap);
	errno = saved;
	return -1;
}

static bool
is_var(const char *entry, const char *name)
{
	size_t n = strlen(name);

	return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

/* The environment the program gets; the entries it allocated are in owned. */
struct program_env {
	char **vars;            /* NULL-terminated */
	char *owned[4];
	size_t nowned;
};

static void
add_owned(struct program_env *e, size_t *k, char *entry)
{
	e->vars[(*k)++] = entry;
	e->owned[e->nowned++] = entry;
}

/*
 * Tracer's own environment, with the agent preloaded: the lib directory first in RUBYLIB (a
 * path list, so a directory with spaces in its name is no problem, which RUBYOPT's -I would
 * be), -rtracer_agent last in RUBYOPT. Whatever the user set there stays.
 */
static void
env_build(struct program_env *e, const char *agent_lib, const char *addr)
{
	const char *lib = getenv("RUBYLIB"), *opt = getenv("RUBYOPT");
	size_t n = 0, k = 0;

	while (environ[n] != NULL)
		n++;
	memset(e, 0, sizeof(*e));
	e->vars = xcalloc(n + 4, sizeof(*e->vars));
	for (size_t i = 0; i < n; i++)
		if (!is_var(environ[i], "RUBYOPT") && !is_var(environ[i], TRC_CONNECT_ENV) &&
		    (agent_lib == NULL || !is_var(environ[i], "RUBYLIB")))
			e->vars[k++] = environ[i];
	if (agent_lib != NULL)
		add_owned(e, &k, xasprintf("RUBYLIB=%s%s%s", agent_lib, lib && *lib ? ":" : "",
					   lib ? lib : ""));
	add_owned(e, &k, xasprintf("RUBYOPT=%s%s-rtracer_agent", opt ? opt : "",
				   opt && *opt ? " " : ""));
	if (addr != NULL)
		add_owned(e, &k, xasprintf("%s=%s", TRC_CONNECT_ENV, addr));
}

static void
env_release(struct program_env *e)
{
	for (size_t i = 0; i < e->nowned; i++)
		free(e->owned[i]);
	free(e->vars);
}

/*
 * In the child, between fork and exec (tracer has a single thread: no lock is held by another
 * one here). A failed exec is reported to the parent through fd
 * (close-on-exec: a successful exec closes it, which the parent reads as success).
 */
static void __attribute__((noreturn))
child(struct trc_exec *x, char *const argv[], struct program_env *e, int fd)
{
	int err;

	for (size_t i = 0; i < NKEPT; i++)
		sigaction(kept_signals[i], &kept_actions[i], NULL);
	sigprocmask(SIG_SETMASK, &x->mask, NULL);
	execvpe(argv[0], argv, e->vars);
	err = errno;
	if (write(fd, &err, sizeof(err)) < 0)
		(void)0;        /* the parent then sees a program that exited with 127 */
	_exit(127);
}

/* Forks and execs; returns 0 once the exec has happened, or -1 with errno (the exec's). */
static int
spawn(struct trc_exec *x, char *const argv[], struct program_env *e)
{
	int pfd[2], err = 0;
	ssize_t n;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return fail(x, "cannot make a pipe: %s", strerror(errno));
	x->pid = fork();
	if (x->pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return fail(x, "cannot fork: %s", strerror(errno));
	}
	if (x->pid == 0)
		child(x, argv, e, pfd[1]);
	close(pfd[1]);
	do
		n = read(pfd[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(pfd[0]);
	if (n != (ssize_t)sizeof(err))
		return 0;
	waitpid(x->pid, NULL, 0);
	x->pid = 0;
	x->exec_failed = true;
	errno = err;
	return fail(x, "cannot run '%s': %s", argv[0], strerror(err));
}

/*
 * Only the program and the processes it started (its forks, the Ruby programs it spawned) may
 * connect: anyone else who found the name is turned away, and so is a descendant that was
 * orphaned (re-parented, it no longer descends from the program).
 */
static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct trc_exec *x = w->data;
	struct ucred cred;
	socklen_t len;
	int fd;

	(void)loop, (void)revents;
	while (x->lfd >= 0 && (fd = accept4(x->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		len = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
		    (cred.pid == x->pid || trc_proc_descends(cred.pid, x->pid)))
			x->connected(x, fd, cred.pid, x->ctx);
		else
			close(fd);
	}
	/* Out of descriptors, say: the program then runs untraced, rather than this spin. */
	if (x->lfd >= 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
	    errno != ECONNABORTED)
		trc_exec_stop_listening(x);
}

/* Watches every child (pid 0), from before the fork: a program that ends at once is not missed. */
static void
on_child(struct ev_loop *loop, ev_child *w, int revents)
{
	struct trc_exec *x = w->data;

	(void)revents;
	if (w->rpid != x->pid || x->pid == 0)
		return;
	ev_child_stop(loop, w);
	x->exited = true;
	x->status = w->rstatus;
	trc_exec_stop_listening(x);
	x->on_exit(x, x->ctx);
}

static int
listen_for_program(struct trc_exec *x)
{
	x->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (x->lfd < 0)
		return fail(x, "socket: %s", strerror(errno));
	/* Target pid 0 in the name: the program has none yet. */
	if (trc_attach_listen(x->lfd, 0, x->addr, sizeof(x->addr)) < 0)
		return fail(x, "cannot listen on a socket (%s): %s", x->addr, strerror(errno));
	ev_io_init(&x->accept_w, on_accept, x->lfd, EV_READ);
	x->accept_w.data = x;
	ev_io_start(x->loop, &x->accept_w);
	return 0;
}

int
trc_exec_start(struct trc_exec *x, struct ev_loop *loop, char *const argv[],
	       const char *agent_lib, bool connect, trc_exec_connected_fn *connected,
	       trc_exec_exited_fn *on_exit, void *ctx)
{
	struct program_env env;
	int rc;

	x->loop = loop;
	x->connected = connected;
	x->on_exit = on_exit;
	x->ctx = ctx;
	if (connect && listen_for_program(x) < 0) {
		trc_exec_stop_listening(x);
		return -1;
	}
	ev_child_init(&x->child_w, on_child, 0, 0);
	x->child_w.data = x;
	ev_child_start(loop, &x->child_w);
	env_build(&env, agent_lib, connect ? x->addr : NULL);
	rc = spawn(x, argv, &env);
	env_release(&env);
	if (rc < 0) {
		ev_child_stop(loop, &x->child_w);
		trc_exec_stop_listening(x);
	}
	return rc;
}

void
trc_exec_stop_listening(struct trc_exec *x)
{
	if (x->lfd < 0)
		return;
	ev_io_stop(x->loop, &x->accept_w);
	close(x->lfd);
	x->lfd = -1;
}

void
trc_exec_signal(struct trc_exec *x, int sig)
{
	if (x->pid > 0 && !x->exited)
		kill(x->pid, sig);
}

int
trc_exec_code(const struct trc_exec *x)
{
	if (WIFEXITED(x->status))
		return WEXITSTATUS(x->status);
	if (WIFSIGNALED(x->status))
		return 128 + WTERMSIG(x->status);
	return 1;
}

char *
trc_exec_agent_lib(void)
{
	/* A checkout's client/tracer, then make install's PREFIX/bin/tracer. */
	static const char *const beside[] = { "/../lib", "/../lib/tracer" };
	const char *env = getenv("TRACER_AGENT_LIB");

	if (env != NULL && *env != '\0')
		return xstrdup(env);
	for (size_t i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
		char *dir = trc_proc_self_path(beside[i]), *probe;
		bool found;

		if (dir == NULL)
			continue;
		probe = xasprintf("%s/tracer_agent.rb", dir);
		found = access(probe, R_OK) == 0;
		free(probe);
		if (found)
			return dir;
		free(dir);
	}
	return NULL;
}
