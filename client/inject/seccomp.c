/* seccomp.c: the calls the agent makes in a process, and what a chain of seccomp filters says to them. */
#define _GNU_SOURCE     /* MSG_NOERROR, CLONE_* */
#include "seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define AUDIT_ARCH_X86_64 0xc000003eu   /* linux/audit.h: EM_X86_64 | 64-bit | little-endian */

/* linux/seccomp.h's actions; the full action is the top 16 bits, compared as signed. */
#define RET_KILL_PROCESS 0x80000000u
#define RET_KILL_THREAD 0x00000000u
#define RET_TRAP 0x00030000u
#define RET_ERRNO 0x00050000u
#define RET_USER_NOTIF 0x7fc00000u
#define RET_TRACE 0x7ff00000u
#define RET_LOG 0x7ffc0000u
#define RET_ALLOW 0x7fff0000u
#define RET_ACTION_FULL 0xffff0000u
#define RET_DATA 0x0000ffffu

enum need {
	NEEDED,         /* anything but allow or log breaks the agent, or the process */
	MAY_FAIL,       /* an error is got over (a thread's name, rseq, isatty); a kill is not */
	CLONE3,         /* an error of ENOSYS sends glibc to clone, which is NEEDED below */
};

struct call {
	const char *call;
	const char *purpose;
	int nr;
	uint64_t args[6];
	enum need need;
};

#define FD 5                                    /* any descriptor: filters do not look at it */
#define CWD ((uint64_t)(int64_t)AT_FDCWD)       /* an int, sign-extended into the register */
#define ANON ((uint64_t)(int64_t)-1)
#define THREAD_FLAGS (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM | \
		      CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID)
#define FORK_FLAGS (CLONE_CHILD_CLEARTID | CLONE_CHILD_SETTID | SIGCHLD)
#define SOCK_FLAGS (SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK)

#define LOADING "loading the agent"
#define THREADS "the agent's threads"
#define QUEUE "the agent's message queue"
#define SOCKET "the agent's connection to tracer"

/*
 * From strace -f of a process while tracer loaded the agent into it and attached with every
 * mode (-e, -m, -f, --top, --gc, --heapdump, --memory, --backtraces), on each Ruby of the
 * matrix: the loader's dlopen and require, Ruby's thread creation and scheduling, the agent's
 * signal handler, queue, socket and threads. What a filter may look at is passed as Ruby and
 * the agent pass it (flags, families, options); pointers are 0. Left out: what only the copy
 * --memory and --fork make does after the fork (its kill(SIGSTOP), its exit_group), which a
 * filter can stop without touching the process.
 */
