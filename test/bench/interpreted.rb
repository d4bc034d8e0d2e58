# frozen_string_literal: true

# interpreted.rb [TRACER ARGS...]: what a tracer leaves in YJIT's interpreter after it detaches,
# counted in instructions rather than timed. Run with the agent and YJIT's counters:
#
#   ruby --yjit --yjit-stats -Ilib -rtracer_agent test/bench/interpreted.rb -m Object#never_called
#
# The bench's server workload in one frame that never returns (a server's request loop); with
# arguments, client/tracer attaches with them 2 s in for 1 s. Prints the instructions the
# interpreter ran per request between 6 s and 9 s, when YJIT ran everything before the attach:
# a frame it handed to the interpreter stays there (what `make bench` times as after detach).
# With --signal instead, no tracer: a signal with a Ruby trap 2 s in, which interrupts the loop
# the way an attach does. With neither, what the agent costs loaded and never attached (run it
# with and without -rtracer_agent).
abort 'run with --yjit --yjit-stats' unless defined?(RubyVM::YJIT) && RubyVM::YJIT.stats_enabled?

def f(i) = g(i) + 1
def g(i) = i * 2

def handle_request(first)
  i = first
  last = first + 1000
  while i < last
    f(i)
    i += 1
  end
end

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

# The request loop; with limit, it returns after limit requests (warm-up: YJIT compiles a method
# at about its 30th call, and a frame that is never entered compiled is never compiled).
def serve(t0, limit = nil)
  i = 0
  requests = 0
  first = nil
  while true
    handle_request(i)
    i += 1000
    requests += 1
    return if limit && requests >= limit
    next if requests % 64 != 0

    t = now - t0
    if first.nil? && t > 6
      first = [RubyVM::YJIT.runtime_stats(:vm_insns_count), requests]
    elsif t > 9
      return [RubyVM::YJIT.runtime_stats(:vm_insns_count) - first[0], requests - first[1]]
    end
  end
end

100.times { handle_request(0) }
100.times { serve(now, 1) }
if ARGV == ['--signal']
  trap('USR2') {}
  Process.spawn('sh', '-c', "sleep 2; kill -USR2 #{Process.pid}")
elsif !ARGV.empty?
  client = File.expand_path('../../client/tracer', __dir__)
  Process.spawn('sh', '-c', 'sleep 2; exec "$0" "$@"', client, '-p', Process.pid.to_s, *ARGV,
                '-o', File::NULL, '--duration', '1', err: File::NULL, in: File::NULL)
end
start = now
insns, requests = serve(start)
what = if !ARGV.empty? then ARGV.join(' ').sub('--signal', 'a signal, no tracer')
       elsif defined?(TracerAgent) then '(agent loaded, no tracer)'
       else '(no agent)'
       end
printf("%-28s %5.1f interpreted instructions per request, 6-9 s in (%d requests)\n",
       what, insns.to_f / requests, requests)
