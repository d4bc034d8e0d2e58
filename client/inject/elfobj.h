/* elfobj.h: an ELF object as a process has it loaded, or as a file: symbols, names, segments. */
#ifndef TRC_ELFOBJ_H
#define TRC_ELFOBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where an object's bytes are read from: another process's memory, or a file (trc_elf_file). */
struct trc_mem {
	/* Reads len bytes at addr into buf. Returns 0, or -1 with errno. */
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
};

#define TRC_ELF_MAX_NEEDED 32

/* Caller-allocated; filled by trc_elf_open. Addresses are as loaded (the bias added). */
struct trc_elf {
	const struct trc_mem *mem;
	uint64_t bias;          /* load address minus the file's addresses */
	uint16_t type;          /* ET_DYN, ET_EXEC */
	uint16_t machine;       /* EM_X86_64... */
	uint64_t symtab, strtab, strsz, gnu_hash, hash;
	uint64_t soname;        /* offset in strtab, or UINT64_MAX */
	uint64_t needed[TRC_ELF_MAX_NEEDED];    /* DT_NEEDED offsets in strtab */
	size_t nneeded;
	uint64_t rw_end;        /* where the memory of the last writable segment ends */
	uint64_t span;          /* the highest address a segment reaches, before the bias */
};

/*
 * Reads the 64-bit ELF object whose header is at header (a process's lowest mapping of its
 * file; 0 for a file) through mem, which must outlive e. Returns 0, or -1 with errno (ENOEXEC:
 * not a 64-bit little-endian ELF object with a dynamic section). Pure but for mem.
 */
int trc_elf_open(struct trc_elf *e, const struct trc_mem *mem, uint64_t header);

/*
 * The defined dynamic symbol name: its address and size. Returns 0, or -1 with errno (ENOENT:
 * no such symbol; EIO: the object cannot be read).
 */
int trc_elf_symbol(const struct trc_elf *e, const char *name, uint64_t *addr, uint64_t *size);

/* The string at strtab offset off into buf (size bytes, NUL-terminated). Returns 0, or -1. */
int trc_elf_string(const struct trc_elf *e, uint64_t off, char *buf, size_t size);

/* An object file read whole into memory, its addresses mapped to file offsets. */
struct trc_elf_file {
	struct trc_mem mem;
	unsigned char *data;
	size_t size;
};

/* Reads path. Returns 0, or -1 with errno (ENOEXEC: no ELF object). Release with trc_elf_file_release. */
int trc_elf_file_open(struct trc_elf_file *f, const char *path);
/* Where the file's header is in its own addresses: the header argument of trc_elf_open. */
uint64_t trc_elf_file_header(const struct trc_elf_file *f);
void trc_elf_file_release(struct trc_elf_file *f);

#endif
