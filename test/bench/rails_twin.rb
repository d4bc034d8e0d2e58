# frozen_string_literal: true
#
# rails_twin.rb: what a session costs one Redmine worker per request while attached and after
# detach, measured in the worker against an untraced twin. rails.rb's windows of wrk load move
# by 20% or more on a shared machine from one window to the next (docs/performance.md), which is
# the size of the question (0.9x attached, 0.98x after). Here the noise mostly cancels out:
#
# - two workers of one server (forked from the same preloaded app): B is traced, A never is;
# - each worker runs the same requests in a thread of its own (Rails.application.call on the
#   pages load.lua asks for most, no network, no Apache, no wrk) with GC off while it runs, and
#   measures its process's CPU time (its threads and the agent's I/O thread);
# - both run at once, each pinned to its own CPU, and the CPUs are swapped every round (the two
#   CPUs of this machine differ in speed by up to 30%): a pair of rounds gives one ratio B/A;
# - each phase's figure is the median of its pairs' ratios, divided by before's.
#
#   ruby -Ilib test/bench/rails_twin.rb     (make bench-ruby runs it after rails.rb)
#
# Phases: before (no session yet), then for each of --top calls, --top time, -f, --profile at 100
# Hz and 1 kHz (CPU) and 100 Hz (wall), and stackprof in B at 100 Hz and 1 kHz (B alone):
# attached, then after its detach; last, after BENCH_TWIN_MORE more sessions of those and -s. Also the
# objects allocated per request (B's and A's), which no session should change.
# Knobs: BENCH_TWIN_ROUNDS (rounds per phase, 16), BENCH_TWIN_REPEAT (times each page is asked
# for per round, 3), BENCH_TWIN_MORE (the sessions before the last phase, 20; 97 makes it the
# phase after 100), BENCH_TWIN_MODES (the phases' labels, comma-separated). Progress goes to
# stderr, the table to stdout.
require 'rbconfig'
require 'tmpdir'
require_relative '../../examples/redmine/measure'

