# attach.rb: N back-to-back `tracer -e 6*7` on a busy target and on an idle one, each a new
# client right after the last exited; prints how many answered "=> 42" and the latencies.
#
#   ruby test/bench/attach.rb [N]      (make all first; N = 200; RUBY picks the target's Ruby)
#
# A busy target is where a client that just left used to hold the next one off ("already
# traced by pid M" for a gone M); an idle one is where Ruby 3.3+ never ran the postponed job.
require 'open3'
require 'rbconfig'

ROOT = File.expand_path('../..', __dir__)
TRACER = File.join(ROOT, 'client', 'tracer')
RUBY = ENV['RUBY'] || RbConfig.ruby
N = Integer(ARGV[0] || 200)

TARGETS = {
  'busy' => 'def f(i) = i + 1; STDOUT.sync = true; puts(:ready); loop { 1000.times { |i| f(i) } }',
  'idle' => 'STDOUT.sync = true; puts(:ready); loop { sleep 1 }'
}.freeze

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def percentile(sorted, p) = sorted[((sorted.size - 1) * p).round]

yjit = ENV['RUBY_YJIT_ENABLE'] == '1' ? ' (RUBY_YJIT_ENABLE=1)' : ''
puts "#{`#{RUBY} -v`.strip}#{yjit}"
TARGETS.each do |name, code|
  r, w = IO.pipe
  pid = Process.spawn(RUBY, '-I', File.join(ROOT, 'lib'), '-rtracer_agent', '-e', code, out: w)
  w.close
  r.gets # ready: the agent is loaded
  ok = 0
  times = []
  failures = Hash.new(0)
  N.times do
    t0 = now
    out, err, status = Open3.capture3(TRACER, '-p', pid.to_s, '-e', '6*7')
    times << (now - t0) * 1000
    if status.success? && out == "=> 42\n"
      ok += 1
    else
      failures[err.lines.first.to_s.sub(/\d+/, 'N').strip] += 1
    end
  end
  Process.kill('KILL', pid)
  Process.wait(pid)
  times.sort!
  puts format('%-5s %d/%d answered; attach + -e + detach: median %.1f ms, p90 %.1f ms, max %.1f ms',
              name, ok, N, percentile(times, 0.5), percentile(times, 0.9), times.last)
  failures.each { |msg, n| puts "      #{n}x #{msg}" }
end
