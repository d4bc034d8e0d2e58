/* rubyproc.c: a process's libruby from its maps, read through process_vm_readv, and checked. */
#define _GNU_SOURCE     /* process_vm_readv */
#include "rubyproc.h"

#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#define PAGE 4096u
#define POSTPONED_JOB_INTERRUPT 0x04    /* the same in every Ruby with postponed jobs */

struct mapping {
	uint64_t start, end, offset;
	unsigned long inode;
	char perms[5];
	const char *path;       /* "" for an anonymous mapping */
};

static enum trc_rubyproc_miss __attribute__((format(printf, 4, 5)))
miss(enum trc_rubyproc_miss m, char *why, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return m;
}

/* Every byte of s outside printable ASCII becomes '?'. */
static void
printable(char *s)
{
	for (; *s != '\0'; s++)
		if (*s < 0x20 || *s > 0x7e)
			*s = '?';
}

static int
mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct trc_rubyproc *r = ctx;
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(r->pid, &local, 1, &remote, 1, 0);

	if (n == (ssize_t)len)
		return 0;
	if (n >= 0)
		errno = EFAULT;
	return -1;
}

int
trc_rubyproc_read(const struct trc_rubyproc *r, uint64_t addr, void *buf, size_t len)
{
	return mem_read((void *)r, addr, buf, len);
}

int
trc_rubyproc_write(const struct trc_rubyproc *r, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_writev(r->pid, &local, 1, &remote, 1, 0);

	if (n == (ssize_t)len)
		return 0;
	if (n >= 0)
		errno = EFAULT;
	return -1;
}

/* "start-end perms offset dev inode path" */
static int
parse_mapping(char *line, struct mapping *m)
{
	int path = 0;

	line[strcspn(line, "\n")] = '\0';
	/* The kernel writes these fields: hex and decimal numbers that fit. NOLINTNEXTLINE(cert-err34-c) */
	if (sscanf(line, "%lx-%lx %4s %lx %*s %lu %n", (unsigned long *)&m->start, (unsigned long *)&m->end,
		   m->perms, (unsigned long *)&m->offset, &m->inode, &path) < 5)
		return -1;
	m->path = path > 0 ? line + path : "";
	return 0;
}

/* Calls fn for each mapping of pid until it returns non-zero, which is returned; -1 + errno. */
static int
each_mapping(pid_t pid, int (*fn)(const struct mapping *, void *), void *arg)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	struct mapping m;
	int rc = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (rc == 0 && getline(&line, &cap, f) > 0)
		if (parse_mapping(line, &m) == 0)
			rc = fn(&m, arg);
	free(line);
	fclose(f);
	return rc;
}

struct needle {
	const char *s;
};

static int
has_needle(const struct mapping *m, void *arg)
{
	return strstr(m->path, ((struct needle *)arg)->s) != NULL;
}

bool
trc_rubyproc_maps_have(pid_t pid, const char *needle)
{
	struct needle n = { needle };

	return each_mapping(pid, has_needle, &n) == 1;
}

struct module_search {
	unsigned long exe_inode;
	struct trc_rubyproc *r;
	uint64_t base;
	bool libruby;
};

static bool
is_libruby(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return strncmp(base, "libruby", 7) == 0 && strstr(base, ".so") != NULL;
}

/* libruby's first mapping wins over the executable's. */
static int
find_module(const struct mapping *m, void *arg)
{
	struct module_search *s = arg;

	if (m->offset != 0 || m->path[0] != '/')
		return 0;
	if (is_libruby(m->path) || (s->base == 0 && m->inode == s->exe_inode)) {
		s->base = m->start;
		s->libruby = is_libruby(m->path);
		snprintf(s->r->module, sizeof(s->r->module), "%s", m->path);
		return s->libruby;
	}
	return 0;
}

struct spare_search {
	uint64_t at, end;
};

/* The writable mapping the end of libruby's data falls in. */
static int
find_spare(const struct mapping *m, void *arg)
{
	struct spare_search *s = arg;

	if (m->start <= s->at && s->at < m->end && m->perms[0] == 'r' && m->perms[1] == 'w') {
		s->end = m->end;
		return 1;
	}
	return 0;
}

