# frozen_string_literal: false
#
# floor.rb: the floor under two of the performance goals, measured without tracer. It builds
# floor/floor.c (a NEWOBJ hook that does nothing, one that only asks which thread allocates,
# one that finds the allocation's site, clock readers and a C method that does nothing) for the
# Ruby running it, then prints:
# - the alloc loop of workloads.rb (a small object, a string and a hash per iteration) before
#   and after each hook is turned on, in one process and one frame (medians of 15 rounds, 3
#   processes each): what the VM's own NEWOBJ hook costs before any counting;
# - the calls loop of workloads.rb (f calls g), plain and with f behind a wrapper of -m's shape
#   whose two C calls do nothing (medians of 7 rounds): what the interpreter (or YJIT) charges
#   for the wrapper itself, before the agent does anything;
# - ns per read of the clock a traced call reads twice: the TSC where the kernel keeps time
#   with it, else the kernel's CLOCK_MONOTONIC (the agent's choice, ext/tracer_agent/clock.h),
#   and the other one.
#   ruby test/bench/floor.rb      (make bench-floor runs it on every Ruby of the matrix)
require 'rbconfig'
require 'tmpdir'

# The calls loop of workloads.rb; fw is f behind a wrapper of -m's shape
# (lib/tracer_agent/wrap.rb), whose C calls do nothing.
def floor_g(i) = i * 2
def floor_f(i) = floor_g(i) + 1
def floor_o(i) = floor_g(i) + 1

def floor_fw(i)
  ::Floor.noop(1)
  floor_o(i)
ensure
  ::Floor.noop(1)
end

# ns per iteration of n calls of f, or of fw.
def floor_calls(wrapped, n)
  i = 0
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  if wrapped
    while i < n
      floor_fw(i)
      i += 1
    end
  else
    while i < n
      floor_f(i)
      i += 1
    end
  end
  (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t) * 1e9 / n
end

# Medians of 7 rounds each, the two alternating, after enough calls for YJIT to compile the
# loop itself (it compiles a method on its 30th call).
def wrapper_floor
  plain = []
  wrapped = []
  50.times do
    floor_calls(false, 20_000)
    floor_calls(true, 20_000)
  end
  7.times do
    plain << floor_calls(false, 2_000_000)
    wrapped << floor_calls(true, 2_000_000)
  end
  [plain.sort[3], wrapped.sort[3]]
end

dir = ARGV[0]
unless dir
  Dir.mktmpdir('tracer-floor-') do |tmp|
    src = File.join(__dir__, 'floor')
    %w[floor.c extconf.rb].each { |f| File.write(File.join(tmp, f), File.read(File.join(src, f))) }
    Dir.chdir(tmp) do
      system(RbConfig.ruby, 'extconf.rb', out: File::NULL) && system('make', '-s', out: File::NULL) or
        abort 'floor.rb: building floor.c failed'
    end
    ratios = Hash.new { |h, k| h[k] = [] }
    %w[nothing thread site].each do |kind|
      3.times do
        out = IO.popen([RbConfig.ruby, __FILE__, tmp, kind], &:read)
        ratios[kind] << Float(out[/ratio (\S+)/, 1])
      end
    end
    require File.join(tmp, 'floor')
    plain, wrapped = wrapper_floor
    source = File.read('/sys/devices/system/clocksource/clocksource0/current_clocksource').strip rescue '?'
    kernel = Array.new(5) { Floor.clock_ns(:kernel) }.sort[2]
    tsc = Floor.clock_ns(:tsc) && Array.new(5) { Floor.clock_ns(:tsc) }.sort[2]
    agent_tsc = tsc && source == 'tsc'
    clocks = [format('the kernel clock (clocksource %s) %.1f ns', source, kernel)]
    clocks << format('the TSC %.1f ns', tsc) if tsc
    clocks.reverse! if agent_tsc
    yjit = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? ' +YJIT' : ''
    puts "floor, ruby #{RUBY_VERSION}#{yjit}: alloc loop with a NEWOBJ hook that does nothing " \
         "#{ratios['nothing'].sort.map { |r| format('%.2fx', r) }.join(' ')}, that asks which thread " \
         "#{ratios['thread'].sort.map { |r| format('%.2fx', r) }.join(' ')}, that finds the site " \
         "#{ratios['site'].sort.map { |r| format('%.2fx', r) }.join(' ')}; calls loop " \
         "#{format('%.1f', plain)} ns an iteration, #{format('%.1f', wrapped)} ns with f behind a " \
         "wrapper of two C calls that do nothing (#{format('%.2fx', wrapped / plain)}); a clock read: " \
         "#{clocks[0]} (what the agent reads here)#{clocks[1] && ", #{clocks[1]}"}"
  end
  exit
end


# The child: one process, one frame, the hook turned on between the two sets of rounds.
require File.join(dir, 'floor')
class Widget
  def initialize(id)
    @id = id
  end
end

def round(n)
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  i = 0
  while i < n
    w = Widget.new(i)
    s = "item #{i}"
    { id: i, widget: w, name: s }
    i += 1
  end
  n / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t)
end

n = 100_000
5.times { round(n) }
before = Array.new(15) { round(n) }.sort[7]
Floor.newobj_hook(ARGV[1].to_sym)
3.times { round(n) }
after = Array.new(15) { round(n) }.sort[7]
puts "ratio #{before / after}"
