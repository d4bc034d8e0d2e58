# frozen_string_literal: true

# redefine_cost.rb MODE [CYCLES]: what YJIT keeps of each change to a hot method's definition,
# the way -m's wrappers change it at attach and detach. Plain Ruby, no agent:
#
#   ruby --yjit --yjit-stats=quiet test/bench/redefine_cost.rb fresh 2000
#
# Each cycle puts a wrapper of -m's shape in f's place, runs 2000 calls through it, puts the
# original back and runs 2000 more. MODE fresh: a new wrapper every cycle (what the agent does);
# reuse: one wrapper, compiled once and aliased in and out; none: no change, the calls alone.
# Prints the growth per cycle of YJIT's code region, of its own heap, and of the process's RSS.
abort 'run with --yjit --yjit-stats=quiet' unless defined?(RubyVM::YJIT) && RubyVM::YJIT.stats_enabled?

MODE = ARGV[0]
CYCLES = Integer(ARGV[1] || 2000)
abort 'MODE: fresh, reuse or none' unless %w[fresh reuse none].include?(MODE)

def f(i) = g(i) + 1
def g(i) = i * 2
def enter = nil
def leave = nil
def run(n) = n.times { |i| f(i) }
def rss_kib = File.read('/proc/self/status')[/VmRSS:\s+(\d+)/, 1].to_i
def yjit_bytes = RubyVM::YJIT.runtime_stats.values_at(:code_region_size, :yjit_alloc_size)

WRAPPER = "(i)\n  enter\n  __saved_f(i)\nensure\n  leave\nend"

def wrap
  case MODE
  when 'fresh' then Object.class_eval("def f#{WRAPPER}", '(wrapper)', 1)
  when 'reuse' then Object.send(:alias_method, :f, :__wrapper_f)
  end
end

def unwrap
  Object.send(:alias_method, :f, :__saved_f) unless MODE == 'none'
end

run(100_000)
Object.send(:alias_method, :__saved_f, :f)
Object.class_eval("def __wrapper_f#{WRAPPER}", '(wrapper)', 1) if MODE == 'reuse'
GC.start
code0, heap0 = yjit_bytes
rss0 = rss_kib
CYCLES.times do
  wrap
  run(2000)
  unwrap
  run(2000)
end
GC.start
code1, heap1 = yjit_bytes
rss1 = rss_kib
printf("%-5s %d cycles: YJIT code +%.2f KiB a cycle, YJIT heap +%.2f KiB, RSS +%.2f KiB\n", MODE, CYCLES,
       (code1 - code0) / 1024.0 / CYCLES, (heap1 - heap0) / 1024.0 / CYCLES, (rss1 - rss0).to_f / CYCLES)
