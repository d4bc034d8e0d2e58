/* control.c: SIGURG handler, postponed job, message queue reading, fork and exit handling. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1    /* struct ucred */
#endif
#include "control.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <sys/ipc.h>
#include <sys/eventfd.h>
#include <sys/msg.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <ruby.h>
#include <ruby/debug.h>
#include <ruby/thread.h>

#include "extconf.h"
#include "command.h"
#include "names.h"
#include "sample.h"
#include "session.h"
#include "vm.h"
#include "tracer_protocol.h"
#include "wire.h"
#include "work.h"

#define HELLOS_PER_JOB 16

static struct sigaction chained;        /* the handler we displaced, called after ours */
static pid_t self_pid;                  /* getpid() is a syscall; this is kept by the fork handler */
static volatile sig_atomic_t forked;    /* a child that still has its parent's session */
static unsigned long ignored_messages;

/*
 * The listener: a Ruby thread, parked without the GVL on an eventfd that the signal handler
 * writes. Why it exists: a postponed job runs only when the thread it was given to checks its
 * interrupts, and nothing wakes a thread that sleeps. Ruby 3.1 happened to (its sleeping thread
 * waited in ppoll, which the signal interrupted); 3.3 sleeps in a condition variable, and a
 * process idle in sleep, Queue#pop or Thread#join never ran the job. Ruby's own trap machinery
 * would wake it, but by interrupting the thread's system call: a blocking IO#sysread in the app
 * then raises Errno::EINTR. The listener wakes nobody: it takes the GVL when it is free (an idle
 * process) and reads the queue itself. The job stays as the fast path for a busy process, where
 * the GVL would reach the listener only at the end of a time slice (100 ms).
 */
static int listen_fd = -1;              /* eventfd: the signal handler writes, the listener reads */
static volatile int listener_stop;
static VALUE listener = Qnil;

static void control_job(void *arg);
static void listener_start(void);
static void read_queue(void);

static void
chain(int sig, siginfo_t *info, void *uc)
{
	if (chained.sa_flags & SA_SIGINFO) {
		if (chained.sa_sigaction != NULL)
			chained.sa_sigaction(sig, info, uc);
	} else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN && chained.sa_handler != NULL) {
		chained.sa_handler(sig);
	}
}

/*
 * Async-signal-safe: only a postponed-job trigger, an eventfd write and the chained handler;
 * or, for the profiler's own ticks (which no one else sends), its sample alone.
 */
static void
on_sigurg(int sig, siginfo_t *info, void *uc)
{
	int saved = errno;

	if (trc_sample_signal(info))
		return;
	trc_vm_poke();
	chain(sig, info, uc);
	errno = saved;
}

static void
install_handler(void)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigurg;
	/* SA_RESTART: a blocking read in the app must not see EINTR because we were signalled. */
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGURG, &sa, &old) == 0 && old.sa_sigaction != on_sigurg)
		chained = old;
}

void
trc_control_rearm(void)
{
	struct sigaction cur;
	if (sigaction(SIGURG, NULL, &cur) == 0 && cur.sa_sigaction != on_sigurg)
		install_handler();
}

unsigned long
trc_control_ignored(void)
{
	return ignored_messages;
}

static int
ours_or_root(uid_t uid)
{
	return uid == geteuid() || uid == 0;
}

/*
 * The queue must belong to us or to root, and have been made by us or by root: its creator
 * keeps every right on it whoever it is handed to (IPC_SET can name any owner), so a queue
 * another user made and gave to us would let that user read and write our hellos. Anyone
 * else's is left alone.
 */
static int
queue_trusted(int q)
{
	struct msqid_ds ds;

	if (msgctl(q, IPC_STAT, &ds) < 0)
		return 0;
	return ours_or_root(ds.msg_perm.uid) && ours_or_root(ds.msg_perm.cuid) && (ds.msg_perm.mode & 077) == 0;
}

/*
 * The listener's uid, as the kernel recorded it at listen() and translated into our user
 * namespace: our own or root's. An abstract name can be bound by anyone in the network
 * namespace; this is what keeps a stranger who took a name (after its client left) out.
 */
static int
peer_trusted(int fd, pid_t *pid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return 0;
	*pid = cred.pid;
	return ours_or_root(cred.uid);
}

/*
 * The socket address of a hello's addr (checked by trc_wire_hello, or trc_control_connect):
 * "@name" is the abstract name, a NUL then exactly the name's bytes; "/path" a socket file.
 * n, its length, is below sizeof(addr->sun_path). Returns the address's length.
 */
static socklen_t
socket_addr(const char *s, size_t n, struct sockaddr_un *addr)
{
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	memcpy(addr->sun_path, s, n);
	if (s[0] == TRC_SOCK_ABSTRACT)
		addr->sun_path[0] = '\0';
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
}

