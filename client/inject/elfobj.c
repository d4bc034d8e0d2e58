/* elfobj.c: dynamic symbols (GNU or SysV hash), DT_NEEDED, DT_SONAME and segment ends of an ELF object. */
#include "elfobj.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xmalloc.h"

#define MAX_PHDRS 64
#define MAX_DYN 512
#define MAX_CHAIN 4096          /* symbols looked at per lookup: a corrupt chain ends here */

static int
rd(const struct trc_elf *e, uint64_t addr, void *buf, size_t len)
{
	return e->mem->read(e->mem->ctx, addr, buf, len);
}

/*
 * A dynamic-section pointer. glibc rewrites them to load addresses in memory on most
 * architectures, a file has them unbiased: a value inside the loaded image is taken as is.
 */
static uint64_t
dyn_ptr(const struct trc_elf *e, uint64_t v)
{
	if (e->bias != 0 && v >= e->bias && v - e->bias < e->span)
		return v;
	return v + e->bias;
}

static void
note_dyn(struct trc_elf *e, const Elf64_Dyn *d)
{
	switch (d->d_tag) {
	case DT_SYMTAB: e->symtab = d->d_un.d_ptr; break;
	case DT_STRTAB: e->strtab = d->d_un.d_ptr; break;
	case DT_STRSZ: e->strsz = d->d_un.d_val; break;
	case DT_GNU_HASH: e->gnu_hash = d->d_un.d_ptr; break;
	case DT_HASH: e->hash = d->d_un.d_ptr; break;
	case DT_SONAME: e->soname = d->d_un.d_val; break;
	case DT_NEEDED:
		if (e->nneeded < TRC_ELF_MAX_NEEDED)
			e->needed[e->nneeded++] = d->d_un.d_val;
		break;
	default: break;
	}
}

static int
read_dynamic(struct trc_elf *e, uint64_t addr, uint64_t size)
{
	Elf64_Dyn d;
	size_t n = size / sizeof(d);

	for (size_t i = 0; i < n && i < MAX_DYN; i++) {
		if (rd(e, addr + i * sizeof(d), &d, sizeof(d)) < 0)
			return -1;
		if (d.d_tag == DT_NULL)
			break;
		note_dyn(e, &d);
	}
	if (e->symtab == 0 || e->strtab == 0 || (e->gnu_hash == 0 && e->hash == 0)) {
		errno = ENOEXEC;
		return -1;
	}
	e->symtab = dyn_ptr(e, e->symtab);
	e->strtab = dyn_ptr(e, e->strtab);
	e->gnu_hash = e->gnu_hash ? dyn_ptr(e, e->gnu_hash) : 0;
	e->hash = e->hash ? dyn_ptr(e, e->hash) : 0;
	return 0;
}

static int
read_header(struct trc_elf *e, uint64_t header, Elf64_Ehdr *h)
{
	if (rd(e, header, h, sizeof(*h)) < 0)
		return -1;
	if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0 || h->e_ident[EI_CLASS] != ELFCLASS64 ||
	    h->e_ident[EI_DATA] != ELFDATA2LSB || h->e_phentsize != sizeof(Elf64_Phdr) ||
	    h->e_phnum == 0 || h->e_phnum > MAX_PHDRS) {
		errno = ENOEXEC;
		return -1;
	}
	e->type = h->e_type;
	e->machine = h->e_machine;
	return 0;
}

int
trc_elf_open(struct trc_elf *e, const struct trc_mem *mem, uint64_t header)
{
	Elf64_Ehdr h;
	Elf64_Phdr ph[MAX_PHDRS];
	const Elf64_Phdr *dyn = NULL;
	bool first = true;

	memset(e, 0, sizeof(*e));
	e->mem = mem;
	e->soname = UINT64_MAX;
	if (read_header(e, header, &h) < 0 || rd(e, header + h.e_phoff, ph, h.e_phnum * sizeof(ph[0])) < 0)
		return -1;
	for (int i = 0; i < h.e_phnum; i++) {
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = &ph[i];
		if (ph[i].p_type != PT_LOAD)
			continue;
		/* The header is the start of the first segment, which maps the file from offset 0. */
		if (first)
			e->bias = header - (ph[i].p_vaddr - ph[i].p_offset);
		first = false;
		if (ph[i].p_vaddr + ph[i].p_memsz > e->span)
			e->span = ph[i].p_vaddr + ph[i].p_memsz;
		if (ph[i].p_flags & PF_W)
			e->rw_end = ph[i].p_vaddr + ph[i].p_memsz;
	}
	if (dyn == NULL || first) {
		errno = ENOEXEC;
		return -1;
	}
	e->rw_end += e->bias;
	return read_dynamic(e, dyn->p_vaddr + e->bias, dyn->p_memsz);
}

