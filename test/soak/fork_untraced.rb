# fork_untraced.rb [FORKS] [SECONDS]: does a Ruby's own fork deadlock, with no tracer anywhere?
# Two threads hand a counter back and forth under a Mutex and a condition variable (each wait
# and wake-up takes the thread's interrupt lock), while the main thread forks FORKS children
# (default 20000), each exiting at once. A child that has not exited SECONDS (default 10) after
# its fork is stuck: its stack is printed (with gdb, if there is one) and it is killed. Prints
# how many forks hung; exits 1 if any did. Load nothing of tracer: this asks about Ruby alone.
#
# The inject soak (inject.rb) saw one child of its app hang inside fork on Ruby 3.4.5, in
# Ruby's after-fork cleanup, on a lock another thread held when the parent forked
# (ruby/ruby#12981, #13584). This script tells whether that happens without the agent.
FORKS = Integer(ARGV[0] || 20_000)
LIMIT = Float(ARGV[1] || 10)
abort 'fork_untraced: tracer_agent is loaded; run it with a bare ruby' if defined?(TracerAgent)

lock = Mutex.new
turn = ConditionVariable.new
count = 0
stop = false
players = 2.times.map do |me|
  Thread.new do
    until stop
      lock.synchronize do
        turn.wait(lock, 0.1) while count % 2 != me && !stop
        count += 1
        turn.signal
      end
    end
  end
end

def stack(pid)
  return '(no gdb here)' unless system('command -v gdb >/dev/null')

  IO.popen(['gdb', '-batch', '-p', pid.to_s, '-ex', 'thread apply all bt'], err: File::NULL, &:read)
    .lines.grep(/^#/).map { |l| l.sub(/ \(.*?\) at /, ' at ').strip }.first(20).join("\n")
end

hung = 0
start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
FORKS.times do |i|
  pid = fork { exit!(0) }
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + LIMIT
  until Process.wait(pid, Process::WNOHANG)
    if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      hung += 1
      puts "fork_untraced: fork #{i}: child #{pid} still there #{LIMIT} s after its fork:"
      puts stack(pid)
      Process.kill('KILL', pid)
      Process.wait(pid)
      break
    end
    sleep 0.0005
  end
end
stop = true
players.each(&:join)
printf("fork_untraced: %d forks, %d hung, %d hand-overs, Ruby %s%s, in %.0f s\n",
       FORKS, hung, count, RUBY_VERSION, defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? ' with YJIT' : '',
       Process.clock_gettime(Process::CLOCK_MONOTONIC) - start)
exit(hung.zero? ? 0 : 1)
