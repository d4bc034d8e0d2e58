/* test_elfobj.c: symbols and names of an ELF object, in memory (this process's libc) and as a file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfobj.h"
#include "test.h"

static int
self_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

static const struct trc_mem self = { self_read, NULL };

/* Where libc's first mapping starts in this process (its ELF header), or 0. */
static uint64_t
libc_base(void)
{
	char line[512], *p;
	unsigned long start;
	uint64_t base = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	/* "start-end perms offset ...": the mapping of libc at offset 0 */
	while (base == 0 && f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if (strstr(line, "/libc.so") == NULL)
			continue;
		start = strtoul(line, &p, 16);
		p = strchr(p, ' ');
		p = p ? strchr(p + 1, ' ') : NULL;
		if (p != NULL && strtoul(p + 1, NULL, 16) == 0)
			base = start;
	}
	if (f != NULL)
		fclose(f);
	return base;
}

static void
in_memory(void)
{
	struct trc_elf e;
	uint64_t base = libc_base(), addr = 0, size = 0;
	char name[64] = "";
	pid_t (*fn)(void);

	test_cond("libc is mapped", base != 0);
	test_cond("libc's header is read where it is loaded", trc_elf_open(&e, &self, base) == 0);
	test_cond("its soname", e.soname != UINT64_MAX && trc_elf_string(&e, e.soname, name, sizeof(name)) == 0 &&
		  strncmp(name, "libc.so", 7) == 0);
	test_cond("getpid is found, with a size", trc_elf_symbol(&e, "getpid", &addr, &size) == 0 && size > 0);
	fn = (pid_t(*)(void))(uintptr_t)addr;
	test_cond("and what is there is getpid", addr != 0 && fn() == getpid());
	test_cond("an unknown name: ENOENT", trc_elf_symbol(&e, "trc_no_such_symbol", &addr, &size) < 0 &&
		  errno == ENOENT);
	test_cond("its data ends above its header", e.rw_end > base);
}

static void
as_file(void)
{
	struct trc_elf_file f;
	struct trc_elf e = { .nneeded = 0 };
	char name[64], path[] = "/tmp/trc-elfobj-XXXXXX";
	bool libc = false;
	int fd;

	test_cond("this test's own binary is read", trc_elf_file_open(&f, "/proc/self/exe") == 0 &&
		  trc_elf_open(&e, &f.mem, trc_elf_file_header(&f)) == 0);
	for (size_t i = 0; i < e.nneeded; i++)
		libc |= trc_elf_string(&e, e.needed[i], name, sizeof(name)) == 0 && strncmp(name, "libc.so", 7) == 0;
	test_cond("it needs libc", libc);
	trc_elf_file_release(&f);

	fd = mkstemp(path);
	test_cond("a scratch file", fd >= 0 && write(fd, "not an ELF object at all", 24) == 24);
	close(fd);
	test_cond("text is not ELF: ENOEXEC", trc_elf_file_open(&f, path) < 0 && errno == ENOEXEC);
	unlink(path);
}

void
test_elfobj(void)
{
	in_memory();
	as_file();
}
