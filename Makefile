# Builds the agent (a Ruby C extension) and the client, and runs everything.
RUBY ?= ruby
PREFIX ?= /usr/local
EXT = ext/tracer_agent
AGENT = lib/tracer_agent/tracer_agent.so
AGENT_SRC = $(wildcard $(EXT)/*.c $(EXT)/*.h) $(EXT)/extconf.rb include/tracer_protocol.h

.PHONY: all deps agent client test test-unit test-integration demo bench install clean

all: agent client

deps:
	@script/deps

agent: $(AGENT)

$(AGENT): $(AGENT_SRC) | deps
	cd $(EXT) && TRACER_WERROR=1 $(RUBY) extconf.rb >/dev/null && $(MAKE) -s
	cp $(EXT)/tracer_agent.so $@

client: | deps
	$(MAKE) -s -C client

test: all test-unit test-integration

test-unit: client
	$(MAKE) -s -C client test

test-integration: all
	$(RUBY) -Ilib -Itest test/integration/all.rb

demo: all
	@script/demo

bench: all
	$(RUBY) -Ilib test/bench/bench.rb

install: client
	$(MAKE) -s -C client install PREFIX=$(PREFIX)

clean:
	-cd $(EXT) && [ -f Makefile ] && $(MAKE) -s clean
	rm -f $(EXT)/Makefile $(EXT)/extconf.h $(EXT)/mkmf.log $(AGENT)
	$(MAKE) -s -C client clean
