# frozen_string_literal: false
#
# floor.rb: the floor under two of the performance goals, measured without tracer. It builds
# floor/floor.c (a NEWOBJ hook that does nothing, one that only asks which thread allocates,
# one that finds the allocation's site, and a clock reader) for the Ruby running it, then prints:
# - the alloc loop of workloads.rb (a small object, a string and a hash per iteration) before
#   and after each hook is turned on, in one process and one frame (medians of 15 rounds, 3
#   processes each): what the VM's own NEWOBJ hook costs before any counting;
# - ns per read of the clock a traced call reads twice (the TSC on x86-64).
#   ruby test/bench/floor.rb      (make bench-floor runs it on every Ruby of the matrix)
require 'rbconfig'
require 'tmpdir'

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
    clock = Array.new(5) { Floor.clock_ns }.sort[2]
    yjit = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? ' +YJIT' : ''
    puts "floor, ruby #{RUBY_VERSION}#{yjit}: alloc loop with a NEWOBJ hook that does nothing " \
         "#{ratios['nothing'].sort.map { |r| format('%.2fx', r) }.join(' ')}, that asks which thread " \
         "#{ratios['thread'].sort.map { |r| format('%.2fx', r) }.join(' ')}, that finds the site " \
         "#{ratios['site'].sort.map { |r| format('%.2fx', r) }.join(' ')}; clock read #{format('%.1f', clock)} ns"
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
