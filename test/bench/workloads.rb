# frozen_string_literal: false
#
# workloads.rb NAME [CHUNK]: one benchmark target. It prints "ready PID CHUNK" once warmed up,
# then loops forever and prints "rate SEQ PER_SECOND" on stdout after each round of about
# ROUND_SECONDS (PER_SECOND: iterations per second of wall-clock time, or wakeups per second for
# idle). The clock is read every CHUNK iterations (calibrated to CHUNK_SECONDS unless given).
# When YJIT is on, it prints "yjit KEY=VALUE..." (YJIT's own counters) on stderr just before
# "ready", and again on SIGUSR2. Load the agent (-rtracer_agent), rbtrace (-rrbtrace) or
# nothing: the workload is the same.
# test/bench/bench.rb starts these; it is not meant to be run by hand (but can be).
#
# Each workload's loop lives in ONE frame that never returns, the way a long-running loop does
# in an app: YJIT recompiles code that a tracer invalidated only when a frame is entered again,
# so the long loops show what stays after detach, and `server` (its calls made inside a method
# that returns every REQUEST_CALLS calls, like a request) shows what comes back. An interrupt
# of the main thread (a signal's trap, seen here; with the agent loaded, the first GC) makes
# YJIT's code leave for the interpreter, and such a loop never comes back: SIGUSR2 is for
# after the measurements.
$stdout.sync = true

ROUND_SECONDS = Float(ENV['BENCH_ROUND_SECONDS'] || 0.08)
# The clock is read between chunks of fixed work: small chunks keep a round short even when a
# tracer slows the loop down a hundredfold.
CHUNK_SECONDS = Float(ENV['BENCH_CHUNK_SECONDS'] || 0.0001)
REQUEST_CALLS = 1000
# Calls of each loop method that return before the one that does not: enough for YJIT (which
# compiles a method at about its 30th call) to enter the last one compiled.
WARM_CALLS = 100

# Never called: the target of the "-m never-called method" rows.
def never_called(i) = i

# calls and server: Object#f and Object#g are the hot Ruby methods.
def f(i) = g(i) + 1
def g(i) = i * 2

# server: one request, REQUEST_CALLS calls of f, then the frame returns.
def handle_request(first)
  i = first
  last = first + REQUEST_CALLS
  while i < last
    f(i)
    i += 1
  end
end

# alloc: a small class instance, a string and a hash per iteration.
class Widget
  def initialize(id)
    @id = id
  end
end

module Workloads
  module_function

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  def cpu_now = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)

  def report(seq, per_second) = puts("rate #{seq} #{per_second.round(1)}")

  # name => [the loop's setup (local variables from the state), one iteration, its size]
  BODIES = {
    # The rbtrace article's loop: Hash#key? with a random key of a 500 000-key hash.
    'keyloop' => ['h, keys = state', 'h.key?(keys.sample)', 1],
    'alloc' => ['', 'w = Widget.new(i); s = "item #{i}"; { id: i, widget: w, name: s }', 1],
    'calls' => ['', 'f(i)', 1],
    'server' => ['', 'handle_request(i)', REQUEST_CALLS],
    # A mostly idle app: half of its wakeups are 5 ms sleeps, half are blocking reads of a pipe
    # that another thread writes to every 10 ms (about 200 wakeups/s, which a tracer should
    # not change).
    'idle' => ['r = state', 'i.even? ? sleep(0.005) : r.readpartial(64)', 1]
  }.freeze

  # Workloads.NAME_loop(state, chunk, limit): the loop, written out per workload (a block or a
  # lambda per iteration would return a frame on every call). With limit it returns after about
  # limit iterations (calibration, warm-up) and says how many it did; without, it never returns.
  # The warm-up runs only the top of the loop, so what follows must name no constant: the first
  # lookup of one fills its cache, which invalidates YJIT's code for the loop, and a frame that
  # never returns would then stay in the interpreter for good.
  BODIES.each do |name, (setup, body, step)|
    module_eval(<<~RUBY, __FILE__, __LINE__ + 1)
      def self.#{name}_loop(state, chunk, limit = nil)
        #{setup}
        round = ROUND_SECONDS
        i = 0
        n = 0
        seq = 0
        t0 = now
        while limit.nil? || i < limit
          stop = i + chunk
          while i < stop
            #{body}
            i += #{step}
          end
          next if limit

          n += chunk
          t = now
          next if t - t0 < round

          seq += 1
          report(seq, n / (t - t0))
          n = 0
          t0 = t
        end
        i
      end
    RUBY
  end

  def state(name)
    case name
    when 'keyloop'
      h = {}
      500_000.times { |i| h["key#{i}"] = i }
      [h, h.keys]
    when 'idle'
      r, w = IO.pipe
      Thread.new do
        loop do
          sleep 0.01
          w.write('x')
        end
      end
      r
    end
  end

  # Iterations of one chunk: about CHUNK_SECONDS of work when nothing traces the process. CPU
  # time, not wall-clock: the bench starts targets at nice 19, beside other work.
  def calibrate(loop_name, state, step)
    n = 100 * step
    loop do
      t = cpu_now
      done = public_send(loop_name, state, n, n)
      dt = cpu_now - t
      if dt >= 0.02
        c = [(done * CHUNK_SECONDS / dt).ceil, step].max
        return (c + step - 1) / step * step # whole requests for server
      end

      n *= 4
    end
  end

  def yjit_stats
    s = RubyVM::YJIT.runtime_stats
    code = s[:code_region_size] || (s[:inline_code_size].to_i + s[:outlined_code_size].to_i)
    everything = s.key?(:invalidate_everything) ? " everything=#{s[:invalidate_everything]}" : ''
    # stderr: a trap can run in the middle of a "rate" line on stdout.
    $stderr.puts "yjit invalidations=#{s[:invalidation_count].inspect}#{everything} code=#{code}"
  end
end

name = ARGV.fetch(0)
abort "unknown workload #{name}" unless Workloads::BODIES.key?(name)
_, _, step = Workloads::BODIES[name]
loop_name = "#{name}_loop"
state = Workloads.state(name)
chunk = if ARGV[1] then Integer(ARGV[1])
        elsif name == 'idle' then 1
        else Workloads.calibrate(loop_name, state, step)
        end
WARM_CALLS.times { Workloads.public_send(loop_name, state, step, step) }
if defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?
  Workloads.yjit_stats
  trap('USR2') { Workloads.yjit_stats }
end
# bench.rb's stackprof rows: TTIN starts it (BENCH_STACKPROF=MODE:INTERVAL_US), TTOU stops it.
if (sp = ENV['BENCH_STACKPROF'])
  mode, interval = sp.split(':')
  trap('TTIN') { StackProf.start(mode: mode.to_sym, interval: Integer(interval)) }
  trap('TTOU') { StackProf.stop }
end
puts "ready #{Process.pid} #{chunk}"
Workloads.public_send(loop_name, state, chunk)
