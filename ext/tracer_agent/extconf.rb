# extconf.rb: configures the tracer_agent extension with feature checks, never version numbers.
require 'mkmf'

# msgpack-c 6 renamed its pkg-config module and library (msgpack -> msgpack-c, -lmsgpackc ->
# -lmsgpack-c); ask pkg-config for whichever this system has, and fall back to the old name.
pkg_config('msgpack-c') || pkg_config('msgpack')
have_header('msgpack.h') or abort 'msgpack.h is missing: install msgpack-c (script/deps names the package)'
have_func('msgpack_unpacker_init', 'msgpack.h') || have_library('msgpackc', 'msgpack_unpacker_init', 'msgpack.h') ||
  abort('the msgpack-c library is missing: install msgpack-c (script/deps names the package)')
have_header('ruby/debug.h') or abort 'ruby/debug.h is missing'

# Ruby 3.3+ deprecates register_one in favour of preregister/trigger.
have_func('rb_postponed_job_preregister', 'ruby/debug.h') ||
  have_func('rb_postponed_job_register_one', 'ruby/debug.h') ||
  abort('no postponed job API in this Ruby')
have_func('rb_class_attached_object', 'ruby.h')
# Not in Ruby's public headers, but exported by every libruby, and what objspace walks the heap
# with: finding the app's modules without ObjectSpace.each_object's Ruby call per object.
have_func('rb_objspace_each_objects')
# ObjectSpace's own test of the VM's internal objects, exported for objspace.so: the walk above
# leaves out what ObjectSpace.each_object does (Ruby 4.0's RubyVM::FrozenCore is a plain class).
have_func('rb_objspace_internal_object_p')
# Exported for the coverage library, in no public header: a method entry's file, read without
# making an object (plan.c finds the app's methods by the heap's method entries with it).
have_func('rb_resolve_me_location')
have_func('rb_ext_ractor_safe', 'ruby.h')
# The VM's thread events, with the thread in each (Ruby 3.3+): --top threads.
have_func('rb_internal_thread_add_event_hook', 'ruby/thread.h') &&
  have_struct_member('rb_internal_thread_event_data_t', 'thread', 'ruby/thread.h')
# The profiler (sample.c): the thread events above say which thread holds the GVL (Ruby 3.2+,
# with the thread in each event's data or not), and another thread's stack can be read (3.3+);
# before, the kernel's view of each thread stands in.
have_func('rb_profile_thread_frames', 'ruby/debug.h')
have_header('ruby/ractor.h') && (have_func('rb_ractor_main_p', 'ruby/ractor.h') ||
                                 have_func('rb_ractor_local_storage_value_newkey', 'ruby/ractor.h'))

# Relative to where make runs (this directory): an absolute path breaks make and the compiler's
# command line in a checkout whose path has a space.
$INCFLAGS << ' -I$(srcdir)/../../include'
# Ruby's headers are Ruby's, not ours: as system headers, the warnings -Wextra finds in them are
# not reported (Ruby 3.2's rstring.h has a missing field initializer, which Ruby's own build
# silences with its warning flags, dropped below). Our calls into them still warn: a deprecated
# function is reported where we call it.
$INCFLAGS = $INCFLAGS.gsub(/-I(\$\((?:arch_)?hdrdir\)\S*)/, '-isystem \1')
$CFLAGS << ' -std=gnu11 -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter'
if ENV['TRACER_WERROR']
  # Our own warnings are errors, deprecations included. The warning flags this Ruby was built
  # with (a Ruby built from source brings -Wsuggest-attribute=format and more) are its own
  # choice, not ours: they are dropped here, so that -Werror means the same on every Ruby.
  $warnflags = ''
  $CFLAGS << ' -Werror'
end
create_header
create_makefile('tracer_agent/tracer_agent')
# mkmf makes every object depend on this directory's headers, not on the protocol's, which
# both sides share: without this line a change there left the agent built as before.
File.open('Makefile', 'a') { |f| f.puts "\n$(OBJS): $(srcdir)/../../include/tracer_protocol.h" }
