# target.rb MODE: a Ruby process for the integration tests, with the agent loaded (-rtracer_agent).
# It prints "ready PID" once it is in MODE, then stays there until killed.
$stdout.sync = true

class Worker
  def initialize(n) = @n = n
  def work(x) = helper(x) + 1
  def helper(x) = x * 2
  def self.build(n) = new(n)
  def fail_once = raise(ArgumentError, 'worker failed')
  def nap(s) = sleep(s)
  def self.nap(s) = sleep(s)
  def outer = (inner; inner)
  def inner = sleep(0.001)
  def misspelt = helpr(1) # NoMethodError: Ruby 3.1's message adds lines (error_highlight, Did you mean?)
  def fail_lines = raise(ArgumentError, "first line\nsecond line")
end

def ready = puts("ready #{Process.pid}")

mode = ARGV.fetch(0)
ready if mode == 'daemon' # before it detaches from us
case mode
when 'busy'
  ready
  w = Worker.new(1)
  loop { w.work(1) }
when 'sleep'
  ready
  sleep
when 'pipe'
  r, _w = IO.pipe
  ready
  r.read
when 'queue'
  Thread.new { sleep } # without another live thread, Ruby calls an empty pop a deadlock
  ready
  Queue.new.pop
when 'select'
  r, _w = IO.pipe
  ready
  IO.select([r])
when 'cfunc'
  big = Array.new(3_000_000) { |i| (i * 7919) % 3_000_017 }
  ready
  loop { big.sort }
when 'join'
  t = Thread.new { sleep }
  ready
  t.join
when 'work'
  # A steady trace: every 5 ms a call tree, an exception, nested sleeps, a class method, and
  # `nap` on two receivers (an instance and the class).
  w = Worker.build(1)
  ready
  loop do
    Worker.build(2)
    w.nap(0)
    Worker.nap(0)
    w.work(3)
    begin
      w.fail_once
    rescue ArgumentError
      nil
    end
    w.outer
    sleep 0.005
  end
when 'threads'
  ready
  workers = 3.times.map do |i|
    Thread.new do
      Thread.current.name = "worker-#{i}"
      w = Worker.new(i)
      loop { w.work(i); sleep 0.002 }
    end
  end
  workers.each(&:join)
when 'exit_soon'
  w = Worker.new(1)
  ready
  deadline = Time.now + (ENV['EXIT_AFTER'] || '1').to_f
  w.work(1) while Time.now < deadline
  exit 0
when 'fork'
  w = Worker.new(1)
  ready
  loop do
    parent = Process.pid
    pid = fork do
      puts "child #{Process.pid}"
      loop { w.helper(1); sleep 0.01; exit!(0) if Process.ppid != parent }
    end
    Process.detach(pid)
    loop { w.work(1); sleep 0.01 }
  end
when 'multiline'
  # Exceptions whose messages have several lines, raised inside methods of Worker.
  w = Worker.new(1)
  ready
  loop do
    begin
      w.misspelt
    rescue NameError
      nil
    end
    begin
      w.fail_lines
    rescue ArgumentError
      nil
    end
    sleep 0.005
  end
when 'cluster'
  # A Puma-like master: it keeps WORKERS (2) workers, forks a new one for each that dies, and
  # one more whenever the file SPAWN_FILE appears (it removes it). Each worker names itself
  # "cluster-worker-TAG", says "worker PID" and calls Worker#work until the master is gone.
  master = Process.pid
  spawn_worker = lambda do
    fork do
      Process.setproctitle("cluster-worker-#{ENV.fetch('TAG')}")
      puts "worker #{Process.pid}"
      w = Worker.new(1)
      loop do
        w.work(1)
        sleep 0.005
        exit!(0) if Process.ppid != master
      end
    end
  end
  Integer(ENV['WORKERS'] || 2).times { spawn_worker.call }
  ready
  loop do
    while (pid = Process.wait(-1, Process::WNOHANG))
      puts "exited #{pid}"
      spawn_worker.call
    end
    if File.exist?(ENV.fetch('SPAWN_FILE'))
      File.delete(ENV.fetch('SPAWN_FILE'))
      spawn_worker.call
    end
    sleep 0.01
  end
when 'trap'
  # The app traps URG itself. Started with -rtracer_agent, it traps after the agent loaded;
  # started without, the require below loads the agent after the trap.
  got = 0
  Signal.trap('URG') { got += 1 }
  require 'tracer_agent'
  ready
  loop do
    sleep 0.01
    File.write(ENV['TRAP_FILE'], got.to_s) if ENV['TRAP_FILE']
  end
when 'blockread'
  # Blocking reads on a blocking pipe while the agent is signalled.
  require 'io/nonblock'
  r, w = IO.pipe
  r.nonblock = false
  Thread.new { loop { sleep 0.002; w.write('x') } }
  ready
  loop do
    r.sysread(1)
  rescue Errno::EINTR
    puts 'EINTR'
  end
when 'many_threads'
  # 50 named threads, each calling the same methods; -m 'Worker#work(Thread.current.name)' shows
  # which thread really made each call.
  threads = 50.times.map do |i|
    Thread.new do
      Thread.current.name = "t#{i}"
      w = Worker.new(i)
      loop { w.work(i); Thread.pass }
    end
  end
  ready
  threads.each(&:join)
when 'daemon'
  # Process.daemon forks; the daemon (a new pid) says who it is in a file and keeps working.
  Process.daemon(true, true)
  File.write(ENV.fetch('DAEMON_FILE'), Process.pid.to_s)
  w = Worker.new(1)
  loop { w.work(1); sleep 0.01 }
when 'ractor'
  # A second Ractor calls Worker#work too; the main one keeps calling it.
  Warning[:experimental] = false
  r = Ractor.new do
    other = Worker.new(2)
    loop { other.work(2) }
  end
  w = Worker.new(1)
  ready
  loop do
    w.work(1)
    sleep 0.001
    raise 'the other Ractor died' unless r.inspect.include?('running') || r.inspect.include?('blocking')
  end
when 'each'
  # Array#each, #map and #select: C methods, or (Ruby 3.4 with YJIT) Ruby ones.
  a = [1, 2, 3]
  ready
  loop do
    a.each { |x| x }
    a.map { |x| x + 1 }
    a.select(&:odd?)
    sleep 0.001
  end
when 'alias'
  # Calls Hash#key?; once ALIAS_FILE exists (made while -m 'Hash#key?' is attached), it aliases
  # key? as old_key? and calls that too, for ever, saying if it ever raises.
  h = { 1 => 2 }
  ready
  aliased = false
  loop do
    h.key?(1)
    if !aliased && File.exist?(ENV.fetch('ALIAS_FILE'))
      Hash.alias_method :old_key?, :key?
      aliased = true
      puts 'aliased'
    end
    begin
      h.old_key?(1) if aliased
    rescue Exception => e # rubocop:disable Lint/RescueException -- whatever the tracer could raise
      puts "old_key? raised #{e.class}: #{e.message}"
      aliased = false
    end
    sleep 0.001
  end
else
  abort "unknown mode #{mode}"
end
