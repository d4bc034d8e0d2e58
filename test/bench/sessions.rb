# frozen_string_literal: true

# sessions.rb [SESSIONS] [TRACER ARGS...]: what many short sessions leave in one process. Starts
# the bench's server workload with the agent, runs SESSIONS clients one after another (each
# `tracer -p PID TRACER ARGS --duration 0.05 -o /dev/null`, default -m Object#f), and prints
# the growth per session of the process's RSS and, with YJIT, of its code region and its own
# heap, between the 10th session and the last (the first compile everything once).
#
#   ruby -Ilib test/bench/sessions.rb 1000 -m Object#f
require 'rbconfig'
require 'open3'

sessions = Integer(ARGV.shift || 1000)
args = ARGV.empty? ? %w[-m Object#f] : ARGV
root = File.expand_path('../..', __dir__)
tracer = File.join(root, 'client', 'tracer')

app = <<~'RUBY'
  def f(i) = g(i) + 1
  def g(i) = i * 2
  def request(n) = n.times { |i| f(i) }
  $stdout.puts 'ready'
  $stdout.flush
  loop { request(1000); sleep 0.0005 }
RUBY
pid = spawn(RbConfig.ruby, "-I#{root}/lib", '-rtracer_agent', '-e', app, out: (r, w = IO.pipe)[1])
w.close
r.gets or abort 'the target did not start'

probe = <<~'RUBY'
  s = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? RubyVM::YJIT.runtime_stats : {}
  [File.read('/proc/self/status')[/VmRSS:\s+(\d+)/, 1].to_i, s[:code_region_size].to_i, s[:yjit_alloc_size].to_i]
RUBY
measure = lambda do
  out, err, st = Open3.capture3(tracer, '-p', pid.to_s, '-e', "GC.start; #{probe}")
  abort "tracer -e: #{err}" unless st.success?
  out[/\[.*\]/].delete('[]').split(',').map(&:to_i)
end

first = nil
sessions.times do |i|
  first = measure.call if i == 10
  _, err, st = Open3.capture3(tracer, '-p', pid.to_s, *args, '--duration', '0.05', '-o', '/dev/null')
  abort "tracer #{args.join(' ')}: #{err}" unless st.success?
end
last = measure.call
Process.kill('KILL', pid)
Process.wait(pid)
n = sessions - 10
rss, code, heap = last.zip(first).map { |a, b| a - b }
printf("%s, %d sessions of tracer %s: RSS %+.2f KiB a session, YJIT code %+.2f KiB, YJIT heap %+.2f KiB\n",
       RUBY_DESCRIPTION[/\A\S+ \S+/] + (last[1].positive? ? ' YJIT' : ''),
       n, args.join(' '), rss.to_f / n, code / 1024.0 / n, heap / 1024.0 / n)
