# top_test.rb: --top live tables, from bursts of exactly known work in test/apps/top_target.rb.
require_relative 'helper'
require 'fileutils'
require 'shellwords'

TOP_TARGET = File.join(ROOT, 'test', 'apps', 'top_target.rb')

class TopTest < Minitest::Test
  include TracerTest

  N = 1234 # objects of each kind the allocation burst makes

  def setup
    super
    @dir = Dir.mktmpdir('tracer-top-test')
    @go = File.join(@dir, 'go')
    @tmux = nil
  end

  def teardown
    system('tmux', '-L', @tmux, 'kill-server', out: File::NULL, err: File::NULL) if @tmux
    super
    FileUtils.rm_rf(@dir)
  end

  # The line of top_target.rb that carries "# MARK".
  def line_of(mark)
    @lines ||= File.readlines(TOP_TARGET)
    1 + (@lines.index { |l| l.include?("# #{mark}") } or raise "no # #{mark} in #{TOP_TARGET}")
  end

  # The line where top_target.rb defines method name.
  def def_line(name)
    @lines ||= File.readlines(TOP_TARGET)
    1 + (@lines.index { |l| l =~ /^\s*def #{name}\b/ } or raise "no def #{name} in #{TOP_TARGET}")
  end

  def app(mode, **opts)
    target(mode, env: { 'GO' => @go, 'N' => N.to_s }, script: TOP_TARGET, **opts)
  end

  def top(targets, mode, *extra)
    pids = Array(targets).flat_map { |t| ['-p', t.pid] }
    client(*pids, '--top', mode, '--json', '--interval', '0.2', '--rows', '200', *extra)
  end

  def snapshots(c)
    c.out.each_line.select { |l| l.end_with?("\n") }.map { |l| JSON.parse(l) }
  end

  # Waits for a JSON table for which the block is true; returns it.
  def wait_snapshot(c, what)
    deadline = Time.now + WAIT
    loop do
      snap = snapshots(c).last
      return snap if snap && yield(snap)
      flunk "timed out waiting for #{what}; latest table: #{JSON.pretty_generate(snap || {})}\n#{c.err}" if Time.now > deadline
      sleep 0.01
    end
  end

  def row(snap, label, line = nil, key: 'method')
    snap['rows'].find { |r| r[key] == label && (line.nil? || r['line'] == line) }
  end

  def count(snap, label, line = nil, key: 'method')
    row(snap, label, line, key: key)&.fetch('count') || 0
  end

  # The row at line of top_target.rb (arrays and strings have no label).
  def at(snap, mark)
    snap['rows'].find { |r| r['file'] == TOP_TARGET && r['line'] == line_of(mark) }
  end

  # Tables start only once every target counts, so the burst starts after the first one.
  def run_burst(targets, c, what, &done)
    wait_snapshot(c, 'the first table') { true }
    FileUtils.touch(@go)
    Array(targets).each { |t| t.wait_for(/^done$/) }
    wait_snapshot(c, what, &done)
  end

  def stop(c, targets)
    c.signal('INT')
    status = c.finish
    assert status.success?, "exit #{status.exitstatus}: #{c.err}"
    Array(targets).each { |t| assert_match(/\*\*\* detached from process #{t.pid}$/, c.err) }
  end

  def assert_near(want, got, what)
    assert_in_delta want, got, want * 0.1, "#{what}: want #{want.round(3)} ms within 10%, got #{got}"
  end

  def test_calls_counts_every_call
    t = app('calls')
    c = top(t, 'calls')
    snap = run_burst(t, c, 'Burst#tick 10000') { |s| count(s, 'Burst#tick') >= 10_000 }
    tick = row(snap, 'Burst#tick')
    assert_equal({ 'file' => TOP_TARGET, 'line' => line_of('TICK'), 'method' => 'Burst#tick',
                   'count' => 10_000, 'pids' => 1 }, tick)
    assert_equal 'calls', snap['mode']
    assert_equal [t.pid], snap['pids']
    assert_equal [ROOT], snap['filter']
    assert_operator snap['events'], :>=, 10_000
    counts = snap['rows'].map { |r| r['count'] }
    assert_equal counts.sort.reverse, counts, 'rows sorted by CALLS'
    assert snap['rows'].all? { |r| r['file'].start_with?("#{ROOT}/") }, 'only the app dir by default'
    stop(c, t)
  end

  def test_text_table_once_after_duration
    t = app('calls')
    c = client('-p', t.pid, '--top', 'calls', '--duration', '3', '--interval', '0.2')
    c.wait_for(/\*\*\* attached to process #{t.pid}$/, stream: :err)
    FileUtils.touch(@go)
    status = c.finish
    assert_equal 0, status.exitstatus, c.err
    assert_equal 1, c.out.scan(/^tracer --top/).size, "one table only:\n#{c.out}"
    assert_match(%r{\Atracer --top calls  pids: #{t.pid}  elapsed: \d+s  events/s: \d+  lost: 0  app dir: #{Regexp.escape(ROOT)}\n\nFILENAME +LINE  METHOD +CALLS\n}, c.out)
    assert_match(/^#{Regexp.escape(TOP_TARGET)} +#{line_of('TICK')}  Burst#tick +10000$/, c.out)
    assert c.out.end_with?("\n\n"), 'a blank line after the table'
    assert_match(/\*\*\* detached from process #{t.pid}$/, c.err)
  end

  def test_objects_by_site_and_class
    t = app('objects')
    c = top(t, 'objects')
    kinds = { 'Widget' => 'WIDGET', 'Array' => 'ARRAY', 'Hash' => 'HASH', 'String' => 'STRING' }
    snap = run_burst(t, c, 'every kind N times') do |s|
      kinds.all? { |cls, mark| count(s, cls, line_of(mark), key: 'object') >= N }
    end
    kinds.each do |cls, mark|
      assert_equal({ 'file' => TOP_TARGET, 'line' => line_of(mark), 'object' => cls, 'count' => N, 'pids' => 1 },
                   row(snap, cls, line_of(mark), key: 'object'))
    end
    stop(c, t)
  end

  # --sample 8: the burst makes its four kinds in turn, so a fixed gap of 8 would see one kind
  # only; the drawn gaps must see all four, each near its true count.
  def test_objects_sampled_estimates_each_site
    n = 20_000
    t = target('objects', env: { 'GO' => @go, 'N' => n.to_s }, script: TOP_TARGET)
    c = top(t, 'objects', '--sample', '8')
    kinds = { 'Widget' => 'WIDGET', 'Array' => 'ARRAY', 'Hash' => 'HASH', 'String' => 'STRING' }
    snap = run_burst(t, c, 'the burst counted') { |s| s['events'] >= 4 * n }
    assert_equal 8, snap['sample']
    kinds.each do |cls, mark|
      got = count(snap, cls, line_of(mark), key: 'object')
      assert_in_delta n, got, n * 0.25, "#{cls} at line #{line_of(mark)}: estimate of #{n}"
    end
    stop(c, t)
  end

  # --sample-time 4: the allocation hook is on about a quarter of the time, in 1 ms windows, and
  # each interval's counts are scaled by the VM's own count of allocations. The burst makes its
  # four kinds in every iteration and spans many windows: each site comes within 10% (0.01% in
  # runs here), while the hook saw fewer allocations than were made. Unscaled, each came out
  # near a sixth of n; scaled by the windows' share of the time instead, a third short, as the
  # hook slows allocation while it is on.
  def test_objects_sampled_by_time_estimates_each_site
    n = 300_000
    t = target('objects', env: { 'GO' => @go, 'N' => n.to_s }, script: TOP_TARGET)
    c = top(t, 'objects', '--sample-time', '4')
    wait_snapshot(c, 'the first table') { true }
    FileUtils.touch(@go)
    t.wait_for(/^done$/)
    tables = snapshots(c).size
    snap = wait_snapshot(c, 'two tables after the burst') { snapshots(c).size >= tables + 2 }
    assert_equal [4, 'time'], [snap['sample'], snap['sample_by']]
    { 'Widget' => 'WIDGET', 'Array' => 'ARRAY', 'Hash' => 'HASH', 'String' => 'STRING' }.each do |cls, mark|
      got = count(snap, cls, line_of(mark), key: 'object')
      assert_in_delta n, got, n * 0.1, "#{cls} at line #{line_of(mark)}: estimate of #{n}"
    end
    assert_operator snap['events'], :<, 4 * n, 'allocations the hook saw, of 4n made'
    stop(c, t)
  end

  def test_arrays_counts_arrays_and_hashes
    t = app('arrays')
    c = top(t, 'arrays')
    snap = run_burst(t, c, 'arrays and hashes') do |s|
      %w[ARRAY HASH].all? { |mark| at(s, mark)&.fetch('count').to_i >= N }
    end
    %w[ARRAY HASH].each do |mark|
      assert_equal({ 'file' => TOP_TARGET, 'line' => line_of(mark), 'count' => N, 'pids' => 1 }, at(snap, mark))
    end
    assert_nil at(snap, 'WIDGET'), 'no Widget'
    assert_nil at(snap, 'STRING'), 'no String'
    stop(c, t)
  end

  def test_strings_counts_strings
    t = app('strings')
    c = top(t, 'strings')
    snap = run_burst(t, c, 'strings') { |s| at(s, 'STRING')&.fetch('count').to_i >= N }
    assert_equal({ 'file' => TOP_TARGET, 'line' => line_of('STRING'), 'count' => N, 'pids' => 1 }, at(snap, 'STRING'))
    assert_nil at(snap, 'ARRAY'), 'no Array'
    assert_nil at(snap, 'HASH'), 'no Hash'
    stop(c, t)
  end

  def test_objects_total_counts_by_class
    t = app('objects-total')
    c = top(t, 'objects-total')
    snap = run_burst(t, c, 'Widget N times') { |s| count(s, 'Widget', key: 'object') >= N }
    assert_equal({ 'file' => '', 'line' => 0, 'object' => 'Widget', 'count' => N, 'pids' => 1 },
                 row(snap, 'Widget', key: 'object'))
    assert_operator count(snap, 'String', key: 'object'), :>=, N
    assert_equal snap['rows'].map { |r| r['object'] }.uniq, snap['rows'].map { |r| r['object'] }, 'one row per class'
    stop(c, t)
  end

  # outer sleeps 0.1 s then calls inner, which sleeps 0.2 s: 3 times; failing sleeps 0.1 s then
  # raises: twice. The app reports how long each really took (sleep never wakes early, but a busy
  # machine wakes it late), and the table must agree within 10%.
  # The agent also times C methods: Kernel#sleep has its own rows at the lines that call it, and
  # the exclusive time of the Ruby methods leaves it out. So self(m) + self(its sleep) is m's own.
  def test_time_of_nested_sleeps_and_a_raise
    t = app('time')
    c = top(t, 'time')
    snap = run_burst(t, c, 'outer 3 times and failing twice') do |s|
      count(s, 'Burst#outer') >= 3 && count(s, 'Burst#failing') >= 2
    end
    spent = t.out[/^spent (.*)$/, 1].split.to_h { |kv| k, v = kv.split('='); [k, Float(v) * 1000] }
    inner, outer, failing = %w[inner outer failing].map { |m| row(snap, "Burst##{m}") }
    sleep_self = ->(mark) { row(snap, 'Kernel#sleep', line_of(mark))&.fetch('self_ms') || 0 }
    assert_equal [3, 3, 2], [inner, outer, failing].map { |r| r['count'] }
    { 'inner' => 600, 'outer' => 900, 'failing' => 200 }.each do |m, nominal|
      assert_operator spent[m], :>=, nominal * 0.99, "#{m} slept at least #{nominal} ms"
    end
    assert_near spent['inner'], inner['total_ms'], 'inner TOTAL'
    assert_near spent['inner'], inner['self_ms'] + sleep_self.call('INNER_SLEEP'), 'inner SELF'
    assert_near spent['outer'], outer['total_ms'], 'outer TOTAL'
    assert_near spent['outer'] - spent['inner'], outer['self_ms'] + sleep_self.call('OUTER_SLEEP'), 'outer SELF'
    assert_near spent['failing'], failing['total_ms'], 'failing TOTAL (ends when the raise unwinds it)'
    assert_near spent['inner'] / 3, inner['avg_ms'], 'inner AVG'
    assert_near spent['outer'] / 3, outer['avg_ms'], 'outer AVG'
    totals = snap['rows'].map { |r| r['total_ms'] }
    assert_equal totals.sort.reverse, totals, 'rows sorted by TOTAL'
    stop(c, t)
  end

  def test_exceptions_by_class_and_site
    t = app('exceptions')
    c = top(t, 'exceptions')
    snap = run_burst(t, c, 'the raises') do |s|
      count(s, 'KeyError', line_of('RAISE_KEY'), key: 'exception') >= 3 &&
        count(s, 'ArgumentError', line_of('RAISE_ARGUMENT'), key: 'exception') >= 2
    end
    assert_equal({ 'file' => TOP_TARGET, 'line' => line_of('RAISE_KEY'), 'exception' => 'KeyError', 'count' => 3, 'pids' => 1 },
                 row(snap, 'KeyError', line_of('RAISE_KEY'), key: 'exception'))
    assert_equal 2, count(snap, 'ArgumentError', line_of('RAISE_ARGUMENT'), key: 'exception')
    stop(c, t)
  end

  # Rails raises inside its gems on the app's behalf (ActiveRecord::RecordNotFound, and
  # Errno::ENOENT in ActionDispatch::Static before the app's code runs): those count by default,
  # where they were raised, with the app's frame nearest the raise when its stack has one.
  def test_exceptions_raised_in_gems
    t = app('exceptions')
    c = top(t, 'exceptions')
    gem = '/nonexistent/gems/static.rb'
    snap = run_burst(t, c, 'the gems\' raises') do |s|
      count(s, 'JSON::ParserError', key: 'exception') >= 4 && count(s, 'IOError', key: 'exception') >= 5
    end
    json = row(snap, 'JSON::ParserError', key: 'exception')
    refute json['file'].start_with?("#{ROOT}/"), "raised in json, not in the app: #{json}"
    assert_equal [4, TOP_TARGET, line_of('GEM_RAISE')], json.values_at('count', 'app_file', 'app_line')
    assert_equal({ 'file' => gem, 'line' => 1, 'exception' => 'IOError', 'count' => 5, 'pids' => 1 },
                 row(snap, 'IOError', key: 'exception'))
    stop(c, t)


    # As text: the column, the app's file and line in it (as much of the path as fits).
    go = "#{@go}.text"
    u = target('exceptions', env: { 'GO' => go }, script: TOP_TARGET)
    c = client('-p', u.pid, '--top', 'exceptions', '--interval', '0.2')
    c.wait_for(/^tracer --top exceptions /, stream: :out)
    FileUtils.touch(go)
    c.wait_for(%r{  JSON::ParserError  +\S*/top_target\.rb:#{line_of('GEM_RAISE')} +4$}, stream: :out)
    assert_match(/^FILENAME +LINE +EXCEPTION +APP FRAME +COUNT$/, c.out)
    stop(c, u)
  end

  # Ruby 3.3 and later report each thread's GVL handovers; before, --top threads says so.
  def test_threads_take_turns
    t = app('threads')
    if Gem::Version.new(RUBY_VERSION) < Gem::Version.new('3.3')
      status = top(t, 'threads').then { |c| [c.finish, c.err] }
      refute status[0].success?
      assert_match(/process #{t.pid}: its Ruby has no thread events to count \(Ruby 3.3 and later have them\)/, status[1])
      return
    end
    c = top(t, 'threads')
    held = ->(s, n) { row(s, n, key: 'thread')&.fetch('self_ms').to_f }
    # ZJIT (4.0.2) compiles the workers' loops without the interrupt checks that hand the GVL
    # over (measured without tracer: a 0.3 s loop runs whole while the other thread waits, where
    # the interpreter and YJIT switch every 100 ms or so): the table must say that one worker
    # held it some 300 ms and the other had its turn only after.
    zjit = ENV['RUBY_ZJIT_ENABLE'] == '1'
    what = zjit ? 'one worker holding the GVL 250 ms, the other a turn' : 'both workers holding the GVL 50 ms'
    # A table taken between a worker's first turn and its naming itself counts that turn under
    # "thread-N": what the rows must show comes after, the time it held the GVL while counting.
    snap = run_burst(t, c, "#{what}, and the late thread by name") do |s|
      turns = %w[worker-0 worker-1].map { |n| held.(s, n) }
      (zjit ? turns.max >= 250 && turns.min > 0 : turns.min >= 50) && count(s, 'late', key: 'thread') >= 1
    end
    %w[worker-0 worker-1].each do |n|
      assert_operator row(snap, n, key: 'thread')['total_ms'], :>, 0, "#{n} waited for the GVL"
    end
    stop(c, t)
  end

  def test_two_processes_add_up
    a = app('calls')
    b = app('calls')
    c = top([a, b], 'calls')
    snap = run_burst([a, b], c, 'Burst#tick 20000') { |s| count(s, 'Burst#tick') >= 20_000 }
    assert_equal 20_000, count(snap, 'Burst#tick')
    assert_equal 2, row(snap, 'Burst#tick')['pids']
    assert_equal [a.pid, b.pid], snap['pids']
    stop(c, [a, b])
  end

  # A template compiled as ActionView compiles one has a method name and an anonymous class
  # that differ in each process (test/apps/top_target.rb's compile_template): the table names
  # it without them, so that the same template in two workers is one row of both.
  def test_a_compiled_template_is_one_row_across_processes
    a = app('templates')
    b = app('templates')
    names = [a, b].map { |t| t.out[/^template (.*)$/, 1] }
    assert_equal 2, names.uniq.size, "each process names the template its own way: #{names}"
    assert(names.all? { |n| n =~ /\A#<Class:0x\h+>#_test_apps_views_widgets_index_html_erb__+\d+_\d+\z/ }, names.inspect)
    c = top([a, b], 'time')
    label = '#<Class>#_test_apps_views_widgets_index_html_erb'
    snap = run_burst([a, b], c, "#{label} 14 times") { |s| count(s, label) >= 14 }
    rows = snap['rows'].select { |r| r['method'].include?('widgets') }
    assert_equal [[File.join(ROOT, 'test/apps/views/widgets/index.html.erb'), 0, label, 14, 2]],
                 rows.map { |r| r.values_at('file', 'line', 'method', 'count', 'pids') }
    stop(c, [a, b])
  end

  def test_ps_finds_the_processes_with_the_agent
    tag = "t#{rand(1 << 40)}"
    a = app("calls@#{tag}")
    b = app("calls@#{tag}")
    app("calls@#{tag}", agent: false) # matches, but has no agent (and --no-inject keeps it so)
    c = client('--ps', "top_target\\.rb calls@#{tag}$", '--top', 'calls', '--json', '--interval', '0.2', '--no-inject')
    snap = run_burst([a, b], c, 'Burst#tick 20000 from both') { |s| count(s, 'Burst#tick') >= 20_000 }
    assert_equal [a.pid, b.pid].sort, snap['pids']
    assert_equal 2, row(snap, 'Burst#tick')['pids']
    stop(c, [a, b])

    out, err, status = tracer('--ps', "calls@#{tag}", '-e', 'Process.pid', '--no-inject')
    assert status.success?, err
    assert_equal [a.pid, b.pid].sort.map { |p| "[#{p}] => #{p}" }.sort, out.lines.map(&:chomp).sort
  end

  # Workers found by --ps: where their Ruby has no thread events (before 3.3), the first one's
  # refusal is the run's one line and its end (it said so per worker, then waited forever for
  # a process that could); where it has them, the workers' threads add up.
  def test_threads_of_workers_found_by_ps
    tag = "t#{rand(1 << 40)}"
    a = app("threads@#{tag}")
    b = app("threads@#{tag}")
    regex = "top_target\\.rb threads@#{tag}$"
    if Gem::Version.new(RUBY_VERSION) < Gem::Version.new('3.3')
      out, err, status = tracer('--ps', regex, '--top', 'threads', '--no-inject')
      assert_equal 1, status.exitstatus
      assert_equal '', out
      assert_match(/\Atracer: process (#{a.pid}|#{b.pid}): its Ruby has no thread events to count \(Ruby 3.3 and later have them\)\n\z/, err)
      assert [a, b].all?(&:alive?)
      return
    end
    c = client('--ps', regex, '--top', 'threads', '--json', '--interval', '0.2', '--no-inject')
    snap = run_burst([a, b], c, 'worker-0 in both') { |s| row(s, 'worker-0', key: 'thread')&.fetch('pids') == 2 }
    assert_equal [a.pid, b.pid].sort, snap['pids']
    stop(c, [a, b])
  end

  def test_ps_without_a_match
    t = app("calls@nomatch#{rand(1 << 40)}", agent: false)
    _, err, status = tracer('--ps', "calls@nomatch[0-9]+$", '--top', 'calls', '--no-inject')
    assert_equal 1, status.exitstatus
    assert_equal "tracer: no process matches calls@nomatch[0-9]+$ with tracer_agent loaded\n", err
    assert t.alive?
  end

  def test_a_target_that_exits_leaves_the_others
    a = app('calls')
    b = app('calls')
    c = top([a, b], 'calls')
    wait_snapshot(c, 'the first table') { true }
    a.kill
    c.wait_for(/\*\*\* process #{a.pid} exited$/, stream: :err)
    wait_snapshot(c, 'a table without the dead process') { |s| s['pids'] == [b.pid] }
    FileUtils.touch(@go)
    snap = wait_snapshot(c, 'the survivor counting') { |s| count(s, 'Burst#tick') >= 10_000 }
    assert_equal 1, row(snap, 'Burst#tick')['pids']
    b.kill
    c.wait_for(/\*\*\* process #{b.pid} exited$/, stream: :err)
    assert_equal 3, c.finish.exitstatus
  end

  def test_filter_ignore_and_all
    t = app('calls')
    c = top(t, 'calls', '--filter', '/nonexistent/', '--filter', "#{ROOT}/test/apps/nothing")
    wait_snapshot(c, 'the first table') { true }
    FileUtils.touch(@go)
    t.wait_for(/^done$/)
    seen = snapshots(c).size
    snap = wait_snapshot(c, 'two tables after the burst') { snapshots(c).size > seen + 1 }
    assert_equal ['/nonexistent/', "#{ROOT}/test/apps/nothing"], snap['filter']
    # No method of the app is under those prefixes: none was wrapped, nothing was counted.
    assert snapshots(c).all? { |s| s['rows'].empty? && s['events'].zero? }, snapshots(c).inspect
    assert_equal "no row: nothing counted under --filter /nonexistent/, #{ROOT}/test/apps/nothing so far", snap['note']
    stop(c, t)

    @go = File.join(@dir, 'go2')
    t = app('calls')
    c = top(t, 'calls', '--all', '--yes', '--ignore', '^Kernel$', '--ignore', 'File')
    snap = run_burst(t, c, 'the burst, less Kernel and File') { |s| count(s, 'Burst#tick') >= 10_000 }
    assert snap['all']
    assert_equal [], snap['filter']
    labels = snap['rows'].map { |r| r['method'] }
    assert_includes labels, 'IO#puts'
    refute labels.any? { |l| l.start_with?('Kernel#', 'File.') }, labels.inspect
    stop(c, t)
  end

  # A script started by a relative path, as `ruby top_target.rb` in its directory: rows name its
  # absolute path and each method's definition line, by default and under a --filter, whether
  # that is absolute or relative to tracer's directory.
  def test_script_started_by_a_relative_path
    apps = File.join(ROOT, 'test', 'apps')
    t = app('calls', script: 'top_target.rb', chdir: apps)
    c = top(t, 'calls')
    snap = run_burst(t, c, 'Burst#tick 10000') { |s| count(s, 'Burst#tick') >= 10_000 }
    assert_equal({ 'file' => TOP_TARGET, 'line' => def_line('tick'), 'method' => 'Burst#tick',
                   'count' => 10_000, 'pids' => 1 }, row(snap, 'Burst#tick'))
    assert_equal [apps], snap['filter']
    stop(c, t)

    { 'time' => "#{apps}/", 'calls' => 'test/apps' }.each_with_index do |(mode, filter), i|
      @go = File.join(@dir, "go#{i}")
      t = app(mode, script: 'top_target.rb', chdir: apps)
      c = client('-p', t.pid, '--top', mode, '--json', '--interval', '0.2', '--filter', filter, chdir: ROOT)
      method = mode == 'time' ? 'outer' : 'tick'
      snap = run_burst(t, c, "Burst##{method} under --filter #{filter}") { |s| count(s, "Burst##{method}") >= 1 }
      assert_equal [File.expand_path(filter, ROOT)], snap['filter'].map { |f| f.chomp('/') }
      assert_equal [TOP_TARGET, def_line(method)], row(snap, "Burst##{method}").values_at('file', 'line')
      assert snap['rows'].all? { |r| r['file'] == TOP_TARGET }, snap['rows'].inspect
      stop(c, t)
    end
  end

  # A filter that leaves nothing: the header says so instead of an empty table.
  def test_a_filter_that_hides_every_row_is_named
    t = app('objects')
    c = client('-p', t.pid, '--top', 'objects', '--filter', '/nonexistent/', '--duration', '2')
    c.wait_for(/\*\*\* attached to process #{t.pid}$/, stream: :err)
    FileUtils.touch(@go)
    t.wait_for(/^done$/)
    assert c.finish.success?, c.err
    assert_match(%r{\Atracer --top objects  pids: #{t.pid} .* filter: /nonexistent/\nno row: everything counted is outside --filter /nonexistent/\n\nFILENAME  LINE  OBJECT  COUNT\n\n\z}, c.out)
  end

  # The default scope: the app's own methods, through wrappers; no C method, and no wrapper left
  # once the client has gone.
  # An attr_reader's wrapper reads the variable itself: the same values, counted, and once the
  # app redefines, removes or undefines the reader, what Ruby does then (the target checks).
  def test_readers_answer_as_ruby_does_while_counted
    %w[calls time].each do |mode|
      @go = File.join(@dir, "go-#{mode}") # each target starts its burst once its table is on
      t = app('readers')
      c = top(t, mode)
      snap = run_burst(t, c, 'the readers counted') { |s| count(s, 'Reader#unset') >= 2000 && count(s, 'Reader#a') >= 2000 }
      assert_equal [2000, 2000, 2000], [count(snap, 'Reader#a'), count(snap, 'Reader#unset'), count(snap, 'Reader#aa')], mode
      assert_equal line_of('READER'), row(snap, 'Reader#unset')['line']
      stop(c, t)
      refute_match(/MISMATCH/, t.out, mode)
    end
  end

  def test_calls_of_the_apps_methods_leave_nothing_behind
    t = app('calls')
    c = top(t, 'calls')
    snap = run_burst(t, c, 'the burst') { |s| count(s, 'Burst#tick') >= 10_000 }
    assert_equal 10_000, count(snap, 'Burst#tick')
    labels = snap['rows'].map { |r| r['method'] }
    refute labels.any? { |l| l.start_with?('Integer#', 'Kernel#', 'IO#') }, labels.inspect
    stop(c, t)
    out, err, status = tracer('-p', t.pid, '-e', '[TracerAgent.stats[:last_session][:hooks_left], Burst.instance_method(:tick).source_location[0]]')
    assert status.success?, err
    assert_equal "=> [0, #{TOP_TARGET.inspect}]\n", out
  end

  def test_usage_errors
    [%w[-p 1 --rows 5], %w[-p 1 --json -e 1], %w[-p 1 --top nope], %w[-p 1 --top calls -f],
     %w[-p 1 --top calls --all --filter /x], %w[-p 1 --top calls --ignore (], %w[--ps ( --top calls],
     %w[-p 1 --top calls --interval 0], %w[-p 1 --top objects --sample 0], %w[-p 1 -f --sample 8],
     %w[-p 1 --top objects --sample-time 1], %w[-p 1 -f --sample-time 8]].each do |args|
      _, err, status = tracer(*args)
      assert_equal 2, status.exitstatus, "#{args.join(' ')}: #{err}"
    end
    _, err, status = tracer('-p', '1', '--top', 'calls', '--sample', '8')
    assert_equal [2, "tracer: --sample goes with --top objects-total, objects, arrays or strings: the other tables count every event\n"],
                 [status.exitstatus, err.lines.first]
    _, err, status = tracer('-p', '1', '--top', 'time', '--sample-time', '8')
    assert_equal [2, "tracer: --sample-time goes with --top objects-total, objects, arrays or strings: the other tables count every event\n"],
                 [status.exitstatus, err.lines.first]
    _, err, status = tracer('-p', '1', '--top', 'objects', '--sample', '8', '--sample-time', '8')
    assert_equal [2, "tracer: --sample and --sample-time exclude each other\n"], [status.exitstatus, err.lines.first]
  end

  # The full-screen view in a real terminal: q (or Ctrl+C) leaves it and detaches cleanly.
  def full_screen(key)
    flunk 'tmux is not installed: it is needed to test the full-screen view (apt-get install tmux)' unless system('tmux -V', out: File::NULL, err: File::NULL)
    t = app('calls')
    @tmux = "tracer-top-#{Process.pid}-#{rand(1 << 30)}"
    err, code, stty = %w[err code stty].map { |f| File.join(@dir, f) }
    # The shell ignores SIGINT so that only tracer hears a Ctrl+C; then it records how things ended.
    cmd = "trap '' INT; #{[TRACER, '-p', t.pid, '--top', 'calls'].shelljoin} 2>#{err.shellescape}; " \
          "echo $? >#{code.shellescape}; stty -a >#{stty.shellescape}; sleep 600"
    assert system('tmux', '-L', @tmux, 'new-session', '-d', '-s', 'top', '-x', '200', '-y', '50', cmd), 'tmux new-session'
    pane = -> { IO.popen(['tmux', '-L', @tmux, 'capture-pane', '-p', '-t', 'top'], &:read) }
    wait_until(message: 'the header and the attach in the pane') do
      (s = pane.call) =~ /pids: #{t.pid}  elapsed: \d+s  events\/s: \d+/ && s.include?("*** attached to process #{t.pid}")
    end
    FileUtils.touch(@go)
    wait_until(message: "Burst#tick 10000 in the pane:\n#{pane.call}") { pane.call =~ /top_target\.rb +#{line_of('TICK')}  Burst#tick +10000$/ }
    screen = pane.call
    assert_match(/^FILENAME +LINE  METHOD +CALLS$/, screen)
    assert screen.lines.all? { |l| l.chomp.size < 200 }, 'lines fit the terminal'
    system('tmux', '-L', @tmux, 'send-keys', '-t', 'top', key)
    wait_until(message: 'tracer to exit') { File.size?(code) && File.size?(stty) }
    assert_equal "0\n", File.read(code), File.read(err)
    assert_match(/^\*\*\* detached from process #{t.pid}$/, File.read(err))
    settings = File.read(stty)
    assert_match(/(?<!-)icanon/, settings, 'canonical mode restored')
    assert_match(/(?<!-)echo /, settings, 'echo restored')
    refute_match(/events\/s:/, pane.call, 'back from the alternate screen')
    out, err2, status = tracer('-p', t.pid, '-e', 'TracerAgent.attached?')
    assert status.success?, err2
    assert_equal "=> true\n", out
  end

  # The first counts come a quarter of a second after tracing is in place, and the screen shows
  # them as they come: with an interval far longer than the wait, the app's rows still show.
  # Before 63df6fb they came only once the first interval was over.
  def test_full_screen_shows_rows_before_the_first_interval
    flunk 'tmux is not installed: it is needed to test the full-screen view (apt-get install tmux)' unless system('tmux -V', out: File::NULL, err: File::NULL)
    t = target('bursts')
    interval = [WAIT * 4, 3600].min
    @tmux = "tracer-top-#{Process.pid}-#{rand(1 << 30)}"
    cmd = "#{[TRACER, '-p', t.pid, '--top', 'calls', '--interval', interval.to_i].shelljoin} 2>/dev/null; sleep 600"
    assert system('tmux', '-L', @tmux, 'new-session', '-d', '-s', 'top', '-x', '200', '-y', '50', cmd), 'tmux new-session'
    pane = -> { IO.popen(['tmux', '-L', @tmux, 'capture-pane', '-p', '-t', 'top'], &:read) }
    wait_until(message: 'the attach in the pane') { pane.call.include?("*** attached to process #{t.pid}") }
    attached = Time.now
    wait_until(message: "Worker#work's row before the first #{interval.to_i} s interval ends") do
      pane.call =~ /target\.rb +\d+  Worker#work +\d+$/
    end
    assert_operator Time.now - attached, :<, interval / 2
  end

  # Printed as lines, likewise: the first table as soon as every target has counted, then one
  # an interval after that. Before, the first came at the end of the first interval.
  def test_lines_show_the_first_table_once_every_target_counts
    a = target('bursts')
    b = target('bursts')
    interval = [WAIT * 4, 3600].min
    c = client('-p', a.pid, '-p', b.pid, '--top', 'calls', '--json', '--interval', interval.to_i)
    wait_until(message: 'both attached') { [a, b].all? { |t| c.err.include?("*** attached to process #{t.pid}") } }
    attached = Time.now
    snap = wait_snapshot(c, 'the first table') { true }
    assert_operator Time.now - attached, :<, interval / 2
    assert_equal [a.pid, b.pid].sort, snap['pids'].sort
    assert_equal 2, row(snap, 'Worker#work')&.fetch('pids'), "Worker#work counted in both: #{snap}"
    assert_equal 1, snapshots(c).size, 'one table until the next interval'
    stop(c, [a, b])
  end

  def test_full_screen_quits_on_q
    full_screen('q')
  end

  def test_full_screen_quits_on_ctrl_c
    full_screen('C-c')
  end
end
