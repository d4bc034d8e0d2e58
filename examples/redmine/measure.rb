# measure.rb: what a tracer session costs the Redmine of examples/redmine under wrk's load, in
# the same server processes: requests/s and latency before the command, during the attach
# (from the command until tracing is in place in every worker), while attached, and after
# detach; how long the install took; how long the workers took to answer a client again.
# test/integration/rails_test.rb asserts on these figures, test/bench/rails.rb prints them.
require 'open3'
require 'json'
require_relative 'wrk'

module RedmineLoad
  HERE = __dir__
  APP_DIR = '/usr/share/redmine'

  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

  # setup, serve and stop, for a Ruby (env: RUBY and what that Ruby needs, as common.sh reads it).
  class Server
    attr_reader :port, :master, :workers

    # examples/redmine/setup; raises with its output when it fails (a package it could not
    # install, not being root: setup says which and why).
    def self.setup(env)
      setup = File.join(HERE, 'setup')
      out, status = Open3.capture2e(env, [setup, setup]) # a lone string would be split at a space in the path
      raise "examples/redmine/setup failed:\n#{out}" unless status.success?

      out
    end

    def initialize(env, workers: 4)
      @env = env
      r, w = IO.pipe
      serve = File.join(HERE, 'serve')
      pid = Process.spawn(env.merge('WORKERS' => workers.to_s), [serve, serve], out: w, err: w, in: File::NULL)
      w.close
      # Should this process end while serve waits for the workers, serve stops what it started.
      at_exit { Process.kill('TERM', pid) rescue nil } # rubocop:disable Style/RescueModifier
      out = r.read
      r.close
      _, status = Process.wait2(pid)
      raise "examples/redmine/serve failed:\n#{out}" unless status.success?

      @port = Integer(out[/^port (\d+)$/, 1])
      @kind, pid = out[/^server (.*)$/, 1].split
      @master = Integer(pid)
      @workers = out[/^workers (.*)$/, 1].split.map { |p| Integer(p) }
      @regex = out[/^ps (.*)$/, 1]
      @log = out
    end

    # What served: "apache" (Apache and Passenger) or "puma" (where Passenger could not start:
    # serve says why), and serve's notes.
    attr_reader :kind, :log

    # What --ps matches: this server's workers, not another's (Passenger titles them by their
    # app group, tracer-redmine-PORT; Puma by its tag, the same).
    attr_reader :regex

    def stop
      return if @stopped

      out, status = Open3.capture2e(@env, File.join(HERE, 'stop'), @port.to_s)
      @stopped = true
      raise "examples/redmine/stop #{@port} failed:\n#{out}" unless status.success?
    end

    # Load until the workers are warm: a fresh worker spends seconds on its first requests of
    # each page (templates, caches), so the first figures would be far from the rest. Windows
    # of 5 s until the workers' CPU per request is within 20% of the window before's, at most
    # max seconds. Returns the windows' figures.
    def warm(max: 90)
      cookie = RedmineLoad.login(@port)
      deadline = RedmineLoad.now + max
      windows = []
      loop do
        windows << RedmineLoad.load(self, 5, cookie)
        a, b = windows.last(2).map { |w| w[:cpu_ms] }
        break if windows.size >= 2 && a && b && (a - b).abs <= 0.2 * a
        break if RedmineLoad.now > deadline
      end
      windows
    end

    # How many methods the app-wide modes would wrap in worker (the agent's own list of the
    # app's methods under /usr/share/redmine, asked with tracer -e), or nil. What the count
    # leaves in the agent (the modules found to have none of the app's methods) is forgotten,
    # so that the worker's first session finds as it would have.
    def app_methods(tracer, worker = @workers.first)
      code = "w = TracerAgent::Wrap; n = w.modules.sum { |m| w.app_methods_of(m, ['#{APP_DIR}/'], '#{APP_DIR}/', nil).size / 6 }; w.found_all; w::NONE_OF_THE_APPS.clear; n"
      out, status = Open3.capture2e(tracer, '-p', worker.to_s, '-e', code, '--timeout', '30')
      status.success? ? Integer(out[/=> (\d+)/, 1]) : nil
    end

    # The workers' CPU time (utime + stime), in seconds.
    def cpu
      tick = 100.0 # USER_HZ
      @workers.sum do |pid|
        f = File.read("/proc/#{pid}/stat").split(') ', 2).last.split
        (Integer(f[11]) + Integer(f[12])) / tick
      rescue SystemCallError
        0
      end
    end
  end

  # One tracer command, output read as it comes.
  class Client
    attr_reader :pid, :out, :err, :started

    def initialize(tracer, args)
      @out, @err = +'', +''
      @lock = Mutex.new
      @started = RedmineLoad.now
      @stdin, o, e, @wait = Open3.popen3(tracer, *args.map(&:to_s))
      @stdin.close
      @pid = @wait.pid
      @readers = [[o, @out], [e, @err]].map do |io, buf|
        Thread.new { io.each_line { |l| @lock.synchronize { buf << l } } }
      end
    end

    def text(stream) = @lock.synchronize { (stream == :out ? @out : @err).dup }
    def alive? = @wait.alive?

    def signal(sig)
      Process.kill(sig, @pid)
    rescue Errno::ESRCH
      nil
    end

    def finish(within)
      unless @wait.join(within)
        signal('KILL')
        @wait.join
      end
      @readers.each { |t| t.join(5) }
      @wait.value
    end
  end

  # The figures of one session: tracer ARGS (the command as an operator types it, with
  # --duration DURATION, which must outlast the attached window) against server's workers.
  #   kind: :top (in place = the first row of the app's methods, --json lines on stdout) or
  #         :trace (in place = attached to every worker)
  #   window: seconds of load for before, attached and after
  #   limit: seconds the install may take before the session is given up
  # duration nil: the command has no --duration, and is sent SIGINT (^C) after the attached window.
  # Returns a Hash: :before, :during, :attached, :after (wrk's figures, RedmineLoad::Wrk.parse,
  # plus :cpu_ms, the workers' CPU per request), :rows (s from the command to the first row, or
  # nil), :all_attached (s to the last worker's "attached"), :exited (s from in place to the
  # client's exit), :answer (s until every worker answered `tracer -e` after), :status, :out,
  # :err (the client's), :notes (what went wrong, in words).
  def self.session(server, tracer, args, kind:, window:, limit:, duration:, connections: 8, log: ->(_) {})
    fig = { notes: [] }
    cookie = login(server.port)
    fig[:before] = load(server, window, cookie, connections)
    log.("before: #{line(fig[:before])}")

    during = Wrk.new(server.port, seconds: limit + (duration || window) + 60, cookie: cookie, connections: connections)
    cpu0 = server.cpu
    client = Client.new(tracer, args)
    t0 = client.started
    attached = ->(c) { server.workers.all? { |w| c.text(:err) =~ /attached to process #{w}\b/ } }
    seen = 0 # --json lines already looked at
    row = lambda do |c|
      lines = c.text(:out).lines.select { |l| l.end_with?("\n") }
      fresh = lines[seen..] || []
      seen = lines.size
      fresh.any? do |l|
        (JSON.parse(l)['rows'] || []).any? { |r| r['file'].to_s.start_with?("#{APP_DIR}/") }
      rescue JSON::ParserError
        false
      end
    end
    deadline = t0 + limit
    loop do
      fig[:all_attached] ||= (now - t0 if attached.(client))
      fig[:rows] ||= (now - t0 if kind == :top && row.(client))
      break if fig[:all_attached] && (kind != :top || fig[:rows])
      break if now > deadline || !client.alive?

      sleep 0.02
    end
    in_place = fig[:all_attached] && t0 + fig[:all_attached]
    fig[:notes] << "not in place in every worker within #{limit} s" unless in_place
    # The during window ends once tracing is in place, and after long enough for a request the
    # install held up to finish (wrk drops what is still in flight when it stops).
    grace = (2 * (fig[:before][:p99] || 0) / 1000.0).clamp(0.5, 5.0)
    stop_at = (in_place || now) + grace
    sleep 0.02 while now < stop_at
    during.stop
    fig[:during] = during.result(within: 60)
    fig[:notes] << 'wrk did not end after SIGINT: the during figures are lost' if fig[:during][:lost]
    if fig[:during][:requests].zero?
      # No request ended while it attached: each one took at least the window, which is then
      # the latency figures' lower bound (wrk has none to give).
      fig[:during][:p50] = fig[:during][:p99] = fig[:during][:max] = fig[:during][:seconds] * 1000
      fig[:notes] << format('no request ended in the %.0f s of the attach: its latencies are that, at least', fig[:during][:seconds])
    end
    fig[:during][:cpu_ms] = cpu_ms(server.cpu - cpu0, fig[:during][:requests])
    log.("during (#{format('%.1f', now - t0)} s): #{line(fig[:during])}")

    if client.alive?
      fig[:attached] = load(server, window, cookie, connections)
      log.("attached: #{line(fig[:attached])}")
      fig[:notes] << 'the client ended before the attached window did (--duration counted the install?)' unless client.alive?
    else
      fig[:notes] << 'the client ended before the attached window'
    end
    client.signal('INT') if duration.nil? # detach now
    fig[:status] = client.finish((duration || 0) + limit + 30)
    fig[:exited] = in_place && (now - in_place)
    fig[:out] = client.text(:out)
    fig[:err] = client.text(:err)

    t1 = now
    fig[:stats] = {}
    server.workers.each do |w|
      out, _, st = Open3.capture3(tracer, '-p', w.to_s, '-e', STATS, '--timeout', '60')
      fig[:notes] << "worker #{w} did not answer -e after detach" unless st.success?
      fig[:stats][w] = out.strip
    end
    fig[:answer] = now - t1
    fig[:after] = load(server, window, cookie, connections)
    log.("after: #{line(fig[:after])}")
    fig
  ensure
    during&.kill
    client&.signal('KILL') if client&.alive?
  end

  # What each worker says of the session it saw, after detach (fig[:stats], for a failure's report).
  STATS = 'TracerAgent.stats.slice(:found_by, :found, :longest_step_ms)'

  def self.load(server, seconds, cookie, connections = 8)
    cpu0 = server.cpu
    r = Wrk.new(server.port, seconds: seconds, cookie: cookie, connections: connections).result(within: seconds + 120)
    r[:cpu_ms] = cpu_ms(server.cpu - cpu0, r[:requests])
    r
  end

  def self.cpu_ms(cpu, requests) = requests.zero? ? nil : cpu * 1000.0 / requests

  # Why no Redmine can run on this Ruby (native-gems' sentence, from setup's failure e), or nil
  # when e failed for another reason.
  def self.unable(e) = e.message[/native-gems: (Redmine cannot run on Ruby .*)/, 1]

  # The median of xs, nils left out; nil for none.
  def self.median(xs)
    xs = xs.compact.sort
    return nil if xs.empty?

    xs.size.odd? ? xs[xs.size / 2] : (xs[xs.size / 2 - 1] + xs[xs.size / 2]) / 2.0
  end

  # The figures as rows: phase, requests/s, its ratio to before, p50, p99, max, CPU per request.
  def self.table(fig)
    base = fig[:before][:rps]
    rows = %i[before during attached after].filter_map do |ph|
      r = fig[ph] or next
      format('  %-9s %7.2f requests/s %6s  p50 %6.0f ms  p99 %6.0f ms  max %6.0f ms  %6s ms CPU/request  %4d requests in %5.1f s, %d not 200',
             ph, r[:rps], base.positive? ? format('%.2fx', r[:rps] / base) : '-', r[:p50] || 0, r[:p99] || 0,
             r[:max] || 0, r[:cpu_ms] ? format('%.0f', r[:cpu_ms]) : '-', r[:requests], r[:seconds], r[:not200] + r[:errors])
    end
    rows << format('  rows: %s, every worker attached: %s, client exited %s after that (%s), workers answered -e in %.1f s',
                   fig[:rows] ? format('%.1f s', fig[:rows]) : 'none', fig[:all_attached] ? format('%.1f s', fig[:all_attached]) : 'never',
                   fig[:exited] ? format('%.1f s', fig[:exited]) : '-', fig[:status].inspect, fig[:answer] || -1)
    rows.concat(fig[:notes].map { |n| "  note: #{n}" })
    rows.join("\n")
  end
end
