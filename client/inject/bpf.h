/* bpf.h: classic BPF as seccomp runs it: what a filter answers for one system call. */
#ifndef TRC_BPF_H
#define TRC_BPF_H

#include <stddef.h>
#include <stdint.h>

#define TRC_BPF_MAX_INSNS 4096          /* BPF_MAXINSNS: the kernel takes no longer filter */

/* struct sock_filter: one instruction, as PTRACE_SECCOMP_GET_FILTER gives it. */
struct trc_bpf_insn {
	uint16_t code;
	uint8_t jt, jf;
	uint32_t k;
};

/* struct seccomp_data: what a filter sees of a call. */
struct trc_seccomp_data {
	int32_t nr;
	uint32_t arch;
	uint64_t ip;
	uint64_t args[6];
};

/*
 * Runs the filter prog (n instructions) on d, as the kernel would: 0 with its answer in *ret,
 * or -1 when prog is no program the kernel would have taken (an instruction seccomp refuses, a
 * load outside seccomp_data, a jump past the end, no return). Pure; any thread.
 */
int trc_bpf_run(const struct trc_bpf_insn *prog, size_t n, const struct trc_seccomp_data *d, uint32_t *ret);

#endif
