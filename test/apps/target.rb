# target.rb MODE: a Ruby process for the integration tests, with the agent loaded (-rtracer_agent).
# It prints "ready PID" once it is in MODE, then stays there until killed (exit_when_told: until a
# line comes on its stdin).
$stdout.sync = STDOUT.sync = true # both: in a Ruby::Box (4.0) Kernel#puts writes to STDOUT, not $stdout

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

# n threads of klass, named t0, t1..., each calling Worker#work in a loop; ready once every one
# has its name (a client that came at "ready" saw threads yet to be made), then forever.
def threads_calling_work(n, klass)
  named = Queue.new
  threads = n.times.map do |i|
    klass.new do
      Thread.current.name = "t#{i}"
      named << i
      w = Worker.new(i)
      loop { w.work(i); Thread.pass }
    end
  end
  n.times { named.pop }
  ready
  threads.each(&:join)
end

mode = ARGV.fetch(0)
ready if mode == 'daemon' # before it detaches from us
case mode
when 'busy'
  ready
  w = Worker.new(1)
  loop { w.work(1) }
when 'bursts'
  # Bursts of 2000 calls of work and helper every 10 ms: a flood of events while they last.
  ready
  w = Worker.new(1)
  loop do
    2000.times { w.work(1) }
    sleep 0.01
  end
when 'sleep'
  ready
  sleep
when 'pipe'
  r, _w = IO.pipe
  ready
  r.read
when 'load'
  # Inside Kernel#load, waiting for the file (a FIFO nobody writes): from Ruby 3.3 on, the frame
  # there has no instruction sequence, which a job that evaluates Ruby there cannot survive.
  require 'tmpdir'
  fifo = File.join(Dir.mktmpdir('tracer-load'), 'later.rb')
  File.mkfifo(fifo)
  ready
  load fifo
when 'queue'
  Thread.new { sleep } # without another live thread, Ruby calls an empty pop a deadlock
  ready
  Queue.new.pop
when 'select'
  r, _w = IO.pipe
  ready
  IO.select([r])
when 'cfunc'
  # A sort of 1 M integers: some 150 ms of C call that holds Ruby's lock, seconds at load 30.
  # The agent answers, and confirms a detach, only between two (3 M made a detach outlast the
  # client's 1.8 s at load 10).
  big = Array.new(1_000_000) { |i| (i * 7919) % 1_000_003 }
  ready
  loop { big.sort }
when 'nested'
  # The main thread asleep three calls deep: --backtrace N shows its frames, innermost first.
  def outer_call = middle_call
  def middle_call = inner_call
  def inner_call = (ready; sleep)
  outer_call
when 'memory'
  # What --memory must find: PROBES objects of a class of ours, a 5 MiB string, an array of
  # 100 000 elements, a hash of 50 000 pairs, all kept alive.
  class MemoryProbe
    def initialize(i)
      @a = i
      @b = i + 1
      @c = i + 2
      @d = i + 3
      @e = i + 4
      @f = i + 5
    end
  end
  probes = Array.new(Integer(ENV.fetch('PROBES'))) { |i| MemoryProbe.new(i) }
  big = 'a' * (5 << 20)
  long = Array.new(100_000) { |i| i }
  wide = (1..50_000).to_h { |i| [i, i.to_s] }
  $kept = [probes, big, long, wide]
  ready
  sleep
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
  # Ready once the three workers have their names: a client that came at "ready" saw them yet to be made.
  named = Queue.new
  workers = 3.times.map do |i|
    Thread.new do
      Thread.current.name = "worker-#{i}"
      named << i
      w = Worker.new(i)
      loop { w.work(i); sleep 0.002 }
    end
  end
  3.times { named.pop }
  ready
  workers.each(&:join)
when 'thread_jobs'
  # A job thread at a time, every 5 ms: it names itself in its block (as Puma's and Sidekiq's
  # do), calls Worker#work and ends.
  ready
  (0..).each do |i|
    Thread.new do
      Thread.current.name = "job-#{i}"
      Worker.new(i).work(i)
    end.join
    sleep 0.005
  end