int
trc_elf_string(const struct trc_elf *e, uint64_t off, char *buf, size_t size)
{
	size_t n = size - 1;

	if (off >= e->strsz) {
		errno = ENOENT;
		return -1;
	}
	if (n > e->strsz - off)
		n = (size_t)(e->strsz - off);
	if (rd(e, e->strtab + off, buf, n) < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

static uint32_t
gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

static uint32_t
sysv_hash(const char *s)
{
	uint32_t h = 0, g;

	for (; *s; s++) {
		h = (h << 4) + (unsigned char)*s;
		g = h & 0xf0000000u;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

/* Whether symbol i is name, defined; *sym gets it. */
static int
symbol_is(const struct trc_elf *e, uint32_t i, const char *name, Elf64_Sym *sym)
{
	char buf[256];
	size_t len = strlen(name);

	if (len + 1 > sizeof(buf) || rd(e, e->symtab + (uint64_t)i * sizeof(*sym), sym, sizeof(*sym)) < 0)
		return -1;
	if (sym->st_shndx == SHN_UNDEF || sym->st_name >= e->strsz)
		return 0;
	if (trc_elf_string(e, sym->st_name, buf, len + 2) < 0)
		return -1;
	return strcmp(buf, name) == 0;
}

static int
lookup_gnu(const struct trc_elf *e, const char *name, Elf64_Sym *sym)
{
	uint32_t hdr[4], h = gnu_hash(name), i, h2, n = 0;
	uint64_t buckets, chain;
	int is;

	if (rd(e, e->gnu_hash, hdr, sizeof(hdr)) < 0 || hdr[0] == 0)
		return -1;
	buckets = e->gnu_hash + sizeof(hdr) + (uint64_t)hdr[2] * 8;
	chain = buckets + (uint64_t)hdr[0] * 4;
	if (rd(e, buckets + (uint64_t)(h % hdr[0]) * 4, &i, 4) < 0)
		return -1;
	if (i == 0 || i < hdr[1])
		return 0;
	do {
		if (rd(e, chain + (uint64_t)(i - hdr[1]) * 4, &h2, 4) < 0)
			return -1;
		if ((h | 1) == (h2 | 1) && (is = symbol_is(e, i, name, sym)) != 0)
			return is;
		i++;
	} while (!(h2 & 1) && ++n < MAX_CHAIN);
	return 0;
}

static int
lookup_sysv(const struct trc_elf *e, const char *name, Elf64_Sym *sym)
{
	uint32_t hdr[2], i, n = 0;
	int is;

	if (rd(e, e->hash, hdr, sizeof(hdr)) < 0 || hdr[0] == 0)
		return -1;
	if (rd(e, e->hash + 8 + (uint64_t)(sysv_hash(name) % hdr[0]) * 4, &i, 4) < 0)
		return -1;
	while (i != STN_UNDEF && i < hdr[1] && n++ < MAX_CHAIN) {
		if ((is = symbol_is(e, i, name, sym)) != 0)
			return is;
		if (rd(e, e->hash + 8 + (uint64_t)hdr[0] * 4 + (uint64_t)i * 4, &i, 4) < 0)
			return -1;
	}
	return 0;
}

int
trc_elf_symbol(const struct trc_elf *e, const char *name, uint64_t *addr, uint64_t *size)
{
	Elf64_Sym sym;
	int found = e->gnu_hash ? lookup_gnu(e, name, &sym) : lookup_sysv(e, name, &sym);

	if (found <= 0) {
		errno = found < 0 ? EIO : ENOENT;
		return -1;
	}
	*addr = sym.st_value + e->bias;
	*size = sym.st_size;
	return 0;
}

/* ---- a file, read whole ---- */

/* The file offset of address addr, through the file's PT_LOAD segments. */
static int
file_offset(const struct trc_elf_file *f, uint64_t addr, size_t len, size_t *off)
{
	const Elf64_Ehdr *h = (const Elf64_Ehdr *)f->data;
	const Elf64_Phdr *ph;

	if (f->size < sizeof(*h) || h->e_phoff > f->size ||
	    (size_t)h->e_phnum * sizeof(*ph) > f->size - h->e_phoff)
		return -1;
	ph = (const Elf64_Phdr *)(f->data + h->e_phoff);
	for (int i = 0; i < h->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || addr < ph[i].p_vaddr ||
		    addr + len > ph[i].p_vaddr + ph[i].p_filesz)
			continue;
		*off = (size_t)(ph[i].p_offset + (addr - ph[i].p_vaddr));
		return *off + len <= f->size ? 0 : -1;
	}
	return -1;
}

static int
file_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct trc_elf_file *f = ctx;
	size_t off;

	if (file_offset(f, addr, len, &off) < 0) {
		errno = EFAULT;
		return -1;
	}
	memcpy(buf, f->data + off, len);
	return 0;
}

uint64_t
trc_elf_file_header(const struct trc_elf_file *f)
{
	const Elf64_Ehdr *h = (const Elf64_Ehdr *)f->data;
	const Elf64_Phdr *ph;

	if (f->size < sizeof(*h) || h->e_phoff > f->size ||
	    (size_t)h->e_phnum * sizeof(*ph) > f->size - h->e_phoff)
		return 0;
	ph = (const Elf64_Phdr *)(f->data + h->e_phoff);
	for (int i = 0; i < h->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0)
			return ph[i].p_vaddr;
	return 0;
}

int
trc_elf_file_open(struct trc_elf_file *f, const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), saved;
	ssize_t n = 0, got;

	memset(f, 0, sizeof(*f));
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > (off_t)1 << 30) {
		saved = errno ? errno : EFBIG;
		close(fd);
		errno = saved;
		return -1;
	}
	f->data = xmalloc((size_t)st.st_size);
	while (n < st.st_size && (got = read(fd, f->data + n, (size_t)(st.st_size - n))) > 0)
		n += got;
	close(fd);
	f->size = (size_t)n;
	f->mem.read = file_read;
	f->mem.ctx = f;
	if (f->size < sizeof(Elf64_Ehdr) || memcmp(f->data, ELFMAG, SELFMAG) != 0) {
		trc_elf_file_release(f);
		errno = ENOEXEC;
		return -1;
	}
	return 0;
}

void
trc_elf_file_release(struct trc_elf_file *f)
{
	free(f->data);
	f->data = NULL;
	f->size = 0;
}