static int
symbol(const struct trc_rubyproc *r, const char *name, uint64_t *addr, uint64_t *size)
{
	return trc_elf_symbol(&r->elf, name, addr, size);
}

static void
guard(struct trc_rubyproc *r, const char *name)
{
	uint64_t addr, size;

	if (r->nguard < TRC_RUBYPROC_GUARDS && symbol(r, name, &addr, &size) == 0 && size > 0) {
		r->guard[r->nguard][0] = addr;
		r->guard[r->nguard][1] = addr + size;
		r->nguard++;
	}
}

bool
trc_rubyproc_in_guard(const struct trc_rubyproc *r, uint64_t pc)
{
	for (size_t i = 0; i < r->nguard; i++)
		if (pc >= r->guard[i][0] && pc < r->guard[i][1])
			return true;
	return false;
}

/* The module's ELF header, version and soname. */
static enum trc_rubyproc_miss
open_module(struct trc_rubyproc *r, uint64_t base, char *why, size_t n)
{
	uint64_t addr, size;

	if (trc_elf_open(&r->elf, &r->mem, base) < 0)
		return errno == ENOEXEC ? miss(TRC_RUBYPROC_UNSUPPORTED, why, n, "%s in process %d is no "
					       "64-bit ELF object tracer can read", r->module, (int)r->pid)
					: miss(TRC_RUBYPROC_UNREADABLE, why, n, "cannot read %s in process %d: %s",
					       r->module, (int)r->pid, strerror(errno));
	if (symbol(r, "ruby_version", &addr, &size) < 0)
		return r->is_static ? miss(TRC_RUBYPROC_NOT_RUBY, why, n, "process %d is not a Ruby process "
					   "(no libruby in its maps, and its executable %s has no "
					   "ruby_version)", (int)r->pid, r->module)
				    : miss(TRC_RUBYPROC_UNSUPPORTED, why, n, "%s in process %d exports no "
					   "ruby_version", r->module, (int)r->pid);
	if (trc_rubyproc_read(r, addr, r->version, sizeof(r->version) - 1) < 0)
		return miss(TRC_RUBYPROC_UNREADABLE, why, n, "cannot read ruby_version in process %d: %s",
			    (int)r->pid, strerror(errno));
	r->version[strcspn(r->version, "\n")] = '\0';
	if (r->elf.soname != UINT64_MAX)
		trc_elf_string(&r->elf, r->elf.soname, r->soname, sizeof(r->soname));
	/* Both come from the process and its files, and go into messages: printable ASCII only. */
	printable(r->version);
	printable(r->soname);
	if (r->elf.machine != EM_X86_64)
		return miss(TRC_RUBYPROC_UNSUPPORTED, why, n, "the Ruby %s in process %d is built for another "
			    "architecture than x86-64, the one whose machine code tracer reads", r->version,
			    (int)r->pid);
	return TRC_RUBYPROC_OK;
}

