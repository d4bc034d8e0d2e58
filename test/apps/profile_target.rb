# profile_target.rb: a workload whose split is known by construction, for --top profile.
#
#   ruby profile_target.rb [split|contend|all]
#
# split:   one thread runs fifty, thirty and twenty in turn, pure Ruby loops of 5, 3 and 2 units
#          of work: 50%, 30% and 20% of its CPU time; a second thread sleeps.
# contend: two threads spin at once (contender_a, contender_b): each holds the GVL about half of
#          the time and waits for it the other half; the main thread waits in Thread#join.
# all:     both.
# sort:    a thread sorts a large array (Array#sort!, C) then calls after_sort (a few lines of
#          Ruby): a profiler that waits for a safe point gives sort!'s time to after_sort.
# forker:  waits for "fork" on stdin, then forks 20 children one after the other, each running
#          a little Ruby before it exits 0, and prints "forks: N ok"; then waits for "exec", and
#          execs a Ruby that prints "exec'd and alive" and sleeps.
# requests: a thread serves "requests" the way Rails says so, through ActiveSupport::Notifications
#          (start_processing and process_action.action_controller): UsersController#index runs
#          fifty, ReportsController#show runs thirty, and a job (perform_start and perform
#          .active_job) runs twenty.
# stackprof: as split, with stackprof sampling the process too (cpu mode, 1 ms, on SIGPROF);
#          "report" on stdin prints "stackprof samples: N".
# It prints "ready PID" once every thread has begun, then runs until killed.
$stdout.sync = true

UNIT = Integer(ENV.fetch('PROFILE_UNIT', 20_000))

# The units of work, each the same loop: nothing in it makes a frame of its own.
def fifty
  i = 0
  n = 5 * UNIT
  i += 1 while i < n
  i
end

def thirty
  i = 0
  n = 3 * UNIT
  i += 1 while i < n
  i
end

def twenty
  i = 0
  n = 2 * UNIT
  i += 1 while i < n
  i
end

# In a random order each time: a sampler ticking in step with a fixed cycle would see one
# part of it more than the others.
def splitter
  rng = Random.new(42)
  parts = %i[fifty thirty twenty]
  loop { parts.shuffle(random: rng).each { |m| send(m) } }
end

def sleeper
  loop { sleep 60 }
end

def spin
  i = 0
  i += 1 while i < UNIT
  i
end

def contender_a
  loop { spin }
end

def contender_b
  loop { spin }
end

def after_sort
  i = 0
  i += 1 while i < 10
  i
end

def sorter
  big = Array.new(400_000) { |i| (i * 7919) % 1_000_003 }
  loop do
    big.shuffle!(random: Random.new(1))
    big.sort!
    after_sort
  end
end

def forker
  $stdin.gets # "fork"
  ok = 20.times.count do
    pid = fork { 2000.times.map { |i| i.to_s }.join; exit!(0) }
    Process.wait(pid)
    $?.success?
  end
  puts "forks: #{ok} ok"
  $stdin.gets # "exec"
  exec(RbConfig.ruby, '-e', 'puts "exec\'d and alive"; $stdout.flush; sleep')
end

# What Rails and ActiveJob instrument around an action and a job, without Rails.
def request(controller, action)
  n = ActiveSupport::Notifications
  n.instrument('start_processing.action_controller', controller: controller, action: action)
  n.instrument('process_action.action_controller', controller: controller, action: action) { yield }
end

class ReportJob; end

def server
  n = ActiveSupport::Notifications
  job = ReportJob.new
  loop do
    request('UsersController', 'index') { fifty }
    request('ReportsController', 'show') { thirty }
    n.instrument('perform_start.active_job', job: job)
    n.instrument('perform.active_job', job: job) { twenty }
  end
end

mode = ARGV.fetch(0, 'all')
if mode == 'requests'
  require 'active_support'
  require 'active_support/notifications'
end
if mode == 'stackprof'
  require 'stackprof'
  StackProf.start(mode: :cpu, interval: 1000, raw: false)
  Thread.new do
    while $stdin.gets
      StackProf.stop
      puts "stackprof samples: #{StackProf.results[:samples]}"
      StackProf.start(mode: :cpu, interval: 1000, raw: false)
    end
  end
end
started = Queue.new
threads = []
if %w[split all stackprof].include?(mode)
  threads << Thread.new { Thread.current.name = 'splitter'; started << 1; splitter }
  threads << Thread.new { Thread.current.name = 'sleeper'; started << 1; sleeper }
end
if %w[contend all].include?(mode)
  threads << Thread.new { Thread.current.name = 'contender-a'; started << 1; contender_a }
  threads << Thread.new { Thread.current.name = 'contender-b'; started << 1; contender_b }
end
threads << Thread.new { Thread.current.name = 'sorter'; started << 1; sorter } if mode == 'sort'
threads << Thread.new { Thread.current.name = 'server'; started << 1; server } if mode == 'requests'
threads.size.times { started.pop }
puts "ready #{Process.pid}"
forker if mode == 'forker'
threads.each(&:join)
