# fake_agent.rb MODE: a Ruby process WITHOUT tracer_agent that plays the agent's side of the attach
# (SIGURG, hello from the SysV queue, connect) and then breaks the protocol, for
# test/integration/protocol_test.rb. It prints "ready PID", then "sent MODE" once it has.
#   truncated  a WELCOME, then the first bytes of an EVAL reply, then closes the connection
#   huge       a WELCOME, then an EVAL reply whose string claims 4 GiB, and stays connected
#   garbage    bytes that are no message at all, then closes the connection
#   fork_text  answers an eval (tracer --fork) with a "pid" that is a shell command
#   fork_pid1  answers it with pid 1, which is no child of this process
#   stream_defs  starts a trace, then sends new method definitions with 60 KB names, and calls of
#              them, for as long as the client reads; it never confirms a detach
#   stream_calls the same with 10 methods only, defined once: an endless stream of calls
#   refuse_4, refuse_6  answers an eval with TRC_MSG_ERROR code 4 (evals disabled) or 6 (internal:
#              the app's check raised, as it does while tracer_agent is still loading)
#   slow_start takes a TRACE, says "got trace", and puts its hooks in (SPEC, STARTED) only once
#              the client's DETACH came: a client stopped while attaching crosses them
require 'fiddle'
require 'socket'
$stdout.sync = true

# Just enough msgpack for these messages.
def mp(v)
  case v
  when Integer then v < 128 ? [v].pack('C') : "\xcf".b + [v].pack('Q>')
  when String then (v.bytesize < 32 ? [0xa0 | v.bytesize].pack('C') : "\xdb".b + [v.bytesize].pack('N')) + v.b
  when true then "\xc3".b
  when false then "\xc2".b
  when Array then [0x90 | v.size].pack('C') + v.map { |e| mp(e) }.join.b
  end
end

# Mapped as the agent's library is in a process that loaded it, which the client looks for in
# /proc/PID/maps before it attaches; dlopen runs none of its code (Init_tracer_agent is Ruby's
# to call, on require).
Fiddle.dlopen(File.expand_path('../../lib/tracer_agent/tracer_agent.so', __dir__))
libc = Fiddle.dlopen(nil)
msgget = Fiddle::Function.new(libc['msgget'], [Fiddle::TYPE_INT, Fiddle::TYPE_INT], Fiddle::TYPE_INT)
msgrcv = Fiddle::Function.new(libc['msgrcv'], [Fiddle::TYPE_INT, Fiddle::TYPE_VOIDP, Fiddle::TYPE_SIZE_T,
                                                Fiddle::TYPE_LONG, Fiddle::TYPE_INT], Fiddle::TYPE_SSIZE_T)
IPC_NOWAIT = 0o4000
MSG_NOERROR = 0o10000
HELLO_SIZE = 120 # struct trc_hello without its long mtype
key = 0x74000000 | (Process.pid & 0xffffff)

mode = ARGV.fetch(0)
rang = false
Signal.trap('URG') { rang = true }
puts "ready #{Process.pid}"

sock = nil
until sock
  sleep 0.01 until rang
  rang = false
  q = msgget.call(key, 0)
  next if q.negative?

  buf = Fiddle::Pointer.malloc(8 + HELLO_SIZE, Fiddle::RUBY_FREE)
  next if msgrcv.call(q, buf, HELLO_SIZE, 0, IPC_NOWAIT | MSG_NOERROR).negative?

  _mtype, magic, _version, _client_pid, path = buf.to_str(8 + HELLO_SIZE).unpack('q<L<L<l<Z108')
  # "@name": an abstract socket, a NUL then the name.
  sock = UNIXSocket.new(path.start_with?('@') ? "\0#{path[1..]}" : path) if magic == 0x54524331
end

mono = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
real = Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)
welcome = mp([64, Integer(File.read(File.expand_path("../../include/tracer_protocol.h", __dir__))[/#define TRC_PROTOCOL_VERSION (\d+)/, 1]), Process.pid, RUBY_VERSION, Dir.pwd, mono, real, false, 1])
case mode
when 'truncated'
  sock.write(welcome + mp([68, 1, true, 'x' * 100])[0, 20])
  sock.close
when 'huge'
  sock.write(welcome + [0x94, 68, 1, 0xc3, 0xdb, 0xff, 0xff, 0xff, 0xff].pack('C*') + 'only a few bytes')
when 'garbage'
  sock.write("\xc1\xff\x00garbage".b + Random.new(42).bytes(1000))
  sock.close
when 'fork_text', 'fork_pid1'
  # HELLO, then the EVAL (id 1) the WELCOME brings, then the DETACH its answer brings.
  sock.readpartial(4096)
  sock.write(welcome)
  sock.readpartial(4096)
  sock.write(mp([68, 1, true, mode == 'fork_text' ? '12; touch /tmp/tracer-pwned' : '1']))
  sock.readpartial(4096)
  sock.write(mp([69, 0, 0, 0]))
when 'stream_defs', 'stream_calls'
  # HELLO, then the TRACE the WELCOME brings: its spec matches, the hooks are on.
  sock.readpartial(4096)
  sock.write(welcome)
  sock.readpartial(4096)
  sock.write(mp([66, 0, 1, false, '', '']) + mp([67, 1, 1000]))
  name = 'm' * 60_000
  ts = mono
  begin
    (0..).each do |i|
      idx = mode == 'stream_defs' ? i : i % 10
      out = +''.b
      out << mp([128, idx, 'K', '#', "#{name}#{i}", 'x.rb', 1]) if mode == 'stream_defs' || i < 10
      out << mp([130, 0, idx, ts += 1000]) << mp([131, 0, idx, ts += 1000])
      sock.write(out)
    end
  rescue Errno::EPIPE, Errno::ECONNRESET
    nil # the client is gone: what a real agent would see too
  end
when 'refuse_4', 'refuse_6'
  sock.readpartial(4096)
  sock.write(welcome)
  sock.readpartial(4096)
  code = Integer(mode[/\d+/])
  sock.write(mp([65, code, code == 4 ? 'eval is disabled' : 'cannot tell whether evals are allowed: ' \
                                                            "NoMethodError: undefined method `eval_allowed?'"]))
when 'slow_start'
  sock.readpartial(4096)
  sock.write(welcome)
  sock.readpartial(4096)
  puts 'got trace'
  sock.readpartial(4096) # the DETACH
  sock.write(mp([66, 0, 1, false, '', '']) + mp([67, 1, 1000]) + mp([69, 0, 0, 0]))
else
  abort "fake_agent: unknown mode #{mode}"
end
puts "sent #{mode}"
sleep
