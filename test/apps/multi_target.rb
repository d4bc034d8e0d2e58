# frozen_string_literal: true

# multi_target.rb: a Ruby process for the tests of several tracer sessions at once (run with
# -rtracer_agent, cwd = repo root). It prints "ready PID", then for each line "burst" on its
# standard input makes exactly 10,000 calls of Burst#tick and prints "done N" (N: bursts so
# far); meanwhile its main thread sleeps in Object#idle, where a backtrace finds it. "spin"
# starts a thread that spends some CPU in Object#spin (a sixth of a core), which a profile
# finds, in one call that never returns. "fork" forks a child that prints "child PID" and
# then runs as its parent does (bursts on its own "burst" lines are not read: it has no stdin
# of its own, it just sleeps); "exit" exits.
$stdout.sync = STDOUT.sync = true

class Burst
  def tick = nil # TICK
end

def idle(queue) = queue.pop # IDLE

def spin
  loop do
    20_000.times { nil }
    sleep 0.005
  end
end

queue = Queue.new
Thread.new do
  $stdin.each_line { |l| queue << l.strip }
  queue << 'eof'
end
puts "ready #{Process.pid}"
bursts = 0
loop do
  case idle(queue)
  when 'burst'
    b = Burst.new
    10_000.times { b.tick }
    bursts += 1
    puts "done #{bursts}"
  when 'fork'
    child = fork do
      puts "child #{Process.pid}"
      sleep
    end
    Process.detach(child)
  when 'exit'
    exit 0
  when 'spin'
    Thread.new { spin }
    puts 'spinning'
  when 'eof'
    sleep
  end
end