/* The postponed-job function's code, against the table. */
static enum trc_rubyproc_miss
check_code(struct trc_rubyproc *r, char *why, size_t n)
{
	const char *fn = "rb_postponed_job_trigger";
	uint64_t addr, size, vm_ptr, vm_size;
	char reason[384];

	if (symbol(r, fn, &addr, &size) < 0) {
		fn = "rb_postponed_job_register_one";
		if (symbol(r, fn, &addr, &size) < 0)
			return miss(TRC_RUBYPROC_UNSUPPORTED, why, n, "Ruby %s in process %d exports neither "
				    "rb_postponed_job_trigger nor rb_postponed_job_register_one", r->version,
				    (int)r->pid);
	}
	if (symbol(r, "dln_load", &r->load_fn, &size) < 0)
		return miss(TRC_RUBYPROC_UNSUPPORTED, why, n, "Ruby %s in process %d does not export "
			    "dln_load", r->version, (int)r->pid);
	if (trc_vmcode_read(&r->mem, addr, size, POSTPONED_JOB_INTERRUPT, &r->code, reason, sizeof(reason)) < 0)
		return miss(TRC_RUBYPROC_UNSUPPORTED, why, n, "Ruby %s in process %d: cannot read %s: %s",
			    r->version, (int)r->pid, fn, reason);
	if ((r->layout = trc_vmlayout_find(r->version, r->elf.machine, &r->code, reason, sizeof(reason))) == NULL)
		return miss(TRC_RUBYPROC_UNSUPPORTED, why, n, "%s", reason);
	if (r->layout->postponed_job_mask != POSTPONED_JOB_INTERRUPT)
		return miss(TRC_RUBYPROC_UNSUPPORTED, why, n, "Ruby %s's postponed-job interrupt is not %#x",
			    r->version, POSTPONED_JOB_INTERRUPT);
	/* Where it is exported (Debian 13's 3.3 does not), the symbol must be what the code uses. */
	if (symbol(r, "ruby_current_vm_ptr", &vm_ptr, &vm_size) == 0 && vm_ptr != r->code.vm_ptr)
		return miss(TRC_RUBYPROC_UNSUPPORTED, why, n, "Ruby %s in process %d: %s reads the VM "
			    "pointer at %#llx, ruby_current_vm_ptr is at %#llx", r->version, (int)r->pid, fn,
			    (unsigned long long)r->code.vm_ptr, (unsigned long long)vm_ptr);
	return TRC_RUBYPROC_OK;
}

/* Zero bytes past the end of libruby's data, in its last page: where the job's text can go. */
static void
find_spare_bytes(struct trc_rubyproc *r)
{
	struct spare_search s = { .at = r->elf.rw_end };

	r->spare = (r->elf.rw_end + 15) & ~(uint64_t)15;
	r->spare_end = r->spare;
	if (r->elf.rw_end == 0 || each_mapping(r->pid, find_spare, &s) != 1)
		return;
	/* Up to the page's end only: the mapping may go on into memory that malloc hands out. */
	r->spare_end = (r->elf.rw_end + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	if (r->spare_end > s.end)
		r->spare_end = s.end;
	if (r->spare > r->spare_end)
		r->spare = r->spare_end;
}

enum trc_rubyproc_miss
trc_rubyproc_find(struct trc_rubyproc *r, pid_t pid, char *why, size_t n)
{
	struct module_search s = { .r = r };
	enum trc_rubyproc_miss m;
	uint64_t size;
	char exe[64];
	struct stat st;

	memset(r, 0, sizeof(*r));
	r->pid = pid;
	r->mem.read = mem_read;
	r->mem.ctx = r;
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	s.exe_inode = stat(exe, &st) == 0 ? (unsigned long)st.st_ino : 0;
	if (each_mapping(pid, find_module, &s) < 0)
		return miss(TRC_RUBYPROC_UNREADABLE, why, n, "cannot read the maps of process %d: %s",
			    (int)pid, strerror(errno));
	if (s.base == 0)
		return miss(TRC_RUBYPROC_NOT_RUBY, why, n, "process %d is not a Ruby process (no libruby "
			    "in its maps)", (int)pid);
	r->is_static = !s.libruby;
	if ((m = open_module(r, s.base, why, n)) != TRC_RUBYPROC_OK || (m = check_code(r, why, n)) != TRC_RUBYPROC_OK)
		return m;
	if (trc_rubyproc_read(r, r->code.vm_ptr, &r->vm, sizeof(r->vm)) < 0)
		return miss(TRC_RUBYPROC_UNREADABLE, why, n, "cannot read the VM pointer of process %d: %s",
			    (int)pid, strerror(errno));
	if (r->vm == 0)
		return miss(TRC_RUBYPROC_STARTING, why, n, "Ruby %s is loaded in process %d but its VM "
			    "is not running", r->version, (int)pid);
	if (symbol(r, "rb_argv0", &r->argv0, &size) < 0)
		r->argv0 = 0;
	guard(r, "rb_postponed_job_register");
	guard(r, "rb_postponed_job_register_one");
	guard(r, "rb_postponed_job_preregister");
	guard(r, "rb_postponed_job_trigger");
	guard(r, "rb_postponed_job_flush");
	find_spare_bytes(r);
	return TRC_RUBYPROC_OK;
}
