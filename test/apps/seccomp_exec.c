/*
 * seccomp_exec.c DEFAULT [RULE...] -- CMD [ARG...]: runs CMD under a seccomp filter, as a
 * sandboxed service would be (prctl(PR_SET_NO_NEW_PRIVS), then seccomp(SECCOMP_SET_MODE_FILTER)
 * for every thread, then exec). x86-64 system call numbers. Built by the tests with cc.
 *
 * DEFAULT, and each rule's ACTION: allow, log, kill_process, kill_thread, trap, errno:N.
 * RULE: NR=ACTION (the call numbered NR), or NR/ARG/MASK/VALUE=ACTION (only when its
 * argument ARG, its low 32 bits masked with MASK, is VALUE; numbers in C's notation).
 * The first rule that matches answers; the default answers the rest.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_INSNS 4096

static struct sock_filter prog[MAX_INSNS];
static unsigned short len;

static void
emit(unsigned short code, unsigned char jt, unsigned char jf, unsigned int k)
{
	if (len == MAX_INSNS) {
		fprintf(stderr, "seccomp_exec: too many rules\n");
		exit(2);
	}
	prog[len++] = (struct sock_filter){ code, jt, jf, k };
}

static unsigned int
action(const char *s)
{
	if (strcmp(s, "allow") == 0)
		return SECCOMP_RET_ALLOW;
	if (strcmp(s, "log") == 0)
		return SECCOMP_RET_LOG;
	if (strcmp(s, "kill_process") == 0)
		return SECCOMP_RET_KILL_PROCESS;
	if (strcmp(s, "kill_thread") == 0)
		return SECCOMP_RET_KILL_THREAD;
	if (strcmp(s, "trap") == 0)
		return SECCOMP_RET_TRAP;
	if (strncmp(s, "errno:", 6) == 0)
		return SECCOMP_RET_ERRNO | (unsigned int)(strtoul(s + 6, NULL, 0) & SECCOMP_RET_DATA);
	fprintf(stderr, "seccomp_exec: unknown action %s\n", s);
	exit(2);
}

/* A is the call's number before and after each rule. */
static void
rule(char *r)
{
	char *eq = strchr(r, '='), *p;
	unsigned long nr, arg, mask, value;

	if (eq == NULL) {
		fprintf(stderr, "seccomp_exec: a rule is NR=ACTION or NR/ARG/MASK/VALUE=ACTION: %s\n", r);
		exit(2);
	}
	*eq = '\0';
	nr = strtoul(r, &p, 0);
	if (*p == '\0') {
		emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (unsigned int)nr);
		emit(BPF_RET | BPF_K, 0, 0, action(eq + 1));
		return;
	}
	arg = strtoul(p + 1, &p, 0);
	mask = strtoul(p + 1, &p, 0);
	value = strtoul(p + 1, &p, 0);
	emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 5, (unsigned int)nr);
	emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, (unsigned int)(offsetof(struct seccomp_data, args) + 8 * arg));
	emit(BPF_ALU | BPF_AND | BPF_K, 0, 0, (unsigned int)mask);
	emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (unsigned int)value);
	emit(BPF_RET | BPF_K, 0, 0, action(eq + 1));
	emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));
}

int
main(int argc, char **argv)
{
	struct sock_fprog fprog;
	int i;

	if (argc < 4) {
		fprintf(stderr, "usage: seccomp_exec DEFAULT [RULE...] -- CMD [ARG...]\n");
		return 2;
	}
	emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, arch));
	emit(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, AUDIT_ARCH_X86_64);
	emit(BPF_RET | BPF_K, 0, 0, SECCOMP_RET_KILL_PROCESS);
	emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));
	for (i = 2; i < argc && strcmp(argv[i], "--") != 0; i++)
		rule(argv[i]);
	emit(BPF_RET | BPF_K, 0, 0, action(argv[1]));
	if (i >= argc - 1) {
		fprintf(stderr, "seccomp_exec: no command after --\n");
		return 2;
	}
	fprog.len = len;
	fprog.filter = prog;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fprog) != 0) {
		perror("seccomp_exec");
		return 1;
	}
	execvp(argv[i + 1], argv + i + 1);
	perror("seccomp_exec: exec");
	return 127;
}