when 'exit_when_told'
  # Works until a line comes on its stdin, then exits: while a client traces it, however
  # long the attach took on a loaded machine.
  w = Worker.new(1)
  told = false
  Thread.new { $stdin.gets; told = true }
  ready
  w.work(1) until told
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
when 'undumpable'
  # prctl(PR_SET_DUMPABLE, 0): only root may ptrace it, whoever runs it.
  require 'fiddle'
  prctl = Fiddle::Function.new(Fiddle::Handle::DEFAULT['prctl'], [Fiddle::TYPE_INT, Fiddle::TYPE_LONG], Fiddle::TYPE_INT)
  raise 'prctl failed' unless prctl.call(4, 0).zero?

  ready
  sleep
when 'csleep'
  # A C call Ruby cannot interrupt: libc's sleep(2) through Fiddle, which lets go of Ruby's lock
  # without an unblocking function. Each line says how many seconds sleep had left (non-zero:
  # a signal cut it short) and how long it took.
  require 'fiddle'
  csleep = Fiddle::Function.new(Fiddle::Handle::DEFAULT['sleep'], [Fiddle::TYPE_INT], Fiddle::TYPE_INT)
  ready
  loop do
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    left = csleep.call(2)
    puts "slept: #{left} left, #{(Process.clock_gettime(Process::CLOCK_MONOTONIC) - t).round(1)} s"
  end
when 'trap_chld'
  # The app traps SIGCHLD (and says so on stdout); SIGUSR1 makes it fork a child that exits at
  # once. Its main thread is idle in Queue#pop otherwise (the sleeping thread keeps Ruby from
  # calling that a deadlock).
  events = Queue.new
  Signal.trap('CHLD') { events << :chld }
  Signal.trap('USR1') { events << :usr1 }
  Thread.new { sleep }
  ready
  loop do
    case events.pop
    when :chld then puts 'CHLD'
    when :usr1 then Process.wait(fork { exit!(0) })
    end
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
  threads_calling_work(50, Thread)
