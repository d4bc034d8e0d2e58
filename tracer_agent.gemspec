# frozen_string_literal: true

require_relative 'lib/tracer_agent/version'

Gem::Specification.new do |s|
  s.name = 'tracer_agent'
  s.version = TracerAgent::VERSION
  s.summary = 'In-process agent for the tracer client: trace a live Ruby process by pid'
  s.description = 'Loaded with require "tracer_agent", it costs nothing until the tracer ' \
                  'client attaches; then it streams method calls, exceptions and live counts.'
  s.authors = ['The tracer authors']
  s.license = 'MIT'
  s.required_ruby_version = '>= 3.1'
  # No homepage: the project has no public address to give yet (gem build warns until it has).
  # The sources, less what a build here made (extconf.h).
  s.files = Dir['lib/**/*.rb', 'ext/extconf.rb', 'ext/tracer_agent/*.{c,h,rb}', 'ext/tracer_inject/*.c', 'include/tracer_protocol.h', 'LICENSE',
                'README.md', 'docs/*.md'] - ['ext/tracer_agent/extconf.h']
  # ext/extconf.rb builds the agent and leaves one copy of the library, in lib/tracer_agent/
  # where lib/tracer_agent.rb loads it from (RubyGems leaves ext/tracer_agent/extconf.rb's in
  # three places), and tracer_inject.so beside it, which tracer -p loads first into a process
  # that never required the agent.
  s.extensions = ['ext/extconf.rb']
  s.require_paths = ['lib']
end