/*
 * The socket's send buffer. On a firehose with YJIT (some 20 M events/s), 4 MiB instead of the
 * kernel's 208 KiB took the I/O thread from 35-60% of a core to 25-40%: it and the client
 * trade fewer, larger pieces.
 */
#define SEND_BUFFER (4 << 20)

/*
 * A connected socket to s (n bytes), whose listener we trust; -1 otherwise. *pid: the
 * listener's pid as the kernel saw it (0 for one in a pid namespace above ours).
 */
static int
dial(const char *s, size_t n, pid_t *pid)
{
	struct sockaddr_un addr;
	socklen_t len = socket_addr(s, n, &addr);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	/* A hello left by a client that died has nobody listening: connect fails, we move on. */
	if (connect(fd, (struct sockaddr *)&addr, len) < 0 || !peer_trusted(fd, pid)) {
		close(fd);
		return -1;
	}
	/* SEND_BUFFER, capped by the kernel at net.core.wmem_max; failing is harmless. */
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &(int){ SEND_BUFFER }, sizeof(int));
	return fd;
}

/*
 * The client is named by the pid the kernel gives for its listener, not the one its hello
 * says: a hello is only what someone wrote (tracer_protocol.h).
 */
static void
connect_client(const struct trc_hello *h)
{
	pid_t pid = 0;
	/* strlen < sizeof(h->addr) == sizeof(sun_path): trc_wire_hello found its NUL */
	int fd = dial(h->addr, strlen(h->addr), &pid);

	if (fd >= 0)
		trc_session_open(fd, pid, &trc_command_ops);
}

static void
read_queue(void)
{
	int q = msgget(TRC_QUEUE_KEY(self_pid), 0);
	struct trc_hello h;

	if (q < 0 || !queue_trusted(q))
		return;
	for (int i = 0; i < HELLOS_PER_JOB; i++) {
		ssize_t n = msgrcv(q, &h, TRC_HELLO_SIZE, 0, IPC_NOWAIT | MSG_NOERROR);
		if (n < 0)
			break;
		if (h.mtype != TRC_HELLO_MTYPE || !trc_wire_hello((char *)&h + sizeof(long), (size_t)n)) {
			ignored_messages++;
			continue;
		}
		connect_client(&h);
	}
}

/* GVL held: hellos first, then what the current session asked for. */
static VALUE
service_work(VALUE unused)
{
	if (forked && !trc_vm_defer()) {
		forked = 0;
		trc_work_forget();
		trc_session_forget();
		/* Only the forking thread lives on in a child: the listener must be made again. */
		trc_thread_ignore(listener, 0);
		listener_start();
	}
	read_queue();
	trc_session_service();
	return Qnil;
}

/* Nothing raised here may reach the thread that runs it: the listener, or the app's (a job). */
static void
service(void)
{
	int state = 0;

	rb_protect(service_work, Qnil, &state);
	if (state)
		rb_set_errinfo(Qnil);
}

/* Without the GVL: waits for a signal (or for Ruby to want the thread back). */
static void *
listener_wait(void *unused)
{
	uint64_t n;
	struct pollfd pfd = { .fd = listen_fd, .events = POLLIN };

	if (poll(&pfd, 1, -1) > 0 && read(listen_fd, &n, sizeof(n)) < 0)
		(void)0;        /* EAGAIN: the job or another wake-up took it first */
	return NULL;
}

static void
listener_unblock(void *unused)
{
	uint64_t one = 1;

	listener_stop = 1;
	if (write(listen_fd, &one, sizeof(one)) < 0)
		(void)0;
}

static VALUE
listener_main(void *unused)
{
	while (!trc_vm_is_gone()) {
		listener_stop = 0;
		rb_thread_call_without_gvl(listener_wait, NULL, listener_unblock, NULL);
		if (!listener_stop)
			service();
		/* listener_stop: Ruby wants the thread (exit, Thread#kill): its interrupt check decides. */
		rb_thread_check_ints();
	}
	return Qnil;
}

static VALUE
mark_fork_safe(VALUE th)
{
	/* Puma and Rails warn about threads made before a fork unless they carry this. */
	return rb_funcall(th, rb_intern("thread_variable_set"), 2, ID2SYM(rb_intern("fork_safe")), Qtrue);
}

/* GVL held. Starts the listener; without one the agent still answers busy processes (the job). */
static void
listener_start(void)
{
	int state = 0;

	listen_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (listen_fd < 0)
		return;
	trc_vm_listener_fd(listen_fd);
	listener = rb_thread_create(listener_main, NULL);
	trc_thread_ignore(listener, 1);
	rb_funcall(listener, rb_intern("name="), 1, rb_str_new_cstr("tracer-listener"));
	rb_protect(mark_fork_safe, listener, &state);
	if (state)
		rb_set_errinfo(Qnil);
}

static VALUE agent_module;
static ID id_service;
static int served;