when 'slow_names'
  # Threads whose #name lets other threads run (as any Ruby method may): the agent names a
  # thread when it first sees it, and the others come in meanwhile.
  class SlowName < Thread
    def name = (sleep(0.001)
                super)
  end
  threads_calling_work(20, SlowName)
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
when 'signatures'
  require 'io/wait'
  # Methods of every parameter shape, called in every way; what each call returns is checked
  # against the first round's, before any tracer came: a wrapper must bind arguments, blocks
  # and keywords exactly as the method itself does. "MISMATCH ..." if it ever does not.
  class Sig
    def req(a, b) = [a, b]
    def opt(a, b = 2, c = b + 1) = [a, b, c]
    def rest(a, *r) = [a, r]
    def post(a, b = :b, *r, c) = [a, b, r, c]
    def kw(a, k:, j: :j) = [a, k, j]
    def kwrest(a, k: 1, **o) = [a, k, o]
    def blk(a, &b) = [a, b&.call(a)]
    def yields(a) = [a, block_given? ? yield(a) : :none]
    def fwd(...) = req(...)
    def anon(a, &) = blk(a, &)
    def nokw(a, **nil) = [a]
    def last_hash(a, h = {}) = [a, h]
    def if(if:) = binding.local_variable_get(:if)
    def []=(k, v)
      @h = [k, v]
    end
    def +(o) = [:plus, o]
    def q? = :q
    private def priv(a) = [:priv, a]
    def calls_priv(a) = priv(a)
    protected def prot(a) = [:prot, a]
    def calls_prot(o, a) = o.prot(a)
    private def größe(a) = [:größe, a] # a name Ruby's C API cannot give: the wrapper goes the long way
    def calls_größe(a) = größe(a)
    def self.make = new
  end
  class SigChild < Sig
    def req(a, b) = [:child, super]
    def opt(a, b = 5, c = 6) = [:child, super(a)]
    def yields(a) = [:child, super]
  end
  calls = lambda do
    s = Sig.make
    c = SigChild.new
    [s.req(1, 2), s.opt(1), s.opt(1, 5), s.opt(1, 5, 7), s.rest(1), s.rest(1, 2, 3), s.post(1, 9),
     s.post(1, 2, 3, 4, 9), s.kw(1, k: 2), s.kw(1, k: 2, j: 3), s.kwrest(1), s.kwrest(1, k: 2, z: 3),
     s.blk(1) { |x| x * 10 }, s.blk(1), s.yields(1) { |x| x + 1 }, s.yields(1), s.fwd(1, 2),
     s.anon(1) { |x| -x }, s.nokw(1), s.last_hash(1, { x: 1 }), s.last_hash(1, x: 1), s.if(if: 3),
     (s[:k] = :v), s + 2, s.q?, s.calls_priv(1), s.calls_prot(s, 1), (s.priv(1) rescue :private), s.calls_größe(1),
     c.req(1, 2), c.opt(1), c.yields(1) { |x| x * 3 },
     Sig.public_instance_methods(false).sort, Sig.private_instance_methods(false).sort,
     Sig.protected_instance_methods(false).sort, Sig.new.public_methods.include?(:priv),
     %i[priv prot größe].map { |m| [s.private_methods.include?(m), s.protected_methods.include?(m), s.respond_to?(m)] }]
  end
  # A line on stdin asks what the process holds (no eval, whose thread would count too):
  # "probe [[Sig's, SigChild's methods, private methods, ancestors], hooks, RSS KiB, YJIT KiB,
  # transient heap KiB]". The last is Ruby 3.1's and 3.2's transient heap, a pool of 32 MiB
  # mapped at boot, for the small arrays, hashes and objects between two GCs: the pages of it
  # that were ever used stay resident (its busiest moment's). Ruby 3.3 has none.
  probe = lambda do
    GC.start
    y = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? && RubyVM::YJIT.runtime_stats
    theap = RUBY_VERSION < '3.3' &&
            File.read('/proc/self/smaps').split(/^(?=\h+-\h+ )/).find { |m| m.lines.first.split.size == 5 && m[/^Size:\s+(\d+)/, 1] == '32768' }
    [[Sig, SigChild].map { |c| [c.instance_methods(false).size, c.private_instance_methods(false).size, c.ancestors.size] },
     TracerAgent.stats[:hooks], File.read('/proc/self/status')[/VmRSS:\s+(\d+)/, 1].to_i,
     y ? (y[:code_region_size].to_i + y[:yjit_alloc_size].to_i) / 1024 : 0,
     theap ? theap[/^Rss:\s+(\d+)/, 1].to_i : 0]
  end
  baseline = calls.call
  ready
  rounds = 0
  loop do
    got = calls.call
    puts "MISMATCH #{baseline.zip(got).reject { |a, b| a == b }.inspect}" if got != baseline
    rounds += 1
    puts "rounds #{rounds}" if (rounds % 100).zero?
    puts "probe #{probe.call.inspect}" if $stdin.wait_readable(0) && $stdin.gets
    sleep 0.0005
  end
when 'late'
  # Definitions after a client attached: class Late once LATE_FILE exists, then, once
  # LATE_FILE2 exists, Late reloaded (a new class of the same name, as Rails reloading does)
  # and Worker#nap redefined (over the wrapper of a traced method), as `load` would.
  ready
  step = 0
  loop do
    if step.zero? && File.exist?(ENV.fetch('LATE_FILE'))
      eval "class Late; def hop = 1; end", TOPLEVEL_BINDING, '/srv/app/late.rb', 1 # rubocop:disable Security/Eval
      step = 1
      puts 'defined'
    elsif step == 1 && File.exist?(ENV.fetch('LATE_FILE2'))
      Object.send(:remove_const, :Late)
      eval "class Late; def hop = 2; end", TOPLEVEL_BINDING, '/srv/app/late.rb', 1 # rubocop:disable Security/Eval
      Worker.class_eval { def nap(s) = (sleep(s); :redefined) }
      step = 2
      puts 'redefined'
    end
    puts "hop #{Late.new.hop}" if step.positive? && rand < 0.01
    Worker.new(1).nap(0)
    sleep 0.002
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
when 'capture'
  # Keeps the Method objects of Worker#helper and #q? it takes (as an app keeps callbacks or
  # memoized handlers); once CALL_FILE exists, calls them all and says how it went.
  Worker.class_eval { def q? = true }
  w = Worker.new(1)
  caps = []
  ready
  loop do
    w.helper(1)
    w.q?
    caps << w.method(:helper) << w.method(:q?)
    caps.shift(2) if caps.size > 200_000
    if File.exist?(ENV.fetch('CALL_FILE'))
      File.delete(ENV.fetch('CALL_FILE'))
      begin
        caps.each { |m| m.arity == 1 ? m.call(1) : m.call }
        wrappers = caps.select { |m| m.owner.is_a?(TracerAgent::Wrappers) }
        puts "#{caps.size} captured methods work, #{wrappers.size} of them wrappers, " \
             "#{wrappers.map(&:unbind).uniq.size} different"
      rescue Exception => e # rubocop:disable Lint/RescueException -- whatever reached the app
        puts "a captured method raised #{e.class}: #{e.message}"
      end
    end
    sleep 0.001
  end
