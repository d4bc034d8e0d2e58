# ptrace_holder.rb PID: ptraces PID (PTRACE_SEIZE: it goes on running) and holds it, as a debugger
# does, until killed; says "holding PID" once it does. Where strace or gdb may not be installed.
require 'fiddle'

PTRACE_SEIZE = 0x4206
pid = Integer(ARGV.fetch(0))
ptrace = Fiddle::Function.new(Fiddle::Handle::DEFAULT['ptrace'], [Fiddle::TYPE_LONG, Fiddle::TYPE_INT, Fiddle::TYPE_VOIDP, Fiddle::TYPE_VOIDP], Fiddle::TYPE_LONG)
abort "ptrace_holder: PTRACE_SEIZE #{pid} failed: #{Fiddle.last_error}" unless ptrace.call(PTRACE_SEIZE, pid, nil, nil).zero?
$stdout.puts "holding #{pid}"
$stdout.flush
sleep