static const struct call calls[] = {
	{ "openat(O_RDONLY)", LOADING, SYS_openat, { CWD, 0, O_RDONLY | O_CLOEXEC }, NEEDED },
	{ "openat(O_RDONLY|O_NONBLOCK)", LOADING, SYS_openat, { CWD, 0, O_RDONLY | O_NONBLOCK | O_CLOEXEC }, NEEDED },
	{ "openat(O_RDONLY|O_NONBLOCK, inherited)", LOADING, SYS_openat, { CWD, 0, O_RDONLY | O_NONBLOCK }, NEEDED },
	{ "read", LOADING, SYS_read, { FD }, NEEDED },
	{ "pread64", LOADING, SYS_pread64, { FD }, NEEDED },
	{ "close", LOADING, SYS_close, { FD }, NEEDED },
	{ "newfstatat(AT_EMPTY_PATH)", LOADING, SYS_newfstatat, { FD, 0, 0, AT_EMPTY_PATH }, NEEDED },
	{ "newfstatat", LOADING, SYS_newfstatat, { CWD, 0, 0, 0 }, NEEDED },
	{ "fstat", LOADING, SYS_fstat, { FD }, NEEDED },
	{ "lseek", LOADING, SYS_lseek, { FD, 0, SEEK_CUR }, NEEDED },
	{ "readlink", LOADING, SYS_readlink, { 0 }, NEEDED },
	{ "getcwd", LOADING, SYS_getcwd, { 0 }, NEEDED },
	{ "fcntl(F_GETFL)", LOADING, SYS_fcntl, { FD, F_GETFL }, NEEDED },
	{ "fcntl(F_SETFL)", LOADING, SYS_fcntl, { FD, F_SETFL, O_RDONLY }, NEEDED },
	{ "fcntl(F_GETFD)", LOADING, SYS_fcntl, { FD, F_GETFD }, NEEDED },
	{ "fcntl(F_SETFD)", LOADING, SYS_fcntl, { FD, F_SETFD, FD_CLOEXEC }, NEEDED },
	{ "ioctl(TCGETS)", LOADING, SYS_ioctl, { FD, TCGETS }, MAY_FAIL },
	{ "ioctl(TCGETS2)", LOADING, SYS_ioctl, { FD, 0x802c542a }, MAY_FAIL },        /* glibc 2.41 isatty */
	{ "mmap(PROT_READ, file)", LOADING, SYS_mmap, { 0, 4096, PROT_READ, MAP_PRIVATE | MAP_DENYWRITE, FD }, NEEDED },
	{ "mmap(PROT_READ, private file)", LOADING, SYS_mmap, { 0, 4096, PROT_READ, MAP_PRIVATE, FD }, NEEDED },
	{ "mmap(PROT_READ|PROT_EXEC, file)", LOADING, SYS_mmap,
	  { 0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED | MAP_DENYWRITE, FD }, NEEDED },
	{ "mmap(PROT_READ|PROT_WRITE, file)", LOADING, SYS_mmap,
	  { 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_DENYWRITE, FD }, NEEDED },
	{ "mmap(PROT_READ, fixed file)", LOADING, SYS_mmap, { 0, 4096, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_DENYWRITE, FD },
	  NEEDED },
	{ "mmap(PROT_READ|PROT_WRITE, anonymous)", LOADING, SYS_mmap,
	  { 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, ANON }, NEEDED },
	{ "mmap(PROT_READ|PROT_WRITE, fixed anonymous)", LOADING, SYS_mmap,
	  { 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, ANON }, NEEDED },
	{ "mmap(PROT_READ|PROT_WRITE, stack)", THREADS, SYS_mmap,
	  { 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, ANON }, NEEDED },
	{ "mmap(PROT_NONE, stack)", THREADS, SYS_mmap,
	  { 0, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, ANON }, NEEDED },
	{ "mmap(PROT_NONE, reserve)", LOADING, SYS_mmap,
	  { 0, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, ANON }, NEEDED },
	{ "mprotect(PROT_READ)", LOADING, SYS_mprotect, { 0, 4096, PROT_READ }, NEEDED },
	{ "mprotect(PROT_READ|PROT_WRITE)", THREADS, SYS_mprotect, { 0, 4096, PROT_READ | PROT_WRITE }, NEEDED },
	{ "munmap", LOADING, SYS_munmap, { 0, 4096 }, NEEDED },
	{ "madvise(MADV_DONTNEED)", THREADS, SYS_madvise, { 0, 4096, MADV_DONTNEED }, MAY_FAIL },
	/* glibc 2.41's thread stack guard (MADV_GUARD_INSTALL), mprotect where refused. */
	{ "madvise(MADV_GUARD_INSTALL)", THREADS, SYS_madvise, { 0, 4096, 102 }, MAY_FAIL },
	{ "brk", LOADING, SYS_brk, { 0 }, NEEDED },
	{ "clone3(thread)", THREADS, SYS_clone3, { 0, 88 }, CLONE3 },
	{ "clone(thread)", THREADS, SYS_clone, { THREAD_FLAGS }, NEEDED },
	{ "set_robust_list", THREADS, SYS_set_robust_list, { 0, 24 }, MAY_FAIL },
	{ "rseq", THREADS, SYS_rseq, { 0, 32, 0, 0x53053053 }, MAY_FAIL },
	{ "sigaltstack", THREADS, SYS_sigaltstack, { 0 }, NEEDED },
	{ "rt_sigprocmask(SIG_SETMASK)", THREADS, SYS_rt_sigprocmask, { SIG_SETMASK, 0, 0, 8 }, NEEDED },
	{ "rt_sigprocmask(SIG_BLOCK)", THREADS, SYS_rt_sigprocmask, { SIG_BLOCK, 0, 0, 8 }, NEEDED },
	{ "sched_getaffinity", THREADS, SYS_sched_getaffinity, { 0 }, MAY_FAIL },
	{ "prctl(PR_SET_NAME)", THREADS, SYS_prctl, { PR_SET_NAME }, MAY_FAIL },
	{ "prctl(PR_SET_VMA)", THREADS, SYS_prctl, { 0x53564d41, 0 }, MAY_FAIL },      /* Ruby 3.4 names its maps */
	{ "prlimit64(RLIMIT_STACK)", THREADS, SYS_prlimit64, { 0, RLIMIT_STACK }, NEEDED },
	{ "prlimit64(RLIMIT_AS)", THREADS, SYS_prlimit64, { 0, RLIMIT_AS }, NEEDED },
	{ "gettid", THREADS, SYS_gettid, { 0 }, NEEDED },
	{ "getpid", THREADS, SYS_getpid, { 0 }, NEEDED },
	{ "futex(FUTEX_WAIT)", THREADS, SYS_futex, { 0, FUTEX_WAIT_PRIVATE }, NEEDED },
	{ "futex(FUTEX_WAKE)", THREADS, SYS_futex, { 0, FUTEX_WAKE_PRIVATE }, NEEDED },
	{ "futex(FUTEX_WAIT_BITSET)", THREADS, SYS_futex, { 0, FUTEX_WAIT_BITSET_PRIVATE }, NEEDED },
	{ "futex(FUTEX_WAIT_BITSET|FUTEX_CLOCK_REALTIME)", THREADS, SYS_futex,
	  { 0, FUTEX_WAIT_BITSET_PRIVATE | FUTEX_CLOCK_REALTIME }, NEEDED },
	{ "sched_yield", THREADS, SYS_sched_yield, { 0 }, NEEDED },
	{ "exit", THREADS, SYS_exit, { 0 }, NEEDED },
	{ "ppoll", THREADS, SYS_ppoll, { 0 }, NEEDED },
	{ "poll", THREADS, SYS_poll, { 0 }, NEEDED },
	{ "clock_gettime", THREADS, SYS_clock_gettime, { CLOCK_MONOTONIC }, NEEDED },
	{ "clock_nanosleep", THREADS, SYS_clock_nanosleep, { CLOCK_MONOTONIC }, NEEDED },
	{ "nanosleep", THREADS, SYS_nanosleep, { 0 }, NEEDED },
	{ "timer_create", THREADS, SYS_timer_create, { CLOCK_MONOTONIC }, NEEDED },
	{ "timer_settime", THREADS, SYS_timer_settime, { 0 }, NEEDED },
	{ "timer_delete", THREADS, SYS_timer_delete, { 0 }, NEEDED },
	{ "eventfd2", THREADS, SYS_eventfd2, { 0, EFD_CLOEXEC | EFD_NONBLOCK }, NEEDED },
	{ "pipe2", THREADS, SYS_pipe2, { 0, O_NONBLOCK | O_CLOEXEC }, NEEDED },
	{ "write", THREADS, SYS_write, { FD }, NEEDED },
	{ "writev", THREADS, SYS_writev, { FD }, NEEDED },
	{ "epoll_create1", THREADS, SYS_epoll_create1, { EPOLL_CLOEXEC }, NEEDED },
	{ "epoll_ctl", THREADS, SYS_epoll_ctl, { FD }, NEEDED },
	{ "epoll_wait", THREADS, SYS_epoll_wait, { FD }, NEEDED },
	{ "epoll_pwait", THREADS, SYS_epoll_pwait, { FD }, NEEDED },
	{ "tgkill(SIGVTALRM)", THREADS, SYS_tgkill, { 1, 1, SIGVTALRM }, NEEDED },
	{ "rt_sigaction(SIGURG)", "the agent's signal", SYS_rt_sigaction, { SIGURG, 0, 0, 8 }, NEEDED },
	{ "rt_sigreturn", "the agent's signal", SYS_rt_sigreturn, { 0 }, NEEDED },
	{ "restart_syscall", "the agent's signal", SYS_restart_syscall, { 0 }, NEEDED },
	{ "getuid", QUEUE, SYS_getuid, { 0 }, NEEDED },
	{ "geteuid", QUEUE, SYS_geteuid, { 0 }, NEEDED },
	{ "getgid", QUEUE, SYS_getgid, { 0 }, NEEDED },
	{ "getegid", QUEUE, SYS_getegid, { 0 }, NEEDED },
	{ "msgget", QUEUE, SYS_msgget, { 0x74000001, 0 }, NEEDED },
	{ "msgctl(IPC_STAT)", QUEUE, SYS_msgctl, { 0, IPC_STAT }, NEEDED },
	{ "msgrcv(IPC_NOWAIT)", QUEUE, SYS_msgrcv, { 0, 0, 64, 0, IPC_NOWAIT | MSG_NOERROR }, NEEDED },
	{ "socket(AF_UNIX, SOCK_STREAM)", SOCKET, SYS_socket, { AF_UNIX, SOCK_FLAGS, 0 }, NEEDED },
	{ "connect", SOCKET, SYS_connect, { FD, 0, 38 }, NEEDED },
	{ "getsockopt(SO_PEERCRED)", SOCKET, SYS_getsockopt, { FD, SOL_SOCKET, SO_PEERCRED }, NEEDED },
	{ "setsockopt(SO_SNDBUF)", SOCKET, SYS_setsockopt, { FD, SOL_SOCKET, SO_SNDBUF, 0, 4 }, NEEDED },
	{ "sendto(MSG_NOSIGNAL)", SOCKET, SYS_sendto, { FD, 0, 64, MSG_NOSIGNAL }, NEEDED },
	{ "recvmsg", SOCKET, SYS_recvmsg, { FD, 0, MSG_CMSG_CLOEXEC }, NEEDED },
	{ "shutdown", SOCKET, SYS_shutdown, { FD, SHUT_RDWR }, NEEDED },
	{ "clone(fork)", "--memory and --fork's copy of the process", SYS_clone, { FORK_FLAGS }, MAY_FAIL },
	{ "wait4", "--memory and --fork's copy of the process", SYS_wait4, { 0 }, MAY_FAIL },
};