when 'finders'
  # Class methods from a module two classes extend (as ActiveRecord's find): -m names one.
  module Finders
    def find(x) = [name, x]
  end
  class Model
    extend Finders
  end
  class Issue < Model; end
  class Account < Model; end
  ready
  loop do
    Issue.find(1)
    Account.find(2)
    sleep 0.002
  end
when 'markup'
  # Methods named as markup that would run script where a page took a name for markup (each
  # sets window.__pwned), with a control, a C1 control and a bidi override too: Markup#run
  # calls each, which sleeps 2 ms, then Markup#spin, the hottest, which computes for 12 ms.
  markup = Class.new do
    define_method('<img src=x onerror=window.__pwned=1>') { sleep 0.002 }
    define_method('<script>window.__pwned=2</script>') { sleep 0.002 }
    define_method('"onload="window.__pwned=3" x="') { sleep 0.002 }
    define_method("ctl\e[31m\u0085\u202e") { sleep 0.002 }
    def spin
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 0.012
    end
    def run
      self.class.public_instance_methods(false).each { |n| public_send(n) unless %i[run spin].include?(n) }
      spin
    end
  end
  Object.const_set(:Markup, markup)
  m = Markup.new
  ready
  loop { m.run }
when 'lonely'
  # A module whose classes are all gone: Ruby 3.1 crashed when a module was prepended to it
  # then (its list of includers holds only its empty head). A loop calls its method with
  # bind_call, which keeps no class that includes it.
  module Lonely
    def lonely(x) = x + 1
  end
  3.times { Class.new { include Lonely } }
  GC.start
  GC.start
  ready
  loop do
    Lonely.instance_method(:lonely).bind_call(Object.new, 1)
    sleep 0.001
  end
when 'held'
  # A module's method taken with instance_method while it may be wrapped, and called later on an
  # object whose class never included the module (bind_call), as the app says: a line on stdin
  # takes it, the next calls it and prints what it returned.
  module Held
    def held(x) = x + 1
  end
  ready
  while $stdin.gets
    um = Held.instance_method(:held)
    puts "took #{um.owner}"
    $stdin.gets
    puts "held returned #{um.bind_call(Object.new, 1).inspect}"
  end
when 'many'
  # MANY methods (default 20,000) of the app's own, in classes of 25, defined in files under
  # the working directory as far as Ruby knows (what -f and --top calls wrap); a loop calls some.
  n = Integer(ENV.fetch('MANY', '20000'))
  classes = (0...(n / 25)).map do |c|
    Class.new.tap do |k|
      Object.const_set("Many#{c}", k)
      k.class_eval((0...25).map { |i| "def m#{i}(a) = a + #{i}\n" }.join, File.join(Dir.pwd, "generated/many#{c / 100}.rb"), 1)
    end
  end
  objs = classes.map(&:new)
  ready
  i = 0
  loop do
    objs[i % objs.size].m3(i)
    i += 1
    sleep 0.0005 if (i % 100).zero?
  end
