# memory_pause.rb: how long --memory stops a process with a big heap (docs/performance.md, --memory's pause).
#
#   ruby test/bench/memory_pause.rb [GIB] [ROUNDS]      (make all first; 1 GiB, 3 rounds)
#
# The target holds GIB GiB of 1 KiB strings, and a ticker thread that wakes every millisecond
# and records the longest gap between two wake-ups: whatever stops the process (the GVL held,
# fork copying its page tables) shows there. Each round resets the gap, runs the client, and
# reads the gap back; `tracer -e 1` (attach, one eval, detach) is the yardstick, run the same way.
# Each prints its rounds, then their median (the middle one; the upper of two for an even count).
require 'open3'
require 'rbconfig'

ROOT = File.expand_path('../..', __dir__)
TRACER = File.join(ROOT, 'client', 'tracer')
gib = Float(ARGV[0] || 1)
rounds = Integer(ARGV[1] || 3)

TARGET = <<~RUBY
  $stdout.sync = true
  STRINGS = Array.new((#{gib} * (1 << 20)).to_i) { |i| i.to_s.ljust(1024, 'x') }
  GC.start
  $max_gap = 0.0
  Thread.new do
    Thread.current.name = 'ticker'
    last = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    loop do
      sleep 0.001
      now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      $max_gap = now - last if now - last > $max_gap
      last = now
    end
  end
  puts "ready \#{Process.pid}"
  sleep
RUBY

def tracer(*args)
  out, err, status = Open3.capture3(TRACER, *args.map(&:to_s))
  raise "tracer #{args.join(' ')}: #{err}" unless status.success?

  out
end

def rss_mib(pid) = File.read("/proc/#{pid}/status")[/^VmRSS:\s+(\d+)/, 1].to_i / 1024

stdin, stdout, wait = Open3.popen2(RbConfig.ruby, "-I#{ROOT}/lib", '-rtracer_agent', '-e', TARGET)
stdin.close
pid = Integer(stdout.gets[/ready (\d+)/, 1] || abort('the target did not start'))
begin
  sleep 1 # the ticker's first gaps (thread start) are not ours
  puts "ruby #{RUBY_VERSION}, target #{pid}: RSS #{rss_mib(pid)} MiB, " \
       "#{tracer('-p', pid, '-e', 'GC.stat(:heap_live_slots)').strip.delete_prefix('=> ')} live objects, nproc #{`nproc`.strip}"
  { 'tracer -e 1' => ['-e', '1'], 'tracer --memory' => ['--memory'] }.each do |name, args|
    gaps = Array.new(rounds) do
      tracer('-p', pid, '-e', '$max_gap = 0.0')
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      out = tracer('-p', pid, *args)
      took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
      gap = Float(tracer('-p', pid, '-e', '$max_gap').strip.delete_prefix('=> '))
      walk = out[/walked its heap in ([\d.]+) s/, 1]
      printf("%-16s longest pause %6.1f ms   client ran %6.2f s%s\n", name, gap * 1000, took,
             walk ? "   (the copy walked the heap in #{walk} s)" : '')
      gap
    end
    printf("%-16s median pause  %6.1f ms over %d rounds\n", name, gaps.sort[gaps.size / 2] * 1000, rounds)
  end
ensure
  Process.kill('KILL', pid)
  wait.join
end
