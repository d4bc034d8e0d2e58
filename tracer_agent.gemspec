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
  s.files = Dir['lib/**/*.rb', 'ext/tracer_agent/*.{c,h,rb}', 'include/tracer_protocol.h', 'LICENSE', 'README.md']
  s.extensions = ['ext/tracer_agent/extconf.rb']
  s.require_paths = ['lib']
end
