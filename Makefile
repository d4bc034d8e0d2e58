# Builds the agent (a Ruby C extension) and the client, and runs everything.
RUBY ?= ruby
PREFIX ?= /usr/local
EXT = ext/tracer_agent
AGENT = lib/tracer_agent/tracer_agent.so
LOADER = lib/tracer_agent/tracer_inject.so
AGENT_SRC = $(wildcard $(EXT)/*.c $(EXT)/*.h) $(EXT)/extconf.rb include/tracer_protocol.h

.PHONY: all deps test-deps agent client test test-unit test-integration test-rubies demo bench bench-ruby bench-floor \
	soak soak-inject install clean fuzz fuzz-ci lint check-memory

all: agent client

# script/deps holds the one list of Debian packages each purpose needs; it installs them as
# root and otherwise prints the apt-get line to run.
deps:
	@script/deps build

test-deps:
	@script/deps test

agent: $(AGENT) $(LOADER)

# What tracer -p loads first into a process without the agent (ext/tracer_inject/tracer_inject.c):
# no Ruby headers, every symbol bound at load.
$(LOADER): ext/tracer_inject/tracer_inject.c
	$(CC) -std=gnu11 -O2 -fPIC -shared -Wall -Wextra -Werror -Wl,-z,now -o $@.tmp $< && mv -f $@.tmp $@

$(AGENT): $(AGENT_SRC) | deps
	cd $(EXT) && TRACER_WERROR=1 $(RUBY) extconf.rb >/dev/null && $(MAKE) -s
	@# A new inode, then rename: processes that loaded the old file keep it intact.
	cp $(EXT)/tracer_agent.so $@.tmp && mv -f $@.tmp $@
	@# Which Ruby built it: tracer loads it into a static Ruby of that series only (client/inject/agentfile.c).
	$(RUBY) -e 'puts RUBY_VERSION' >lib/tracer_agent/built_for.tmp && mv -f lib/tracer_agent/built_for.tmp lib/tracer_agent/built_for

client: | deps
	$(MAKE) -s -C client

# Every stage runs whatever the one before it did, then a line per stage; fails if any did.
# Each stage's output is also kept in build/test/STAGE.log, from which test/failures.rb names,
# after those lines, each test that failed and the start of its message: the last lines of a
# CI log say what broke.
TEST_STAGES = test-unit test-integration fuzz-ci
TEST_LOGS = build/test
test: test-deps all
	@rc=0; summary=""; failed=""; mkdir -p $(TEST_LOGS); \
	for s in $(TEST_STAGES); do \
		start=$$(date +%s); log=$(TEST_LOGS)/$$s.log; \
		{ $(MAKE) -s $$s; echo $$? >$$log.rc; } 2>&1 | tee $$log; \
		if [ "$$(cat $$log.rc)" = 0 ]; then r=ok; else r=FAILED; rc=1; failed="$$failed $$s"; fi; \
		summary="$$summary$$(printf '  %-17s %-7s %5ss' $$s $$r $$(($$(date +%s) - start)))\n"; \
	done; \
	printf "\nmake test: %s\n$$summary" "$$([ $$rc = 0 ] && echo 'every stage passed' || echo FAILED)"; \
	for s in $$failed; do echo; $(RUBY) test/failures.rb $$s $(TEST_LOGS)/$$s.log; done; \
	[ $$rc = 0 ] || printf '\nWhole logs: $(TEST_LOGS)/STAGE.log\n'; \
	exit $$rc

# First: no two of our C files include each other, directly or through others (a .c and its
# .h count as one): script/include-graph prints the graph without --quiet.
test-unit: test-deps client
	@script/include-graph --quiet
	$(MAKE) -s -C client test

# TESTOPTS: minitest's own options (TESTOPTS="-n /HostileTest/" runs those tests only).
test-integration: test-deps all
	$(RUBY) -Ilib -Itest test/integration/all.rb $(TESTOPTS)

# The unit and integration tests on Ruby 3.1, 3.2, 3.3, 3.4, 3.4 with YJIT and 4.0 with YJIT,
# and on 4.0 without a JIT; those of the modes that wrap and attach on 4.0 with ZJIT and in a
# Ruby::Box (RUBIES="3.3 3.4" picks some), each in a Debian root built once and cached: see
# script/rubies.
test-rubies:
	@script/rubies $(RUBIES)

demo: all
	@RUBY=$(RUBY) script/demo

soak: all
	$(RUBY) test/soak/soak.rb $(SOAK_SECS)

# The agent loaded 1,000 times (INJECT_COUNT) into fresh bare processes that allocate, compact,
# lock, fork and require while it loads: each one's output must be an untraced run's.
soak-inject: all
	$(RUBY) test/soak/inject.rb $(or $(INJECT_COUNT),1000)

# The benchmark on Ruby 3.1, 3.3, 3.4, 3.4 with YJIT, 4.0 with YJIT and 4.0 with ZJIT (its table
# marked experimental) (RUBIES="3.1 3.4-yjit" picks some), each in its root (script/rubies --run
# builds there afresh): one table per Ruby, then the client's decode+format micro-benchmark,
# which no Ruby changes.
BENCH_RUBIES = 3.1 3.3 3.4 3.4-yjit 4.0-yjit 4.0-zjit
bench:
	@start=$$(date +%s); rc=0; \
	commit=$$(git rev-parse --short HEAD)$$(git status --porcelain -- ext lib include client test/bench | \
		grep -q . && echo ' (with uncommitted changes)'); \
	for r in $(or $(RUBIES),$(BENCH_RUBIES)); do \
		script/rubies --run $$r -- make -s bench-ruby TRACER_COMMIT="$$commit" BENCH_RAILS="$(BENCH_RAILS)" || rc=1; echo; \
	done; \
	$(MAKE) -s -C client bench | sed -n 's/^decode + format/client decode + format/p'; \
	echo "bench: $(or $(RUBIES),$(BENCH_RUBIES)) in $$(($$(date +%s) - start)) s, with any wait for script/rubies' lock"; \
	exit $$rc

# What the VM's NEWOBJ hook and the CPU's clock cost without tracer, on each Ruby: the floor
# under --top objects and under a traced call (test/bench/floor.rb).
bench-floor:
	@for r in $(or $(RUBIES),$(BENCH_RUBIES)); do \
		script/rubies --run $$r -- sh -c '"$$RUBY" test/bench/floor.rb' || exit 1; \
	done

# The benchmark on $(RUBY) alone, here. rbtrace and hyperfine come from Debian, whose
# ruby-rbtrace loads only in the release's default Ruby: elsewhere the table says so.
# Build output goes to stderr, leaving the table alone on stdout; then the profiler against a
# workload whose split is known (test/bench/profile_split.rb, about a minute). Then the real Rails app's
# rows (test/bench/rails.rb: Redmine, four workers under wrk, about 3 minutes more per Ruby
# once set up; then test/bench/rails_twin.rb: one worker's CPU per request attached and after
# detach against an untraced twin's, about 8 minutes; BENCH_RAILS=0 leaves both out).
bench-ruby:
	@$(MAKE) -s all >&2
	@[ "$$(readlink -f "$$(command -v ruby)")" != "$$(readlink -f "$$(command -v $(RUBY))")" ] || script/deps bench >&2
	@$(RUBY) -Ilib test/bench/bench.rb
	@$(RUBY) -Ilib test/bench/profile_split.rb
	@[ "$(BENCH_RAILS)" = 0 ] || $(RUBY) -Ilib test/bench/rails.rb
	@[ "$(BENCH_RAILS)" = 0 ] || $(RUBY) -Ilib test/bench/rails_twin.rb

# The client (client/Makefile's install), and the agent it preloads with -x and loads into a
# running process, built for $(RUBY), in PREFIX/lib/tracer: where PREFIX/bin/tracer looks for
# it (client/core/exec.c). install writes a new file in place of an old one: a process that loaded
# the old library keeps it. Then one line per part says where it went.
AGENT_DIR = $(PREFIX)/lib/tracer
install: all
	$(MAKE) -s -C client install PREFIX=$(PREFIX)
	install -d $(DESTDIR)$(AGENT_DIR)/tracer_agent
	install -m 0644 lib/tracer_agent.rb $(DESTDIR)$(AGENT_DIR)/
	install -m 0644 lib/tracer_agent/*.rb lib/tracer_agent/built_for $(DESTDIR)$(AGENT_DIR)/tracer_agent/
	install -m 0755 $(AGENT) $(LOADER) $(DESTDIR)$(AGENT_DIR)/tracer_agent/
	@echo "tracer: installed $(DESTDIR)$(PREFIX)/bin/tracer, its man page, bash completion and tracers under $(DESTDIR)$(PREFIX)/share"
	@echo "tracer: installed the agent for Ruby $$(cat lib/tracer_agent/built_for) ($$($(RUBY) -e 'print RbConfig.ruby')) in $(DESTDIR)$(AGENT_DIR)"

clean:
	-cd $(EXT) && [ -f Makefile ] && $(MAKE) -s clean
	rm -f $(EXT)/Makefile $(EXT)/extconf.h $(EXT)/mkmf.log $(AGENT) $(LOADER) lib/tracer_agent/built_for
	$(MAKE) -s -C client clean

# ---- Robustness: fuzzers, static analysis, the agent under AddressSanitizer ----

# Each libFuzzer target for 60 s (fuzz-ci: 20 s, run by `make test`), after replaying
# test/fuzz/regressions/; skipped with a message when clang has no libFuzzer.
fuzz:
	@test/fuzz/run 60

fuzz-ci:
	@test/fuzz/run 20

RUBY_HDRDIR = $(shell $(RUBY) -e 'print RbConfig::CONFIG["rubyhdrdir"]')
RUBY_ARCHHDRDIR = $(shell $(RUBY) -e 'print RbConfig::CONFIG["rubyarchhdrdir"]')
LINT_JOBS = $(shell nproc 2>/dev/null || echo 2)
LINT_AGENT = -Iinclude -I$(EXT) -I$(RUBY_ARCHHDRDIR) -I$(RUBY_HDRDIR)
LINT_CLIENT = -Iinclude $(patsubst %/,-I%,$(wildcard client/*/))
# readdirCalled: posix.cfg's advice to use readdir_r, which glibc deprecates (readdir is safe
# on a stream of one's own). Findings inside Ruby's headers are not ours: suppressed. The byte
# order macros are the compiler's (cppcheck defines none): the agent's encode.c checks them.
CPPCHECK = cppcheck --enable=warning,performance,portability --error-exitcode=1 --inline-suppr \
	--quiet --std=c11 --library=posix --suppress=readdirCalled -D__GNUC__=12 -D__x86_64__ -D__linux__ \
	-D__ORDER_LITTLE_ENDIAN__=1234 -D__ORDER_BIG_ENDIAN__=4321 -D__BYTE_ORDER__=1234