/* The chain's answer: the most severe action wins, the newest filter's among equals. */
static int
chain_run(const struct trc_seccomp_filter *chain, size_t n, const struct trc_seccomp_data *d, uint32_t *out)
{
	uint32_t ret = RET_ALLOW, cur;

	for (size_t i = 0; i < n; i++) {
		if (trc_bpf_run(chain[i].insns, chain[i].n, d, &cur) < 0)
			return -1;
		if ((int32_t)(cur & RET_ACTION_FULL) < (int32_t)(ret & RET_ACTION_FULL))
			ret = cur;
	}
	*out = ret;
	return 0;
}

static int
fine(const struct call *c, uint32_t ret)
{
	uint32_t action = ret & RET_ACTION_FULL;

	if (action == RET_ALLOW || action == RET_LOG)
		return 1;
	if (action != RET_ERRNO)
		return 0;
	return c->need == MAY_FAIL || (c->need == CLONE3 && (ret & RET_DATA) == ENOSYS);
}

int
trc_seccomp_judge(const struct trc_seccomp_filter *chain, size_t n, struct trc_seccomp_refusal *r)
{
	struct trc_seccomp_data d;
	uint32_t ret;

	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		memset(&d, 0, sizeof(d));
		d.nr = calls[i].nr;
		d.arch = AUDIT_ARCH_X86_64;
		memcpy(d.args, calls[i].args, sizeof(d.args));
		if (chain_run(chain, n, &d, &ret) < 0) {
			r->invalid = 1;
			return -1;
		}
		if (!fine(&calls[i], ret)) {
			r->call = calls[i].call;
			r->purpose = calls[i].purpose;
			r->action = ret;
			return -1;
		}
	}
	return 0;
}

const char *
trc_seccomp_action_name(uint32_t action, char *buf, size_t size)
{
	uint32_t data = action & RET_DATA;

	switch (action & RET_ACTION_FULL) {
	case RET_KILL_PROCESS: snprintf(buf, size, "kill process (SIGSYS)"); break;
	case RET_KILL_THREAD: snprintf(buf, size, "kill thread (SIGSYS)"); break;
	case RET_TRAP: snprintf(buf, size, "trap (SIGSYS)"); break;
	case RET_ERRNO:
		snprintf(buf, size, "errno %u%s%s%s", data, data < 4096 && strerrorname_np((int)data) ? " (" : "",
			 data < 4096 && strerrorname_np((int)data) ? strerrorname_np((int)data) : "",
			 data < 4096 && strerrorname_np((int)data) ? ")" : "");
		break;
	case RET_USER_NOTIF: snprintf(buf, size, "user notification (another process decides)"); break;
	case RET_TRACE: snprintf(buf, size, "trace (a ptracer decides)"); break;
	case RET_LOG: snprintf(buf, size, "log"); break;
	case RET_ALLOW: snprintf(buf, size, "allow"); break;
	default: snprintf(buf, size, "unknown action %#x (the kernel kills the process)", action); break;
	}
	return buf;
}
