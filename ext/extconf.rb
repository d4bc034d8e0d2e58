# frozen_string_literal: true

# extconf.rb: how RubyGems builds the agent when it installs the gem (tracer_agent.gemspec names
# this file), not what `make` runs. It configures ext/tracer_agent with that directory's own
# extconf.rb, and writes a Makefile here whose install moves the library into
# lib/tracer_agent/, where lib/tracer_agent.rb loads it from, and nowhere else: what a
# Makefile's install puts in RubyGems' directory is copied into both the gem's lib/ and its
# extensions directory, and the build directory kept a third copy.
require 'fileutils'
require 'rbconfig'

agent = File.join(__dir__, 'tracer_agent')
unless system(RbConfig.ruby, 'extconf.rb', *ARGV, chdir: agent)
  # RubyGems shows the mkmf.log it finds beside this file.
  FileUtils.cp(File.join(agent, 'mkmf.log'), File.join(__dir__, 'mkmf.log')) if File.exist?(File.join(agent, 'mkmf.log'))
  abort 'tracer_agent: ext/tracer_agent/extconf.rb failed'
end

File.write(File.join(__dir__, 'Makefile'), <<~MAKE)
  # Written by ext/extconf.rb, for RubyGems: make clean, make, make install.
  all:
  \t$(MAKE) -C tracer_agent
  install: all
  \tmkdir -p ../lib/tracer_agent
  \tmv -f tracer_agent/tracer_agent.so ../lib/tracer_agent/tracer_agent.so
  \t$(MAKE) -C tracer_agent clean
  clean:
  \t-$(MAKE) -C tracer_agent clean
  .PHONY: all install clean
MAKE
