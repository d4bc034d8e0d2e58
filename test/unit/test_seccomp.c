/* test_seccomp.c: what a chain of filters says to the agent's calls, and in which words. */
#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>

#include "seccomp.h"
#include "test.h"

#define LD_NR { 0x20, 0, 0, 0 }
#define LD_ARG0 { 0x20, 0, 0, 16 }
#define IS(nr) { 0x15, 0, 1, (uint32_t)(nr) }   /* JEQ: the next instruction, or the one after */
#define RET(v) { 0x06, 0, 0, (uint32_t)(v) }

#define ALLOW 0x7fff0000u
#define LOG 0x7ffc0000u
#define KILL_PROCESS 0x80000000u
#define KILL_THREAD 0x00000000u
#define ERRNO(e) (0x00050000u | (e))
#define TRAP 0x00030000u

#define N(p) (sizeof(p) / sizeof((p)[0]))

/* A filter that answers one call so, and allows the rest. */
#define ONE(name, nr, action) static const struct trc_bpf_insn name[] = { LD_NR, IS(nr), RET(action), RET(ALLOW) }

ONE(kill_socket, SYS_socket, KILL_PROCESS);
ONE(thread_msgget, SYS_msgget, KILL_THREAD);
ONE(eperm_msgget, SYS_msgget, ERRNO(EPERM));
ONE(enosys_clone3, SYS_clone3, ERRNO(ENOSYS));
ONE(eperm_clone3, SYS_clone3, ERRNO(EPERM));
ONE(eperm_prctl, SYS_prctl, ERRNO(EPERM));
ONE(kill_prctl, SYS_prctl, KILL_PROCESS);
ONE(log_socket, SYS_socket, LOG);
ONE(trap_connect, SYS_connect, TRAP);
ONE(eperm_fork, SYS_clone, ERRNO(EPERM));
static const struct trc_bpf_insn allow_all[] = { RET(ALLOW) };
static const struct trc_bpf_insn invalid[] = { { 0x30, 0, 0, 0 }, RET(ALLOW) };
/* clone: a thread (CLONE_THREAD, 0x10000, in the flags) is killed; a fork is not. */
static const struct trc_bpf_insn kill_thread_clone[] = {
	LD_NR, { 0x15, 0, 3, SYS_clone }, LD_ARG0, { 0x45, 0, 1, 0x10000 }, RET(KILL_PROCESS), RET(ALLOW),
};

static int
judge1(const struct trc_bpf_insn *insns, size_t n, struct trc_seccomp_refusal *r)
{
	struct trc_seccomp_filter f = { insns, n };

	return trc_seccomp_judge(&f, 1, r);
}

static void
single_filters(void)
{
	struct trc_seccomp_refusal r;

	test_note("one filter, each action on a call the agent makes");
	test_cond("allow everything", judge1(allow_all, N(allow_all), &r) == 0);
	test_cond("no filter at all", trc_seccomp_judge(NULL, 0, &r) == 0);
	test_cond("kill process on socket", judge1(kill_socket, N(kill_socket), &r) < 0 && r.action == KILL_PROCESS &&
		  strcmp(r.call, "socket(AF_UNIX, SOCK_STREAM)") == 0 && strcmp(r.purpose, "the agent's connection to tracer") == 0);
	test_cond("kill thread on msgget", judge1(thread_msgget, N(thread_msgget), &r) < 0 && r.action == KILL_THREAD &&
		  strcmp(r.call, "msgget") == 0);
	test_cond("EPERM on msgget", judge1(eperm_msgget, N(eperm_msgget), &r) < 0 && r.action == ERRNO(EPERM));
	test_cond("trap on connect", judge1(trap_connect, N(trap_connect), &r) < 0 && strcmp(r.call, "connect") == 0);
	test_cond("log on socket is fine", judge1(log_socket, N(log_socket), &r) == 0);
	test_cond("a filter tracer cannot run", judge1(invalid, N(invalid), &r) < 0 && r.invalid);
}

static void
errors_that_are_got_over(void)
{
	struct trc_seccomp_refusal r;

	test_note("an error where Ruby and libc get over it, and where they do not");
	test_cond("clone3 ENOSYS: glibc uses clone (Docker's profile)", judge1(enosys_clone3, N(enosys_clone3), &r) == 0);
	test_cond("clone3 EPERM: pthread_create fails", judge1(eperm_clone3, N(eperm_clone3), &r) < 0 &&
		  strcmp(r.call, "clone3(thread)") == 0);
	test_cond("prctl(PR_SET_NAME) EPERM: a thread without a name", judge1(eperm_prctl, N(eperm_prctl), &r) == 0);
	test_cond("prctl killed", judge1(kill_prctl, N(kill_prctl), &r) < 0 && r.action == KILL_PROCESS);
	test_cond("EPERM on every clone: a thread cannot start", judge1(eperm_fork, N(eperm_fork), &r) < 0 &&
		  strcmp(r.call, "clone(thread)") == 0);
	test_cond("a filter on clone's flags: the thread's clone is seen",
		  judge1(kill_thread_clone, N(kill_thread_clone), &r) < 0 && strcmp(r.call, "clone(thread)") == 0);
}

static void
chains(void)
{
	struct trc_seccomp_filter two[] = { { allow_all, N(allow_all) }, { kill_socket, N(kill_socket) } };
	struct trc_seccomp_filter both[] = { { eperm_msgget, N(eperm_msgget) }, { thread_msgget, N(thread_msgget) } };
	struct trc_seccomp_refusal r;

	test_note("a chain: the most severe answer wins, whichever filter gives it");
	test_cond("an older filter's kill", trc_seccomp_judge(two, 2, &r) < 0 && r.action == KILL_PROCESS);
	test_cond("kill thread over EPERM", trc_seccomp_judge(both, 2, &r) < 0 && r.action == KILL_THREAD);
}

static void
words(void)
{
	char buf[96];

	test_note("actions in words");
	test_str("kill process", trc_seccomp_action_name(KILL_PROCESS, buf, sizeof(buf)), "kill process (SIGSYS)");
	test_str("kill thread", trc_seccomp_action_name(KILL_THREAD, buf, sizeof(buf)), "kill thread (SIGSYS)");
	test_str("errno", trc_seccomp_action_name(ERRNO(EPERM), buf, sizeof(buf)), "errno 1 (EPERM)");
	test_str("an errno without a name", trc_seccomp_action_name(ERRNO(4000), buf, sizeof(buf)), "errno 4000");
	test_str("trap", trc_seccomp_action_name(TRAP, buf, sizeof(buf)), "trap (SIGSYS)");
	test_str("notify", trc_seccomp_action_name(0x7fc00000u, buf, sizeof(buf)), "user notification (another process decides)");
	test_str("trace", trc_seccomp_action_name(0x7ff00000u, buf, sizeof(buf)), "trace (a ptracer decides)");
	test_str("unknown", trc_seccomp_action_name(0x12340000u, buf, sizeof(buf)),
		 "unknown action 0x12340000 (the kernel kills the process)");
}

void
test_seccomp(void)
{
	single_filters();
	errors_that_are_got_over();
	chains();
	words();
}