module RailsTwin
  ROOT = File.expand_path('../..', __dir__)
  TRACER = File.join(ROOT, 'client', 'tracer')
  RUBY = ENV['RUBY'] || RbConfig.ruby
  ROUNDS = [Integer(ENV['BENCH_TWIN_ROUNDS'] || 16) / 2 * 2, 2].max
  REPEAT = Integer(ENV['BENCH_TWIN_REPEAT'] || 3)
  MORE_SESSIONS = Integer(ENV['BENCH_TWIN_MORE'] || 20)
  PAGES = %w[/projects/tracer-p01/issues /issues/5 /projects/tracer-p02 /projects /issues/150
             /projects/tracer-p03/wiki /projects/tracer-p05/activity].freeze
  ALL_MODES = {
    '--top calls' => [%w[--top calls --interval 0.5 --json --rows 5], :top],
    '--top time' => [%w[--top time --interval 0.5 --json --rows 5], :top],
    '-f -o FILE.zst' => [->(dir) { ['-f', '--filter', "#{RedmineLoad::APP_DIR}/", '-o', File.join(dir, 'trace.log.zst')] }, :trace],
    # The sampling profiler, and stackprof in the same worker at the same rates (started and
    # stopped through tracer -e, so it costs the worker what it costs an app that runs it).
    '--profile 100 Hz' => [%w[--profile --hz 100 --interval 1 --json --rows 5], :trace],
    '--profile 1 kHz' => [%w[--profile --hz 1000 --interval 1 --json --rows 5], :trace],
    '--profile wall 100' => [%w[--profile wall --hz 100 --interval 1 --json --rows 5], :trace],
    'stackprof 100 Hz' => [10_000, :stackprof],
    'stackprof 1 kHz' => [1000, :stackprof],
  }.freeze
  # BENCH_TWIN_MODES: the labels to run, separated by commas (default: all).
  MODES = ALL_MODES.slice(*(ENV['BENCH_TWIN_MODES']&.split(',')&.map(&:strip) || ALL_MODES.keys)).freeze
  MORE = [%w[--top calls], %w[--top time], ['-f', '--filter', "#{RedmineLoad::APP_DIR}/", '-o', :file],
          ['-s', '50', '--filter', "#{RedmineLoad::APP_DIR}/"]].freeze
  ROW = '%-18s %-30s %9s  %-24s %s'

  def self.log(msg) = warn("[twin] #{msg}")

  # What each worker runs, once, through tracer -e: a thread that waits for DIR/go-PID, runs the
  # pages and writes DIR/res-PID: "ms-per-request objects-per-request minor-faults requests".
  def self.thread_code(dir)
    <<~RUBY
      Thread.new do
        Thread.current.name = 'tracer-bench'
        go, res = #{dir.dump} + "/go-\#{Process.pid}", #{dir.dump} + "/res-\#{Process.pid}"
        faults = -> { File.read('/proc/self/stat').split(') ').last.split[7].to_i }
        app = Rails.application
        loop do
          sleep 0.01 until File.exist?(go)
          File.delete(go)
          begin
            GC.start
            GC.disable
            f0, a0, t0 = faults.(), GC.stat(:total_allocated_objects), Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
            n = 0
            #{REPEAT}.times do
              #{PAGES.inspect}.each do |page|
                status, _, body = app.call(Rack::MockRequest.env_for(page, 'HTTP_HOST' => 'localhost'))
                body.close if body.respond_to?(:close)
                raise "\#{page}: \#{status}" unless status == 200
                n += 1
              end
            end
            t = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - t0
            line = [t * 1000 / n, (GC.stat(:total_allocated_objects) - a0) / n, faults.() - f0, n].join(' ')
          rescue Exception => e
            line = "error \#{e.class}: \#{e.message}"
          ensure
            GC.enable
            ActiveRecord::Base.connection_pool.release_connection if defined?(ActiveRecord::Base)
          end
          File.write(res + '.tmp', line)
          File.rename(res + '.tmp', res)
        end
      end
      :started
    RUBY
  end

  class Twin
    attr_reader :a, :b

    def initialize(server, dir)
      @a, @b = server.workers.first(2)
      @dir = dir
      code = RailsTwin.thread_code(dir)
      [@a, @b].each do |w|
        out, st = Open3.capture2e(TRACER, '-p', w.to_s, '-e', code, '--timeout', '30')
        raise "worker #{w}: the bench thread did not start: #{out.inspect}" unless st.success? && out.include?(':started')
      end
    end

    def pin(pid, cpus)
      system('taskset', '-a', '-p', '-c', cpus.to_s, pid.to_s, out: File::NULL) or raise "taskset #{pid} #{cpus}: failed"
    end

    # Back to every CPU this process may use.
    def unpin = [@a, @b].each { |w| pin(w, RailsTwin.cpus.join(',')) }

    # One round: both workers run the pages at once, A on CPU swap, B on the other. Returns
    # [[ms, objects, faults] of A, the same of B].
    def round(swap)
      two = RailsTwin.cpus.first(2)
      pin(@a, two[swap])
      pin(@b, two[1 - swap])
      [@a, @b].each { |w| File.write(File.join(@dir, "go-#{w}"), '') }
      deadline = RedmineLoad.now + 180
      [@a, @b].map do |w|
        res = File.join(@dir, "res-#{w}")
        until File.exist?(res)
          raise "worker #{w}: no result within 180 s" if RedmineLoad.now > deadline

          sleep 0.02
        end
        line = File.read(res)
        File.delete(res)
        raise "worker #{w}: #{line.inspect}" if line.start_with?('error')

        line.split.first(3).map { |x| Float(x) }
      end
    end

    # A phase: ROUNDS rounds. Returns the pairs' ratios of B's CPU per request to A's, and the
    # medians of each worker's objects per request and faults.
    def phase
      rs = (0...ROUNDS).map { |i| round(i % 2) }
      ratios = rs.each_slice(2).map { |(a1, b1), (a2, b2)| Math.sqrt((b1[0] / a1[0]) * (b2[0] / a2[0])) }
      { ratios: ratios, ms: RailsTwin.median(rs.map { |_, b| b[0] }), objects: rs.map { |a, b| [b[1], a[1]] },
        faults: RailsTwin.median(rs.map { |_, b| b[2] }) }
    end
  end

  # The CPUs this process may run on (/proc/self/status: Cpus_allowed_list, such as 0-1,4).
  def self.cpus
    @cpus ||= File.read('/proc/self/status')[/^Cpus_allowed_list:\s*(\S+)/, 1].split(',').flat_map do |r|
      a, b = r.split('-').map { |x| Integer(x) }
      (a..(b || a)).to_a
    end
  end

  def self.median(xs) = RedmineLoad.median(xs)

  def self.quartiles(xs)
    xs = xs.sort
    [xs[(xs.size - 1) / 4], xs[(3 * (xs.size - 1) + 3) / 4]]
  end

  # Starts a session on pid and waits until it is in place; returns the client.
  def self.attach(pid, args, kind)
    client = RedmineLoad::Client.new(TRACER, ['-p', pid.to_s, *args, '--timeout', '60'])
    deadline = RedmineLoad.now + 90
    until kind == :top ? client.text(:out).include?(RedmineLoad::APP_DIR) : client.text(:err) =~ /attached to process #{pid}\b/
      raise "tracer #{args.join(' ')}: not in place within 90 s:\n#{client.text(:err)}" if !client.alive? || RedmineLoad.now > deadline

      sleep 0.05
    end
    client
  end

  # stackprof, cpu mode, every interval_us, started in the worker (outside the bundle: its
  # paths given); the returned object stops it.
  def self.stackprof(pid, interval_us)
    paths = Gem::Specification.find_by_name('stackprof').full_require_paths
    eval_in(pid, "$LOAD_PATH.unshift(*#{paths.inspect}); require 'stackprof'; " \
                 "StackProf.start(mode: :cpu, interval: #{interval_us}, raw: false) && :started")
    Struct.new(:pid) do
      def stop = RailsTwin.eval_in(pid, 'StackProf.stop; StackProf.results && :started')
    end.new(pid)
  end

  def self.eval_in(pid, code)
    out, st = Open3.capture2e(TRACER, '-p', pid.to_s, '-e', code, '--timeout', '30')
    raise "worker #{pid}: #{code}: #{out.inspect}" unless st.success? && out.include?(':started')
  end

  def self.detach(client)
    return client.stop unless client.respond_to?(:signal)

    client.signal('INT')
    st = client.finish(60)
    raise "tracer: exit #{st.exitstatus}:\n#{client.text(:err)}" unless st.success?
  end

  def self.row(label, fig, base)
    lo, hi = quartiles(fig[:ratios])
    m = median(fig[:ratios])
    objects = fig[:objects].transpose.map { |xs| median(xs).round }
    format(ROW, label, format('%.3f (%.3f-%.3f)', m, lo, hi), base ? format('%.3fx', m / base) : '1.000x',
           format('%d, %d', *objects), format('%.0f ms; %d faults', fig[:ms], fig[:faults]))
  end

  def self.run
    env = { 'RUBY' => RUBY }
    if cpus.size < 2
      puts "rails-twin: no rows: the twins run at once on two CPUs, and this process may use #{cpus.size}"
      return
    end
    begin
      RedmineLoad::Server.setup(env)
    rescue RuntimeError => e
      raise unless (why = RedmineLoad.unable(e))

      puts "rails-twin: no rows: #{why}"
      return
    end
    server = RedmineLoad::Server.new(env, workers: 2)
    log "serving on #{server.port}, workers #{server.workers.join(' ')}; warming up"
    server.warm
    Dir.mktmpdir('tracer-twin') do |dir|
      st = File.stat("/proc/#{server.workers.first}")
      File.chown(st.uid, st.gid, dir) if Process.uid.zero?
      twin = Twin.new(server, dir)
      begin
        version = `#{RUBY} -e 'print RUBY_DESCRIPTION'`
        served = server.kind == 'puma' ? 'Puma' : 'Apache + Passenger'
        puts "rails-twin: Redmine, #{served}, 2 workers of #{version}: B traced, A its untraced twin, both running the same " \
             "#{PAGES.size * REPEAT} requests at once in a thread of each, each on a CPU of its own, swapped every round"
        puts "rails-twin: #{ROUNDS} rounds per phase; B/A: B's CPU per request to A's, median of each pair of rounds " \
             '(quartiles); to before: that over before\'s (1/x is the requests/s ratio)'
        puts format(ROW, 'phase', 'B/A CPU per request', 'to before', 'objects/request B, A', 'B')
        log 'before'
        before = twin.phase
        base = median(before[:ratios])
        puts row('before', before, nil)
        $stdout.flush
        MODES.each do |label, (args, kind)|
          Dir.mktmpdir('tracer-twin-trace') do |tdir|
            args = args.respond_to?(:call) ? args.(tdir) : args
            log "#{label}: attached"
            client = kind == :stackprof ? stackprof(twin.b, args) : attach(twin.b, args, kind)
            fig = twin.phase
            detach(client)
            puts row(label, fig, base)
            log "#{label}: after"
            puts row('  after detach', twin.phase, base)
            $stdout.flush
          end
        end
        log "#{MORE_SESSIONS} more sessions"
        MORE_SESSIONS.times do |i|
          args = MORE[i % MORE.size].map { |a| a == :file ? File.join(dir, "more-#{i}.log") : a }
          _, err, st = Open3.capture3(TRACER, '-p', twin.b.to_s, *args, '--duration', '0.3', '--timeout', '60')
          raise "session #{i}: #{err}" unless st.success? || st.exitstatus == 1 && err.include?('no row')
        end
        puts row("after #{MODES.size + MORE_SESSIONS} sessions", twin.phase, base)
      ensure
        twin.unpin
      end
    end
  ensure
    server&.stop
  end
end

RailsTwin.run if $PROGRAM_NAME == __FILE__
