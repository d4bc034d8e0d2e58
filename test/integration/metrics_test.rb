# metrics_test.rb: --metrics: the --top table served over HTTP, scraped by a real Prometheus, and
# the server's bounds, from raw sockets.
require_relative 'helper'
require 'fileutils'
require 'net/http'
require 'pty'
require 'socket'
require 'uri'

class MetricsTest < Minitest::Test
  include TracerTest

  TICK = 'tracer_method_calls_total{method="Burst#tick"'
  APP = File.join(ROOT, 'test', 'apps', 'top_target.rb') # top_test.rb's bursts of known work
  REL = 'test/apps/top_target.rb' # APP as served: relative to the targets' working directory

  def setup
    super
    @dir = Dir.mktmpdir('tracer-metrics-test')
    @go = File.join(@dir, 'go')
    @prometheus = nil
  end

  def teardown
    if @prometheus
      waiter = Process.detach(@prometheus)
      Process.kill('TERM', @prometheus) rescue nil # rubocop:disable Style/RescueModifier
      waiter.join(WAIT) or (Process.kill('KILL', @prometheus) && waiter.join)
    end
    super
    FileUtils.rm_rf(@dir)
  end

  def line_of(mark)
    @lines ||= File.readlines(APP)
    1 + (@lines.index { |l| l.include?("# #{mark}") } or raise "no # #{mark} in #{APP}")
  end

  N = 1234 # objects of each kind top_target.rb's allocation burst makes

  def app(mode) = target(mode, env: { 'GO' => @go, 'N' => N.to_s }, script: APP)

  # A port nothing listens on now (the kernel's pick; free again once closed).
  def free_port
    s = TCPServer.new('127.0.0.1', 0)
    s.addr[1]
  ensure
    s&.close
  end

  # Bytes sent as they are; everything the server answers until it closes.
  def raw(port, text)
    TCPSocket.open('127.0.0.1', port) do |s|
      s.write(text)
      s.read
    end
  end

  # GET /metrics: [status, headers, body].
  def get(port, path = '/metrics', headers = {})
    res = Net::HTTP.start('127.0.0.1', port, open_timeout: WAIT, read_timeout: WAIT) do |h|
      h.get(path, headers)
    end
    [res.code.to_i, res.to_hash, res.body]
  end

  def scrape(port) = get(port)[2]

  # One response read off a connection kept open: [head, body] (no body for a HEAD).
  def response(sock, head_only: false)
    head = +''
    head << sock.readpartial(1) until head.end_with?("\r\n\r\n") # no byte of the next one
    len = head_only ? 0 : Integer(head[/^Content-Length: (\d+)\r$/, 1])
    [head, len.zero? ? '' : sock.read(len)]
  end

  # Whether the server closed sock (its end read), without waiting.
  def closed?(sock)
    sock.read_nonblock(1)
    false
  rescue EOFError, Errno::ECONNRESET
    true
  rescue IO::WaitReadable
    false
  end

  # The value of the first sample whose line starts with prefix in a scrape, or nil.
  def value(body, prefix)
    line = body.lines.find { |l| l.start_with?(prefix) } or return nil
    Float(line.split.last)
  end

  # The sum of every sample whose line starts with prefix (a series per process), or nil.
  def total(body, prefix)
    lines = body.lines.select { |l| l.start_with?(prefix) }
    lines.empty? ? nil : lines.sum { |l| Float(l.split.last) }
  end

  # A row's site and process labels, as served for target t.
  def site(t, mark) = "file=\"#{REL}\",line=\"#{line_of(mark)}\",pid=\"#{t.pid}\",app=\"#{ROOT}\""

  # promtool check metrics on an OpenMetrics body: Prometheus 2.42's promtool lints the text
  # format only, which names a counter's family with _total; it reads OpenMetrics' families
  # (named without it) and _created samples as samples without # HELP. Those complaints, for
  # families the body describes, are all it may make.
  def assert_promtool_openmetrics(body)
    out, = Open3.capture2e('promtool', 'check', 'metrics', stdin_data: body)
    helped = body.scan(/^# HELP (\S+) /).flatten
    rest = out.lines.reject do |l|
      (m = l.match(/\A(\S+)_(total|created) no help text\n\z/)) && helped.include?(m[1])
    end
    assert_equal [], rest, "promtool check metrics on OpenMetrics:\n#{out}"
  end

  # tracer --top MODE --metrics on a free port for targets; waits until each one's hooks are
  # on (tracer_targets says so), so that a burst started then is counted whole.
  def serve(targets, *extra, mode: 'calls', attached: Array(targets).size)
    port = free_port
    pids = Array(targets).flat_map { |t| ['-p', t.pid] }
    c = client(*pids, '--top', mode, '--interval', '0.2', '--metrics', "127.0.0.1:#{port}", *extra)
    wait_until(message: "#{attached} targets attached on :#{port}") do
      (value(scrape(port), 'tracer_targets') rescue nil) == attached # rubocop:disable Style/RescueModifier
    end
    [c, port]
  end

  def burst(targets)
    FileUtils.touch(@go)
    Array(targets).each { |t| t.wait_for(/^done$/) }
  end

  def stop(c)
    c.signal('TERM')
    c.finish
  end

  # ---- without Prometheus ----

  def test_counts_served_as_counters_and_promtool_finds_them_clean
    t = app('calls')
    c, port = serve(t)
    burst(t)
    tick = "#{TICK},#{site(t, 'TICK')}} 10000\n"
    wait_until(message: 'Burst#tick 10000') { scrape(port).include?(tick) }
    status, headers, body = get(port)
    assert_equal 200, status
    assert_equal ['text/plain; version=0.0.4; charset=utf-8'], headers['content-type']
    assert_includes body, "# TYPE tracer_method_calls_total counter\n"
    assert_includes body, "# TYPE tracer_targets gauge\ntracer_targets 1\n"
    assert_includes body, "tracer_events_lost_total{cause=\"full\",pid=\"#{t.pid}\",app=\"#{ROOT}\"} 0\n"
    File.write(File.join(@dir, 'scrape.txt'), body)
    out, st = Open3.capture2e('promtool', 'check', 'metrics', stdin_data: body)
    assert st.success?, "promtool check metrics:\n#{out}\n#{body}"
    assert_equal '', out

    status, headers, om = get(port, '/metrics', 'Accept' => 'application/openmetrics-text;version=1.0.0,text/plain;q=0.5')
    assert_equal 200, status
    assert_equal ['application/openmetrics-text; version=1.0.0; charset=utf-8'], headers['content-type']
    assert_includes om, "# TYPE tracer_method_calls counter\n"
    assert_includes om, tick
    assert_match(/^tracer_method_calls_created\{method="Burst#tick",#{Regexp.escape(site(t, 'TICK'))}\} \d+\.\d{3}$/, om)
    assert om.end_with?("\n# EOF\n"), om
    assert_promtool_openmetrics(om)
    status = stop(c)
    assert status.success?, "exit #{status.exitstatus}: #{c.err}"
    assert_equal '', c.out, 'nothing on stdout: the table is served, not printed'
  end

  def test_hostile_method_name_stays_in_its_label
    t = app('hostile')
    c, port = serve(t)
    burst(t)
    # The value is the name as the trace shows it (evil"quote\\back\nline), in the format's escapes.
    want = "tracer_method_calls_total{method=\"Burst#evil\\\"quote\\\\\\\\back\\\\nline\"," \
           "#{site(t, 'HOSTILE')}} 3\n"
    wait_until(message: "the hostile method's line") { scrape(port).include?(want) }
    out, st = Open3.capture2e('promtool', 'check', 'metrics', stdin_data: scrape(port))
    assert st.success?, out
    assert_promtool_openmetrics(get(port, '/metrics', 'Accept' => 'application/openmetrics-text')[2])
    stop(c)
  end

  def test_rows_beyond_rows_sum_into_other
    t = app('calls')
    c, port = serve(t, '--rows', '1')
    burst(t)
    wait_until(message: 'the tick row') { value(scrape(port), TICK) == 10_000 }
    body = scrape(port)
    assert_equal 2, body.lines.grep(/^tracer_method_calls_total/).size, body
    assert_includes body, "tracer_method_calls_total{method=\"(other)\",pid=\"#{t.pid}\",app=\"#{ROOT}\"} 1\n" # Burst#initialize
    stop(c)
  end

  # Other modes, other families: allocations by class and line (and --gc's), raises by class.
  def test_allocation_families_and_gc
    t = app('objects')
    c, port = serve(t, '--gc', mode: 'objects')
    burst(t)
    widget = "tracer_allocations_total{class=\"Widget\",#{site(t, 'WIDGET')}} #{N}\n"
    wait_until(message: "#{N} Widgets") { scrape(port).include?(widget) }
    body = scrape(port)
    assert_match(/^tracer_gc_collections_total\{kind="minor",pid="#{t.pid}",app="#{ROOT}"\} \d+$/, body)
    assert_match(/^tracer_gc_pause_seconds_total\{pid="#{t.pid}",app="#{ROOT}"\} \d+\.\d{9}$/, body)
    stop(c)
  end

  def test_exception_families
    e = app('exceptions')
    c, port = serve(e, mode: 'exceptions')
    burst(e)
    key = "tracer_exceptions_total{class=\"KeyError\",#{site(e, 'RAISE_KEY')}} 3\n"
    arg = "tracer_exceptions_total{class=\"ArgumentError\",#{site(e, 'RAISE_ARGUMENT')}} 2\n"
    wait_until(message: 'the raises') { (b = scrape(port)).include?(key) && b.include?(arg) }
    stop(c)
  end

  # --ps: workers found later count; one that exits keeps its counts; nothing is reset.
  def test_ps_workers_come_and_go_and_counts_stay
    tag = "metrics#{Process.pid}x#{rand(1 << 30)}"
    a = app("calls@#{tag}")
    c, port = serve([], '--ps', "top_target.rb calls@#{tag}", attached: 1)
    b = app("calls@#{tag}")
    wait_until(message: 'the second worker attached') { value(scrape(port), 'tracer_targets ') == 2 }
    burst([a, b])
    wait_until(message: 'both bursts') { total(scrape(port), TICK) == 20_000 }
    assert_equal [a.pid, b.pid].sort, scrape(port).lines.grep(/^#{Regexp.escape(TICK)}/).map { |l| Integer(l[/pid="(\d+)"/, 1]) }.sort,
                 'a series per worker'
    a.kill
    wait_until(message: 'the first worker gone') { value(scrape(port), 'tracer_targets ') == 1 }
    assert_equal 20_000, total(scrape(port), TICK), 'an exited worker keeps its counts'
    sleep 0.5 # several --interval: the table would have been redrawn (and no reset applies)
    assert_equal 20_000, total(scrape(port), TICK)
    stop(c)
  end

  def test_other_paths_methods_and_malformed_requests
    t = app('calls')
    c, port = serve(t)
    assert_match(%r{\AHTTP/1\.1 404 Not Found\r\n}, raw(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert_match(%r{\AHTTP/1\.1 404 }, raw(port, "GET /metricsx HTTP/1.1\r\n\r\n"))
    post = raw(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    assert_match(%r{\AHTTP/1\.1 405 Method Not Allowed\r\n}, post)
    assert_includes post, "\r\nAllow: GET, HEAD\r\n"
    assert_match(%r{\AHTTP/1\.1 400 }, raw(port, "hello\r\n\r\n"))
    head = raw(port, "HEAD /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert_match(%r{\AHTTP/1\.1 200 OK\r\n}, head)
    assert head.end_with?("\r\n\r\n"), 'HEAD: no body'
    assert_match(/^Content-Length: [1-9]\d*\r$/, head)
    # A head past 8 KiB: refused as soon as the cap is reached, answered though it still sends.
    huge = "GET /metrics HTTP/1.1\r\nX-Big: #{'a' * 20_000}\r\n\r\n"
    assert_match(%r{\AHTTP/1\.1 431 Request Header Fields Too Large\r\n}, raw(port, huge))
    assert_equal 200, get(port)[0], 'still serving'
    stop(c)
  end

  # HTTP/1.1: a connection serves request after request (pipelined ones in order) until its
  # client says close; HTTP/1.0 closes. An idle kept-alive connection gives way to a new one
  # when all 16 are taken.
  def test_keep_alive
    t = app('calls')
    c, port = serve(t)
    TCPSocket.open('127.0.0.1', port) do |s|
      3.times do
        s.write("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head, body = response(s)
        assert_match(%r{\AHTTP/1\.1 200 OK\r\n}, head)
        refute_match(/^Connection:/i, head)
        assert_includes body, "tracer_targets 1\n"
      end
      s.write("GET /metrics HTTP/1.1\r\n\r\nHEAD /metrics HTTP/1.1\r\n\r\n" \
              "GET /metrics?again HTTP/1.1\r\nConnection: close\r\n\r\n")
      first, body = response(s)
      head, = response(s, head_only: true)
      last, again = response(s)
      assert_includes body, "tracer_targets 1\n"
      assert_equal first.sub(/^Content-Length: \d+/, ''), head.sub(/^Content-Length: \d+/, ''), 'the HEAD'
      assert_match(/^Connection: close\r$/, last)
      assert_includes again, "tracer_targets 1\n"
      assert_equal '', s.read, 'closed after the response its client asked it to close'
    end
    assert_match(/^Connection: close\r$/, raw(port, "GET /metrics HTTP/1.0\r\n\r\n"), 'HTTP/1.0 closes')

    idle = Array.new(16) do
      s = TCPSocket.open('127.0.0.1', port)
      s.write("GET /metrics HTTP/1.1\r\n\r\n")
      response(s)
      s
    end
    assert_equal 200, get(port)[0], 'a 17th connection served: an idle one made room'
    wait_until(message: 'an idle connection closed') { idle.any? { |s| closed?(s) } }
    open = idle.reject { |s| closed?(s) }
    assert_equal 15, open.size, 'one made room, no more'
    open.each do |s|
      s.write("GET /metrics HTTP/1.1\r\n\r\n")
      assert_match(%r{\AHTTP/1\.1 200 }, response(s)[0], 'the others still served')
    end
    idle.each(&:close)
    stop(c)
  end

  # A client that sends its head a byte at a time is cut off 5 s after it connected; others
  # are served meanwhile.
  def test_slowloris_is_closed_after_the_read_timeout
    t = app('calls')
    c, port = serve(t)
    s = TCPSocket.open('127.0.0.1', port)
    start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    closed = nil
    s.write("GET /metrics HTTP/1.1\r\n")
    writer = Thread.new do
      loop do
        s.write('X')
        sleep 0.2
      end
    rescue IOError, SystemCallError
      nil
    end
    assert_equal 200, get(port)[0], 'served while the slow one holds its connection'
    begin
      closed = s.read # EOF once the server closes
    rescue SystemCallError
      closed = ''
    end
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
    writer.kill
    s.close
    assert_equal '', closed, 'no response to a head never finished'
    assert_operator elapsed, :>=, 4.5, 'not before the timeout (give or take the loop time libev caches)'
    assert_operator elapsed, :<, 5 + WAIT, 'closed by the timeout'
    stop(c)
  end

  # A connection beyond the cap (16) takes the place of the oldest that never sent a request.
  def test_connections_are_capped
    t = app('calls')
    c, port = serve(t)
    idle = Array.new(16) { TCPSocket.open('127.0.0.1', port) }
    wait_until(message: 'the 16 accepted') { sockets_of(c.pid, port) >= 16 }
    assert_equal 200, get(port)[0], 'the 17th connection served'
    wait_until(message: 'the oldest idle one closed') { closed?(idle.first) }
    assert_equal [false] * 15, idle.drop(1).map { |s| closed?(s) }, 'one made room, no more'
    idle.each(&:close)
    stop(c)
  end

  # Established TCP connections of pid on port (/proc/PID/net/tcp lists the namespace's; the
  # server's side is the one whose local port is port).
  def sockets_of(pid, port)
    File.readlines("/proc/#{pid}/net/tcp").count { |l| l.split[1]&.end_with?(format(':%04X', port)) && l.split[3] == '01' }
  end

  # Issue 43: connections that never send a byte, reopened as soon as the server closes them,
  # kept a scraper out (15 scrapes in 19 failed). They only push one another out now.
  def test_idle_connections_cannot_keep_a_scraper_out
    t = app('calls')
    c, port = serve(t)
    stop_flood = false
    opened = 0
    flood = Thread.new do
      idle = Array.new(16) { TCPSocket.open('127.0.0.1', port) }
      opened = 16
      until stop_flood
        ready, = IO.select(idle, nil, nil, 0.05)
        (ready || []).each do |s|
          next unless closed?(s)

          s.close
          idle[idle.index(s)] = TCPSocket.open('127.0.0.1', port)
          opened += 1
        end
      end
      idle.each(&:close)
    end
    wait_until(message: 'the flood holds every slot') { sockets_of(c.pid, port) >= 16 }
    answers = Array.new(20) do
      get(port)[0]
    rescue SystemCallError, EOFError, Net::ReadTimeout => e
      e.class.name
    end
    stop_flood = true
    flood.join
    assert_equal [200] * 20, answers, "scrapes answered while #{opened} idle connections came"
    assert_operator opened, :>, 16, 'the scrapes pushed idle connections out'
    stop(c)
  end

  # :PORT serves every address, IPv4 and IPv6; --duration ends the run, and the server with it.
  def test_every_address_until_duration
    t = app('calls')
    port = free_port
    c = client('-p', t.pid, '--top', 'calls', '--interval', '0.2', '--metrics', ":#{port}", '--duration', '8')
    wait_until(message: 'served on 127.0.0.1') { (value(scrape(port), 'tracer_targets ') rescue nil) == 1 } # rubocop:disable Style/RescueModifier
    v6 = TCPSocket.open('::1', port) do |s|
      s.write("GET /metrics HTTP/1.1\r\n\r\n")
      s.read
    end
    assert_match(%r{\AHTTP/1\.1 200 OK\r\n.*^tracer_targets 1$}m, v6)
    status = c.finish
    assert status.success?, c.err
    assert_raises(Errno::ECONNREFUSED) { TCPSocket.open('127.0.0.1', port) }
  end

  # On a terminal, one line says where; the table is not drawn.
  def test_says_where_on_a_terminal
    t = app('calls')
    port = free_port
    screen = +''
    r, w, pid = PTY.spawn({ 'TERM' => 'xterm' }, TRACER, '-p', t.pid.to_s, '--top', 'calls',
                          '--metrics', "127.0.0.1:#{port}", '--duration', '2')
    begin
      loop { screen << r.readpartial(4096) }
    rescue EOFError, Errno::EIO
      nil # the client exited
    end
    Process.wait(pid)
    w.close
    assert $?.success?, screen
    assert_equal "*** serving metrics on http://127.0.0.1:#{port}/metrics\r\n" \
                 "*** attached to process #{t.pid}\r\n*** detached from process #{t.pid}\r\n", screen
  end

  def test_usage_and_bind_errors
    t = app('calls')
    out, err, st = tracer('-p', t.pid, '--top', 'calls', '--metrics', 'localhost:9394')
    assert_equal 2, st.exitstatus
    assert_equal '', out
    assert_match(/\Atracer: invalid --metrics address 'localhost:9394': .*no name is looked up\)\n/, err)
    _, err, st = tracer('-p', t.pid, '-f', '--metrics', '127.0.0.1:9394')
    assert_equal 2, st.exitstatus
    assert_match(/\Atracer: --metrics goes with --top\n/, err)
    _, err, st = tracer('-p', t.pid, '--metrics', '127.0.0.1:9394')
    assert_equal 2, st.exitstatus
    assert_match(/\Atracer: --metrics goes with --top\n/, err)
    _, err, st = tracer('-p', t.pid, '--top', 'calls', '--metrics', ':9394', '--reset', '5')
    assert_equal 2, st.exitstatus
    assert_match(/excludes --reset/, err)
    _, err, st = tracer('-p', t.pid, '--top', 'calls', '--metrics', ':9394', '--format', 'pprof', '-o', File.join(Dir.tmpdir, 'never.pb.gz'))
    assert_equal 2, st.exitstatus
    assert_match(/excludes --format pprof/, err)
    busy = TCPServer.new('127.0.0.1', 0)
    port = busy.addr[1]
    out, err, st = tracer('-p', t.pid, '--top', 'calls', '--metrics', "127.0.0.1:#{port}")
    busy.close
    assert_equal 1, st.exitstatus
    assert_equal '', out
    assert_equal "tracer: cannot serve metrics on 127.0.0.1:#{port}: Address already in use\n", err
  end

  # --label: names checked as Prometheus' (and none of tracer's own), each given once, with --metrics.
  def test_label_usage_errors
    t = app('calls')
    [[%w[--label app=x], /\Atracer: --label goes with --metrics: it labels the series served\n/, false],
     [%w[--label app], /\Atracer: invalid --label 'app': expected KEY=VALUE\n/, true],
     [%w[--label 1x=y], /\Atracer: invalid --label '1x=y': a label name is letters/, true],
     [%w[--label __name__=y], /\Atracer: invalid --label '__name__=y': names starting with '__'/, true],
     [%w[--label pid=1], /\Atracer: invalid --label 'pid=1': 'pid' is a label tracer's series have already\n/, true],
     [%w[--label app=a --label app=b], /\Atracer: --label app given twice\n/, true]].each do |args, err_re, metrics|
      more = metrics ? ['--metrics', '127.0.0.1:19394'] : []
      out, err, st = tracer('-p', t.pid, '--top', 'calls', *more, *args)
      assert_equal 2, st.exitstatus, "#{args.join(' ')}: #{err}"
      assert_equal '', out
      assert_match err_re, err
    end
  end

  # --label app=NAME replaces the working directory as app, and any other label goes on every
  # series, its value escaped.
  def test_labels_on_every_series
    t = app('calls')
    c, port = serve(t, '--label', 'app=billing', '--label', 'dc=eu "1"')
    burst(t)
    labels = "pid=\"#{t.pid}\",app=\"billing\",dc=\"eu \\\"1\\\"\""
    want = "#{TICK},file=\"#{REL}\",line=\"#{line_of('TICK')}\",#{labels}} 10000\n"
    wait_until(message: 'the tick, labelled') { scrape(port).include?(want) }
    body = scrape(port)
    assert_includes body, "tracer_events_lost_total{cause=\"full\",#{labels}} 0\n"
    assert_includes body, "tracer_targets{app=\"billing\",dc=\"eu \\\"1\\\"\"} 1\n"
    out, st = Open3.capture2e('promtool', 'check', 'metrics', stdin_data: body)
    assert st.success?, out
    stop(c)
  end

  # A worker SIGKILLed between two reports: what it counted since its last one never comes.
  # The seconds it went unreported are served, and the events its last report's rate makes of
  # them, as lost (an estimate): counted + estimated is near the count the worker itself kept.
  def test_killed_worker_unreported_counts_estimated
    counts = Array.new(2) { |i| File.join(@dir, "count#{i}") }
    steady = counts.map do |f|
      target('steady', env: { 'COUNT_FILE' => f, 'GO' => @go }, script: File.join(ROOT, 'test', 'apps', 'metrics_steady.rb'))
    end
    c, port = serve(steady, '--interval', '1')
    FileUtils.touch(@go)
    step = 'tracer_method_calls_total{method="Steady#step"'
    mine = ->(b, prefix) { value(b, "#{prefix}") }
    victim = steady.first
    wait_until(message: 'counts of the victim served') do
      (b = scrape(port)).lines.any? { |l| l.start_with?(step) && l.include?("pid=\"#{victim.pid}\"") && !l.end_with?(" 0\n") } && b
    end
    sleep 1.5 # into an interval: some of its calls are unreported when it dies
    victim.kill('KILL')
    true_count = File.binread(counts.first, 8).unpack1('Q<')
    wait_until(message: 'the victim gone') { value(scrape(port), 'tracer_targets ') == 1 }
    wait_until(message: 'its estimate served') do
      value(scrape(port), "tracer_unreported_seconds_total{pid=\"#{victim.pid}\"").to_f.positive?
    end
    body = scrape(port)
    served = value(body.lines.grep(/pid="#{victim.pid}"/).join, step)
    lost = value(body, "tracer_events_lost_total{cause=\"unreported\",pid=\"#{victim.pid}\"")
    secs = value(body, "tracer_unreported_seconds_total{pid=\"#{victim.pid}\"")
    missing = true_count - served
    puts "\nkilled worker: #{true_count} calls made, #{served.to_i} served, #{missing.to_i} missing; " \
         "estimated lost #{lost.to_i} over #{secs} s unreported"
    assert_operator secs, :<=, 1.0 + 0.5, 'at most an --interval (and the time to see the end)'
    assert_operator missing, :>, 0, 'the worker made calls after its last report'
    # The rate of a loaded 2-core machine's worker varies from one interval to the next (runs:
    # 618 missing for 279 estimated before the test started its count at GO; then 273/298,
    # 202/212, 131/196): the estimate is asked to be of the same order as what went missing.
    assert_operator lost, :>=, missing / 3.0, 'the estimate near what went missing'
    assert_operator lost, :<=, missing * 3.0 + 20, 'the estimate near what went missing'
    assert_equal 0, mine.(body, "tracer_events_lost_total{cause=\"unreported\",pid=\"#{steady.last.pid}\"")
    stop(c)
  end

  # ---- with Prometheus ----

  def start_prometheus(ports)
    system('prometheus', '--version', out: File::NULL, err: File::NULL) or
      raise 'the --metrics tests scrape with Prometheus: script/deps test installs it (Debian package prometheus)'
    @prom_port = free_port
    config = File.join(@dir, 'prometheus.yml')
    File.write(config, <<~YAML)
      global:
        scrape_interval: 1s
        scrape_timeout: 1s
      scrape_configs:
        - job_name: tracer
          static_configs:
            - targets: [#{ports.map { |p| "'127.0.0.1:#{p}'" }.join(', ')}]
    YAML
    @prometheus = Process.spawn('prometheus', "--config.file=#{config}", "--storage.tsdb.path=#{@dir}/data",
                                "--web.listen-address=127.0.0.1:#{@prom_port}",
                                out: File.join(@dir, 'prometheus.log'), err: %i[child out])
    wait_until(message: 'Prometheus ready') { (prom_get('/-/ready').code == '200' rescue false) } # rubocop:disable Style/RescueModifier
  end

  def prom_get(path) = Net::HTTP.get_response(URI("http://127.0.0.1:#{@prom_port}#{path}"))

  # An instant query's single value, or nil when it has none.
  def query(promql)
    res = JSON.parse(prom_get("/api/v1/query?query=#{URI.encode_www_form_component(promql)}").body)
    res['status'] == 'success' or flunk("#{promql}: #{res.inspect}")
    res['data']['result'].first&.dig('value', 1)&.then { |v| Float(v) }
  end

  SINATRA = File.join(ROOT, 'examples', 'sinatra')

  # Puma run by the Ruby under test (example_test.rb's way).
  def puma_cmd
    cmd = [RUBY, ENV['TRACER_PUMA'] || Gem.bin_path('puma', 'puma')]
    nio = system(RUBY, '-e', 'require "nio"', out: File::NULL, err: File::NULL)
    nio ? cmd : cmd + ['-C', File.join(ROOT, 'test', 'apps', 'puma_no_reactor.rb')]
  rescue Gem::Exception => e
    flunk "Puma is missing for #{RUBY} (#{e.message}): apt-get install puma, or make test-rubies"
  end

  def agent_loaded?(pid)
    File.read("/proc/#{pid}/maps").include?('tracer_agent.so')
  rescue SystemCallError
    false
  end

  # A fleet operator's view: Debian's Prometheus scraping tracer attached to a three-worker Puma
  # cluster of the Sinatra example under load, the cluster selected by its master's pid in the
  # workers' command lines ("puma: cluster worker N: MASTER [tag]"). Each worker is a series of
  # its own, the sum by method is theirs, and the p99 of Inventory.find, which sleeps 30 ms for
  # one item in ten of those the load asks for, falls in the bucket of 30 ms (25 to 50 ms).
  def test_puma_cluster_per_worker_and_p99_in_prometheus
    app_port = free_port
    master = Process.spawn(*puma_cmd, '-w', '3', '-b', "tcp://127.0.0.1:#{app_port}", File.join(SINATRA, 'config.ru'),
                           out: File.join(@dir, 'puma.log'), err: %i[child out], pgroup: true)
    workers = wait_until(message: 'three workers with the agent') do
      pids = `pgrep -P #{master}`.split.map(&:to_i)
      pids if pids.size == 3 && pids.all? { |p| agent_loaded?(p) }
    end
    c, port = serve([], '--ps', "cluster worker [0-9]+: #{master} ", '--rows', '5', mode: 'time', attached: 3)
    start_prometheus([port])
    load = Process.spawn(RUBY, File.join(SINATRA, 'load.rb'), "http://127.0.0.1:#{app_port}", '60', '4', out: File::NULL)
    find = 'tracer_method_calls_total{method="Inventory.find"}'
    per_worker = "count(count by (pid) (#{find}))"
    wait_until(message: 'Inventory.find counted in the three workers', within: 60) { query(per_worker) == 3 }
    got = JSON.parse(prom_get("/api/v1/query?query=#{URI.encode_www_form_component("sum by (pid) (#{find})")}").body)
    pids = got['data']['result'].map { |r| Integer(r['metric']['pid']) }
    assert_equal workers.sort, pids.sort, 'a series per worker, labelled with its pid'
    apps = JSON.parse(prom_get("/api/v1/query?query=#{URI.encode_www_form_component("count by (app) (#{find})")}").body)
    assert_equal [ROOT], apps['data']['result'].map { |r| r['metric']['app'] }, "app: the workers' directory"
    files = JSON.parse(prom_get("/api/v1/query?query=#{URI.encode_www_form_component("count by (file) (#{find})")}").body)
    assert_equal ['examples/sinatra/app.rb'], files['data']['result'].map { |r| r['metric']['file'] }, 'relative to it'

    p99 = 'histogram_quantile(0.99, sum by (le, method) (rate(tracer_method_duration_seconds_bucket{method="Inventory.find"}[1m])))'
    p50 = p99.sub('0.99', '0.5')
    wait_until(message: 'a p99 from at least 200 calls', within: 60) do
      query('sum(tracer_method_duration_seconds_count{method="Inventory.find"})').to_f >= 200 && query(p99)
    end
    q99 = query(p99)
    q50 = query(p50)
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    Net::HTTP.get(URI("http://127.0.0.1:#{app_port}/price/item7"))
    slow = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
    sum = query("sum(#{find})")
    parts = query("sum(sum by (pid) (#{find}))")
    got = JSON.parse(prom_get("/api/v1/query?query=#{URI.encode_www_form_component("sum by (pid) (#{find})")}").body)
    puts "\nPuma cluster of 3: Inventory.find p99 #{q99.round(4)} s, p50 #{q50.round(6)} s " \
         "(a slow request measured #{slow.round(4)} s); #{sum.to_i} calls, per worker " \
         "#{got['data']['result'].map { |r| "#{r['metric']['pid']}=#{r['value'][1]}" }.join(' ')}"
    assert_operator q99, :>, 0.025, 'the p99: in the bucket of the 30 ms sleep'
    assert_operator q99, :<=, 0.05
    assert_operator slow, :>=, 0.03, 'a request of a slow item took the sleep'
    assert_operator q50, :<, 0.001, 'the median: the fast lookup'
    assert_equal sum, parts, 'the sum over the workers'

    text = scrape(port)
    out, st = Open3.capture2e('promtool', 'check', 'metrics', stdin_data: text)
    assert st.success?, "promtool check metrics:\n#{out}"
    assert_promtool_openmetrics(get(port, '/metrics', 'Accept' => 'application/openmetrics-text')[2])
    stop(c)
  ensure
    Process.kill('KILL', load) rescue nil # rubocop:disable Style/RescueModifier
    Process.kill('-TERM', master) rescue nil # rubocop:disable Style/RescueModifier
    [load, master].compact.each { |p| Process.wait(p) rescue nil } # rubocop:disable Style/RescueModifier
  end

  # Two tracers ("hosts"), each attached to two targets of 10,000 Burst#tick calls: the fleet's
  # sum in Prometheus is exactly 40,000, and stays so when a worker exits mid-scrape.
  def test_prometheus_sums_the_fleet_exactly
    targets = Array.new(4) { |i| app("calls@metrics#{i}") }
    served = targets.each_slice(2).map { |pair| serve(pair) }
    start_prometheus(served.map(&:last))
    wait_until(message: 'Prometheus scraping both tracers') { query('sum(tracer_targets)') == 4 }
    burst(targets)
    sum = 'sum(tracer_method_calls_total{method="Burst#tick"})'
    wait_until(message: "#{sum} == 40000") { query(sum) == 40_000 }
    assert_equal 4, query('count(tracer_method_calls_total{method="Burst#tick"})'), 'a series per process'
    assert_equal 2, query('count(count by (instance) (tracer_method_calls_total{method="Burst#tick"}))'), 'two hosts'
    # Each series was served at 0 before its 10,000: increase() counts all of it (before, a
    # series that first came at its value lost that much).
    inc = query('sum(increase(tracer_method_calls_total{method="Burst#tick"}[5m]))')
    puts "\nincrease() over the fleet's four new series: #{inc}"
    assert_operator inc, :>=, 40_000, 'increase() from each series\' start'
    top = 'topk(10, sum by (method) (rate(tracer_method_calls_total[1m])))'
    wait_until(message: 'the top ten query') { query(top) }

    targets[0].kill
    wait_until(message: 'Prometheus seeing the worker gone') { query('sum(tracer_targets)') == 3 }
    # A few more scrapes after it: the count stays, and no counter went backwards.
    scrapes = 'sum(count_over_time(tracer_targets[1m]))'
    after = query(scrapes)
    wait_until(message: 'two more scrapes of each') { query(scrapes) >= after + 4 }
    assert_equal 40_000, query(sum)
    assert_equal 0, query("sum(resets(tracer_method_calls_total{method=\"Burst#tick\"}[1m]))")
    served.each { |c, _| stop(c) }
  end
end