TIDY = clang-tidy --quiet
# cppcheck reads no system header: protoc-c's header, which checks protobuf-c.h's version with
# an #error, is told there is one recent enough.
LINT_PROTOBUF = -DPROTOBUF_C_VERSION_NUMBER=9999999

# No include cycle (script/include-graph), then clang-tidy (.clang-tidy) and cppcheck over the
# agent and the client; exits 1 on any finding.
# The agent needs extconf.h, hence `agent` first, and the client protoc-c's header (pprof.c);
# test/lint/cppcheck-ruby.h lets cppcheck parse Ruby's headers.
lint: agent
	@$(MAKE) -s -C client export/pprof/profile.pb-c.h
	@command -v clang-tidy >/dev/null && command -v cppcheck >/dev/null || \
		{ echo "lint: needs clang-tidy and cppcheck: apt-get install clang-tidy cppcheck" >&2; exit 1; }
	@mkdir -p build/lint; rc=0; \
	echo "lint: include cycles"; \
	script/include-graph --quiet || rc=1; \
	echo "lint: cppcheck agent"; \
	$(CPPCHECK) --include=test/lint/cppcheck-ruby.h --suppress='*:$(RUBY_HDRDIR)/*' \
		--suppress='*:$(RUBY_ARCHHDRDIR)/*' $(LINT_AGENT) $(EXT)/*.c || rc=1; \
	echo "lint: cppcheck client"; \
	$(CPPCHECK) $(LINT_CLIENT) $(LINT_PROTOBUF) client/*/*.c ext/tracer_inject/*.c || rc=1; \
	echo "lint: clang-tidy agent"; \
	ls $(EXT)/*.c | xargs -P$(LINT_JOBS) -I{} $(TIDY) {} -- -std=gnu11 $(LINT_AGENT) \
		>build/lint/tidy.log 2>&1 || rc=1; \
	grep -v '^[0-9]* warnings* generated\.$$' build/lint/tidy.log; \
	echo "lint: clang-tidy client, ext/tracer_inject"; \
	ls client/*/*.c ext/tracer_inject/*.c | xargs -P$(LINT_JOBS) -I{} $(TIDY) {} -- -std=gnu11 $(LINT_CLIENT) \
		>build/lint/tidy.log 2>&1 || rc=1; \
	grep -v '^[0-9]* warnings* generated\.$$' build/lint/tidy.log; \
	if [ $$rc = 0 ]; then echo "lint: no findings"; else echo "lint: FAILED"; fi; \
	exit $$rc

# The integration tests once, with targets loading an ASan build of the agent (build/asan);
# exits 1 on an ASan report in our code or a failed test.
check-memory: all
	@test/memory/run
