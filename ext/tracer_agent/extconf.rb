# extconf.rb: configures the tracer_agent extension with feature checks, never version numbers.
require 'mkmf'

abort 'msgpack-c is missing: apt-get install libmsgpack-dev' unless have_header('msgpack.h') && have_library('msgpackc', 'msgpack_unpacker_init')
have_header('ruby/debug.h') or abort 'ruby/debug.h is missing'

# Ruby 3.3+ deprecates register_one in favour of preregister/trigger.
have_func('rb_postponed_job_preregister', 'ruby/debug.h') ||
  have_func('rb_postponed_job_register_one', 'ruby/debug.h') ||
  abort('no postponed job API in this Ruby')
have_func('rb_class_attached_object', 'ruby.h')
have_func('rb_ext_ractor_safe', 'ruby.h')

$INCFLAGS << " -I#{File.expand_path('../../include', __dir__)}"
$CFLAGS << ' -std=gnu11 -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter'
$CFLAGS << ' -Werror' if ENV['TRACER_WERROR']
create_header
create_makefile('tracer_agent/tracer_agent')