/* TracerAgent.__service (private): the service, in the frame of a method of its own. */
static VALUE
service_method(VALUE self)
{
	served = 1;
	service();
	return Qnil;
}

static VALUE
call_service(VALUE unused)
{
	return rb_funcall(agent_module, id_service, 0);
}

/*
 * What rb_set_errinfo takes without raising. The VM may keep something else there for a moment
 * (the state of a break or throw on its way): that is not put back.
 */
static int
is_exception_or_nil(VALUE v)
{
	return NIL_P(v) || (!RB_SPECIAL_CONST_P(v) && RB_BUILTIN_TYPE(v) == T_OBJECT && rb_obj_is_kind_of(v, rb_eException));
}

/*
 * At a safe point, GVL held. Exceptions raised here would be swallowed by the VM: raise none.
 *
 * A job runs on whichever thread checks its interrupts next, most often the app's, and there
 * the current frame is the app's, wherever it was: what Ruby's C API takes from "the current
 * frame" would be the app's block (rb_block_given_p, rb_class_new_instance handing it to
 * initialize: issue 23, wrap.c), or its keywords. So the service runs inside a C method called
 * as any method is, whose frame has neither; only if that call fails does it run here. The
 * app's $! is as it was after: the service clears what it rescues.
 */
static void
control_job(void *arg)
{
	VALUE errinfo;
	int state = 0;

	/* A job can land on a thread of another Ractor: the listener serves the main one. */
	if (!trc_vm_main_ractor())
		return;
	errinfo = rb_errinfo();
	served = 0;
	rb_protect(call_service, Qnil, &state);
	if (!served)
		service();
	if (is_exception_or_nil(errinfo))
		rb_set_errinfo(errinfo);
}

/* ---- tracer --exec: the agent connects as it loads ---- */

#define CONNECT_SLICE_MS 10

static volatile int connect_interrupted;

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Without the GVL: until the session has work (a poke), Ruby wants the thread, or a slice has
 * passed. The listener may take the poke first: it then serves the session itself, as soon as
 * this thread lets go of the GVL, here; the slice bounds the wait either way.
 */
static void *
connect_wait(void *unused)
{
	struct pollfd pfd = { .fd = listen_fd, .events = POLLIN };
	uint64_t n;

	if (poll(&pfd, listen_fd >= 0 ? 1 : 0, CONNECT_SLICE_MS) > 0 && read(listen_fd, &n, sizeof(n)) < 0)
		(void)0;        /* EAGAIN: the listener read it first */
	return NULL;
}

static void
connect_unblock(void *unused)
{
	uint64_t one = 1;

	connect_interrupted = 1;
	if (listen_fd >= 0 && write(listen_fd, &one, sizeof(one)) < 0)
		(void)0;
}

int
trc_control_connect(const char *addr)
{
	size_t n = strlen(addr);
	struct trc_session *s;
	pid_t pid = 0;
	uint64_t deadline;
	int fd;

	if (addr[0] != TRC_SOCK_ABSTRACT || n < 2 || n >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		errno = EINVAL;
		return -1;
	}
	/* A fresh child: its parent's session goes first (service does that), or it is busy. */
	if (forked)
		service();
	if ((fd = dial(addr, n, &pid)) < 0)
		return -1;
	if ((s = trc_session_open(fd, pid, &trc_command_ops)) != NULL)
		trc_work_hurry(s);
	/*
	 * Served here, with the GVL that loading the agent holds: the hello, then the trace or top
	 * command, whose hooks are in place before the program's first line runs. The program waits
	 * for nothing more: the I/O thread sends the replies and the events from then on.
	 */
	deadline = now_ms() + TRC_CONNECT_WAIT_MS;
	connect_interrupted = 0;
	while (!trc_session_settled() && !connect_interrupted && now_ms() < deadline) {
		rb_thread_call_without_gvl(connect_wait, NULL, connect_unblock, NULL);
		service();
	}
	return 0;
}

static void
after_fork_child(void)
{
	self_pid = getpid();
	trc_work_forked();
	trc_session_forked();
	/* The parent's eventfd: a signal to the child must not wake the parent's listener. */
	trc_vm_listener_fd(-1);
	if (listen_fd >= 0)
		close(listen_fd);
	listen_fd = -1;
	forked = 1;
	trc_vm_fire();
}

static void
at_vm_exit(VALUE unused)
{
	trc_session_at_exit();
	trc_vm_gone();
}

void
trc_control_init(VALUE mod)
{
	agent_module = mod;
	rb_gc_register_address(&agent_module);
	id_service = rb_intern("__service");
	rb_define_private_method(rb_singleton_class(mod), "__service", service_method, 0);
	self_pid = getpid();
	trc_vm_init(control_job);
	install_handler();
	pthread_atfork(NULL, NULL, after_fork_child);
	rb_set_end_proc(at_vm_exit, Qnil);
	rb_gc_register_address(&listener);
	listener_start();
}
