# frozen_string_literal: false
#
# workloads.rb NAME [CHUNK]: one benchmark target. It loops forever in rounds and prints, after
# each round, "rate SEQ PER_SECOND" on stdout (PER_SECOND: iterations per second of wall-clock
# time, or wakeups per second for idle). A round runs chunks of CHUNK iterations (calibrated to
# CHUNK_SECONDS unless given) until ROUND_SECONDS have passed. Before the first round it prints
# "ready PID CHUNK". Load the agent (-rtracer_agent), rbtrace (-rrbtrace) or nothing: the workload is the
# same. test/bench/bench.rb starts these; it is not meant to be run by hand (but can be).
$stdout.sync = true

ROUND_SECONDS = Float(ENV['BENCH_ROUND_SECONDS'] || 0.2)
# A round is as many chunks of fixed work as fit in ROUND_SECONDS: small chunks keep a round
# short even when a tracer slows the loop down a hundredfold.
CHUNK_SECONDS = Float(ENV['BENCH_CHUNK_SECONDS'] || 0.0001)

# Never called: the target of the "-m never-called method" rows.
def never_called(i) = i

# calls: a Ruby-method-heavy loop (Object#f and Object#g are the hot Ruby methods).
def f(i) = g(i) + 1
def g(i) = i * 2

# alloc: a small class instance, a string and a hash per iteration.
class Widget
  def initialize(id)
    @id = id
  end
end

module Workloads
  module_function

  def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # The rbtrace article's loop: Hash#key? with a random key of a 500 000-key hash.
  def keyloop
    h = {}
    500_000.times { |i| h["key#{i}"] = i }
    keys = h.keys
    lambda do |n|
      i = 0
      while i < n
        h.key?(keys.sample)
        i += 1
      end
    end
  end

  def alloc
    lambda do |n|
      i = 0
      while i < n
        w = Widget.new(i)
        s = "item #{i}"
        { id: i, widget: w, name: s }
        i += 1
      end
    end
  end

  def calls
    lambda do |n|
      i = 0
      while i < n
        f(i)
        i += 1
      end
    end
  end

  # A mostly idle app: half of its wakeups are 5 ms sleeps, half are blocking reads of a pipe
  # that another thread writes to every 10 ms. One iteration is one wakeup; a tracer should
  # not change their rate (about 200/s).
  def idle
    r, w = IO.pipe
    Thread.new do
      loop do
        sleep 0.01
        w.write('x')
      end
    end
    lambda do |n|
      i = 0
      while i < n
        if i.even?
          sleep 0.005
        else
          r.readpartial(64)
        end
        i += 1
      end
    end
  end

  # Iterations of one chunk: about CHUNK_SECONDS of work when nothing traces the process.
  def calibrate(work)
    n = 100
    loop do
      t = now
      work.call(n)
      dt = now - t
      return [(n * CHUNK_SECONDS / dt).ceil, 1].max if dt >= 0.02

      n *= 4
    end
  end
end

name = ARGV.fetch(0)
abort "unknown workload #{name}" unless %w[keyloop alloc calls idle].include?(name)
work = Workloads.public_send(name)
chunk = if ARGV[1] then Integer(ARGV[1])
        elsif name == 'idle' then 1
        else Workloads.calibrate(work)
        end
puts "ready #{Process.pid} #{chunk}"
seq = 0
loop do
  t = Workloads.now
  n = 0
  dt = 0
  while dt < ROUND_SECONDS
    work.call(chunk)
    n += chunk
    dt = Workloads.now - t
  end
  seq += 1
  puts "rate #{seq} #{(n / dt).round(1)}"
end
