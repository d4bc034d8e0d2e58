/* fuzz_client_bpf.c: libFuzzer target for bpf.c and seccomp.c: a target's seccomp filter is untrusted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpf.h"
#include "seccomp.h"

/*
 * The input: a seccomp_data (64 bytes), then a program (8 bytes an instruction, as
 * PTRACE_SECCOMP_GET_FILTER gives it). Whatever it is, the interpreter must return 0 or -1,
 * give the same answer twice, never read past the program; the judge, run on it as a chain
 * of one and of two, must say allowed, refused with a call, or invalid.
 */

static void
check(int ok)
{
	if (!ok)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trc_seccomp_data d;
	struct trc_seccomp_refusal r;
	struct trc_seccomp_filter chain[2];
	struct trc_bpf_insn *prog;
	size_t n;
	uint32_t a = 0, b = 0;
	int ra, rb, rj;

	if (size < sizeof(d))
		return 0;
	memcpy(&d, data, sizeof(d));
	n = (size - sizeof(d)) / sizeof(*prog);
	/* Exactly n instructions, on the heap: ASan sees any read past them. */
	prog = malloc(n ? n * sizeof(*prog) : 1);
	if (prog == NULL)
		return 0;
	memcpy(prog, data + sizeof(d), n * sizeof(*prog));
	ra = trc_bpf_run(prog, n, &d, &a);
	rb = trc_bpf_run(prog, n, &d, &b);
	check((ra == 0 || ra == -1) && ra == rb && (ra < 0 || a == b));
	chain[0] = (struct trc_seccomp_filter){ prog, n };
	chain[1] = chain[0];
	for (size_t len = 1; len <= 2; len++) {
		rj = trc_seccomp_judge(chain, len, &r);
		check(rj == 0 || (rj == -1 && (r.invalid || (r.call != NULL && r.purpose != NULL))));
		check(!(rj == -1 && r.invalid) || ra < 0 || n > 0);
	}
	free(prog);
	return 0;
}