when 'shapes'
  # A method of each shape, in a file under the working directory as far as Ruby knows: what
  # -f and --top calls find, by the heap's method entries or module by module (install_test).
  # Some are not the app's to find: a plain object's singleton method, a C function's, one
  # removed or undefined, a class's own under a prepended module's. An inherited method made
  # public in a subclass is the subclass's own on Ruby 3.2 and later.
  source = <<~RUBY
    module Shapes
      def self.single = 1
      class << self
        private def hidden_single = 2
      end
      def mixed = 3
    end
    class ShapesA
      include Shapes
      attr_reader :r
      attr_writer :w
      attr_accessor :rw
      def plain(a, k: 1) = a + k
      define_method(:made) { |x| x }
      alias_method :plain2, :plain
      alias plain3 plain
      protected def prot = 1
      private def priv = 2
      private :r
    end
    class ShapesB < ShapesA
      def plain(a, k: 1) = super
      public :priv
    end
    class ShapesC
      include Shapes
      define_method(:to_s, Object.instance_method(:to_s))
    end
    LONE = Object.new
    def LONE.lone = 1
    # Entries no longer their owner's, kept alive by an UnboundMethod: defined again with
    # another arity, defined again as a reader, removed, undefined. And a module prepended
    # over a class's own method: what the class's instances call is the module's.
    class ShapesA
      def redone = 0
      def later = 0
      def gone = 0
      def undone = 0
    end
    HELD = %i[redone later].map { |n| ShapesA.instance_method(n) }
    class ShapesA
      def redone(x) = x
      attr_reader :later
      remove_method :gone
      undef_method :undone
    end
    module ShapesPatch
      def over = 1
    end
    class ShapesD
      def over = 2
      def under = 3
      prepend ShapesPatch
    end
  RUBY
  eval(source, TOPLEVEL_BINDING, File.join(Dir.pwd, 'shapes.rb'), 1) # rubocop:disable Security/Eval
  ready
  loop do
    [ShapesA.new, ShapesB.new, ShapesC.new].each(&:mixed)
    ShapesB.new.plain(1)
    ShapesA.new.redone(1) + ShapesD.new.over + ShapesD.new.under
    ShapesA.new.later
    sleep 0.01
  end
when 'cpu'
  # Cpu#spin burns 30 ms of its thread's CPU time, Cpu#nap sleeps as long and burns next to none.
  cpu = Class.new do
    def spin
      t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
      nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - t < 0.03
    end

    def nap = sleep(0.03)
  end
  Object.const_set(:Cpu, cpu)
  c = Cpu.new
  ready
  loop do
    c.spin
    c.nap
  end
when 'gc'
  # Collects: Gc#full runs one major collection (GC.start), Gc#churn allocates enough for minor
  # ones. Gc#window returns how many collections began in it (GC.count's delta), and every one
  # of them also ends in it: none is under way when it starts (a GC.start just before), and its
  # last GC.start finishes the sweep of any other first. Gc#report shows that delta.
  gc = Class.new do
    def full = GC.start
    def churn = 200_000.times { +'x' * 2 }

    def window
      before = GC.count
      churn
      GC.start
      GC.count - before
    end

    def report(delta) = delta
  end
  Object.const_set(:Gc, gc)
  g = Gc.new
  ready
  loop do
    g.full
    g.churn
    GC.start
    g.report(g.window)
    sleep 0.005
  end
when 'hostile'
  # What a hostile app, or a remote client whose bytes an exception message carries, can put in
  # front of the operator: names, messages, a thread name and an inspect with terminal
  # controls, C1 controls, invalid UTF-8, a newline that would start a line of its own, a NUL.
  # And names that must stay apart and bounded: one that differs from a\0b after its NUL, a
  # byte that is no UTF-8 and the U+FFFD that would replace it, bidi controls and a line
  # separator, markup and quotes, two of a megabyte that differ in their middle.
  mega = 'L' * (1 << 19)
  others = ["a\0c", "bad\xff".b, "bad\uFFFD", "bidi\u202Eevil\u2066x\u2069\u200F", "ls\u2028x",
            "<script>alert('x')</script>\"", "#{mega}M#{mega}", "#{mega}N#{mega}"].map(&:to_sym)
  hostile = Class.new do
    define_method("run\n[1] FORGED \e[31mred") { explode rescue nil }
    define_method("a\0b") { nil }
    others.each { |name| define_method(name) { nil } }
    def explode = raise(ArgumentError, "bad \e]52;c;QQ==\a \u009b2J \xff".b + "\nnext \e[2J")
    def inspect = "#<Hostile \e]0;title\a \u009b>"
  end
  Object.const_set(:Hostile, hostile)
  Thread.current.name = "main\e[1m\u009b"
  h = Hostile.new
  ready
  loop do
    h.public_send("run\n[1] FORGED \e[31mred")
    h.public_send("a\0b")
    others.each { |name| h.public_send(name) }
    sleep 0.005
  end
else
  abort "unknown mode #{mode}"
end
