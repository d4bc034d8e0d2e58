/* seccomp.h: what a process's seccomp filters would answer to the calls the agent makes in it. */
#ifndef TRC_SECCOMP_H
#define TRC_SECCOMP_H

#include <stddef.h>
#include <stdint.h>

#include "bpf.h"

/* One filter of a thread's chain, as PTRACE_SECCOMP_GET_FILTER gives it. */
struct trc_seccomp_filter {
	const struct trc_bpf_insn *insns;
	size_t n;
};

/* Where the chain refuses the agent: the call, what it is for, the action (SECCOMP_RET_*). */
struct trc_seccomp_refusal {
	const char *call;       /* "socket(AF_UNIX, SOCK_STREAM)" */
	const char *purpose;    /* "the agent's connection to tracer" */
	uint32_t action;        /* the chain's answer, action and data */
	int invalid;            /* a filter tracer cannot run (call and action unset) */
};

/*
 * Runs every call the agent, its loader and Ruby make in the process when tracer loads the
 * agent and attaches (the list was taken from strace of real loads and attaches), with the
 * arguments they pass, through the chain (chain[0] the newest), and combines the filters'
 * answers as the kernel does (the most severe wins). Returns 0 when each call is allowed or
 * logged (or, for a call whose failure Ruby and libc get over, fails with an error: clone3's
 * ENOSYS sends glibc to clone), else -1 with *r filled. Pure; any thread.
 */
int trc_seccomp_judge(const struct trc_seccomp_filter *chain, size_t n, struct trc_seccomp_refusal *r);

/* An action in words: "kill process", "errno 1 (EPERM)"..., into buf. Returns buf. */
const char *trc_seccomp_action_name(uint32_t action, char *buf, size_t size);

#endif
