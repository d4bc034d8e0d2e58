# libs.mk: compiler and linker flags of the client's libraries, found through pkg-config.
# msgpack-c 6 renamed its library and pkg-config module (msgpack -> msgpack-c, -lmsgpackc ->
# -lmsgpack-c); libev ships no .pc file on Debian, hence the plain -lev fallback.
MSGPACK_PC := $(shell pkg-config --exists msgpack-c 2>/dev/null && echo msgpack-c || echo msgpack)
MSGPACK_CFLAGS := $(shell pkg-config --cflags $(MSGPACK_PC) 2>/dev/null)
MSGPACK_LIBS := $(or $(shell pkg-config --libs $(MSGPACK_PC) 2>/dev/null),-lmsgpackc)
LIBEV_CFLAGS := $(shell pkg-config --cflags libev 2>/dev/null)
LIBEV_LIBS := $(or $(shell pkg-config --libs libev 2>/dev/null),-lev)
# zlib and libzstd: -o FILE.gz and FILE.zst (compress.c).
COMPRESS_CFLAGS := $(shell pkg-config --cflags zlib libzstd 2>/dev/null)
COMPRESS_LIBS := $(or $(shell pkg-config --libs zlib libzstd 2>/dev/null),-lz -lzstd)
# libedit: -i's line editing and history (repl.c), through its readline interface. Debian's
# libedit.pc puts editline/ on the include path; repl.c includes <editline/readline.h>, found
# through /usr/include as well.
LIBEDIT_CFLAGS := $(shell pkg-config --cflags libedit 2>/dev/null)
LIBEDIT_LIBS := $(or $(shell pkg-config --libs libedit 2>/dev/null),-ledit)
# protobuf-c: --format pprof's profile.proto (pprof.c); protoc-c makes its code at build time.
PROTOBUF_CFLAGS := $(shell pkg-config --cflags libprotobuf-c 2>/dev/null)
PROTOBUF_LIBS := $(or $(shell pkg-config --libs libprotobuf-c 2>/dev/null),-lprotobuf-c)
PROTOC_C ?= protoc-c
