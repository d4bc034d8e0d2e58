# frozen_string_literal: true

# extconf.rb: how RubyGems builds the agent when it installs the gem (tracer_agent.gemspec names
# this file), not what `make` runs. It configures ext/tracer_agent with that directory's own
# extconf.rb, and writes a Makefile here whose install moves the library into
# lib/tracer_agent/, where lib/tracer_agent.rb loads it from, and nowhere else: what a
# Makefile's install puts in RubyGems' directory is copied into both the gem's lib/ and its
# extensions directory, and the build directory kept a third copy. tracer_inject.so goes there
# too.
require 'fileutils'
require 'rbconfig'

agent = File.join(__dir__, 'tracer_agent')
unless system(RbConfig.ruby, 'extconf.rb', *ARGV, chdir: agent)
  # RubyGems shows the mkmf.log it finds beside this file.
  FileUtils.cp(File.join(agent, 'mkmf.log'), File.join(__dir__, 'mkmf.log')) if File.exist?(File.join(agent, 'mkmf.log'))
  abort 'tracer_agent: ext/tracer_agent/extconf.rb failed'
end

# tracer_inject.so, which `tracer -p` has a process that never loaded the agent load first,
# beside it: plain C without Ruby's headers (the top Makefile builds it alike), with the
# compiler this Ruby was built with. built_for names the Ruby that built the agent: tracer
# loads it into a static Ruby of that series only (client/inject/agentfile.c).
cc = RbConfig::CONFIG['CC']
File.write(File.join(__dir__, 'Makefile'), <<~MAKE)
  # Written by ext/extconf.rb, for RubyGems: make clean, make, make install.
  all:
  \t$(MAKE) -C tracer_agent
  \t#{cc} -std=gnu11 -O2 -fPIC -shared -Wall -Wextra -Wl,-z,now -o tracer_inject.so tracer_inject/tracer_inject.c
  install: all
  \tmkdir -p ../lib/tracer_agent
  \tmv -f tracer_agent/tracer_agent.so ../lib/tracer_agent/tracer_agent.so
  \tmv -f tracer_inject.so ../lib/tracer_agent/tracer_inject.so
  \techo '#{RUBY_VERSION}' >../lib/tracer_agent/built_for
  \t$(MAKE) -C tracer_agent clean
  clean:
  \t-$(MAKE) -C tracer_agent clean
  \trm -f tracer_inject.so
  .PHONY: all install clean
MAKE
