# pprof_test.rb: --format pprof, for traces and for --top, each file read by pprof itself.
#
# The consumer is Go's pprof (`go tool pprof`, in Debian's golang-go, which script/deps test
# installs; $PPROF names another command). The workloads are test/apps/top_target.rb's bursts
# of exactly known work, which start when the test says (the file $GO appears), once tracer
# is attached.
require_relative 'helper'
require 'fileutils'
require 'shellwords'

PPROF_TARGET = File.join(ROOT, 'test', 'apps', 'top_target.rb')
PPROF = ENV['PPROF'] ? Shellwords.split(ENV['PPROF']) : %w[go tool pprof]

class PprofTest < Minitest::Test
  include TracerTest

  def setup
    super
    @dir = Dir.mktmpdir('tracer-pprof')
    @go = File.join(@dir, 'go')
    @lines = File.readlines(PPROF_TARGET)
  end

  def teardown
    super
    FileUtils.rm_rf(@dir)
  end

  def app(mode) = target(mode, env: { 'GO' => @go, 'N' => '1234' }, script: PPROF_TARGET)

  def def_line(name) = 1 + @lines.index { |l| l =~ /^\s*def #{name}\b/ }

  # Attaches with args, runs the burst once tracer counts, stops tracer with SIGINT when the
  # burst is done; returns the profile's path.
  def profile(t, *args)
    path = File.join(@dir, 'profile.pb.gz')
    c = client('-p', t.pid, *args, '--format', 'pprof', '-o', path)
    c.wait_for(/\*\*\* attached to process #{t.pid}$/, stream: :err)
    FileUtils.touch(@go)
    t.wait_for(/^done$/)
    c.signal('INT')
    status = c.finish
    assert status.success?, "exit #{status.exitstatus}: #{c.err}"
    assert_match(/\*\*\* detached from process #{t.pid}$/, c.err)
    assert_equal "\x1f\x8b".b, File.binread(path, 2), 'gzipped, as pprof files are'
    path
  end

  # pprof's output for a profile: its stdout; it must succeed.
  def pprof(path, *args)
    out, err, status = Open3.capture3(*PPROF, *args, path)
    assert status.success?, "#{PPROF.join(' ')} #{args.join(' ')} failed: #{err}"
    out
  end

  # pprof -top's rows for one sample type: name => [flat, cum], times in ms.
  def top(path, index, *more)
    rows = pprof(path, '-top', '-nodefraction=0', '-edgefraction=0', "-sample_index=#{index}", *more)
    rows.lines.filter_map do |l|
      m = l.match(/\A\s*(\S+)\s+\S+%\s+\S+%\s+(\S+)\s+\S+%\s+(.+?)\s*\z/) or next
      [m[3], [value(m[1]), value(m[2])]]
    end.to_h
  end

  UNITS = { 'ns' => 1e-6, 'us' => 1e-3, 'ms' => 1, 's' => 1000, 'mins' => 60_000, 'hrs' => 3_600_000 }.freeze

  # "600.94ms" => 600.94; "3" => 3.
  def value(text)
    m = text.match(/\A([\d.]+)([a-z]*)\z/) or flunk "not a pprof value: #{text}"
    m[2].empty? ? Integer(m[1]) : Float(m[1]) * UNITS.fetch(m[2])
  end

  # The seconds top_target.rb's time burst says each method took, in ms.
  def spent(t) = t.out[/^spent (.*)$/, 1].split.to_h { |kv| k, v = kv.split('='); [k, Float(v) * 1000] }

  def assert_near(want, got, what)
    assert_in_delta want, got, want * 0.1, "#{what}: want #{want.round(3)} ms within 10%, got #{got}"
  end

  # outer (3 times) sleeps 0.1 s and calls inner, which sleeps 0.2 s; failing (twice) sleeps
  # 0.1 s and raises. The call tree: inner's samples are under outer's.
  def test_trace_calls_and_wall_time_as_a_call_tree
    t = app('time')
    path = profile(t, '-m', 'Burst#outer', 'Burst#inner', 'Burst#failing')
    calls = top(path, 'calls')
    assert_equal({ 'Burst#outer' => [3, 6], 'Burst#inner' => [3, 3], 'Burst#failing' => [2, 2] }, calls)
    wall = top(path, 'wall')
    s = spent(t)
    assert_near s['inner'], wall['Burst#inner'][0], 'inner self'
    assert_near s['outer'] - s['inner'], wall['Burst#outer'][0], 'outer self'
    assert_near s['outer'], wall['Burst#outer'][1], 'outer with inner'
    assert_near s['failing'], wall['Burst#failing'][0], 'failing'

    traces = pprof(path, '-traces')
    stacks = traces.split(/^-+\+-+$/).map { |b| b.lines.filter_map { |l| l[/(?:\A|\s)(Burst#\w+)$/, 1] } }
    stacks.reject!(&:empty?)
    assert_equal [['Burst#failing'], ['Burst#inner', 'Burst#outer'], ['Burst#outer']], stacks.sort
    assert_match(/^\s*thread:\s+main$/, traces)
    assert_match(/^\s*pid:\s+#{t.pid}$/, traces)

    lines = pprof(path, '-top', '-lines', '-sample_index=calls')
    %w[outer inner failing].each do |m|
      assert_match(/ Burst##{m} #{Regexp.escape(PPROF_TARGET)}:#{def_line(m)}$/, lines)
    end
  end

  # -s: the calls slower than 50 ms, which arrive as they end, innermost first, nest all the
  # same. (As the text trace shows, failing, which raises, is no slow call.)
  def test_slow_calls_as_a_call_tree
    t = app('time')
    path = profile(t, '-s', '50')
    calls = top(path, 'calls')
    assert_equal [[3, 6], [3, 3]], %w[Burst#outer Burst#inner].map { |m| calls.fetch(m) }
    assert_match(/^\s+\S+\s+Burst#inner\n\s+Burst#outer\n/, pprof(path, '-traces'))
    wall = top(path, 'wall')
    assert_near spent(t)['outer'], wall.fetch('Burst#outer')[1], 'outer with inner'
    assert_near spent(t)['inner'], wall.fetch('Burst#inner')[0], 'inner'
  end

  # 10 000 calls of Burst#tick: every one is a call in the profile.
  def test_trace_counts_every_call
    t = app('calls')
    path = profile(t, '-m', 'Burst#tick')
    assert_equal({ 'Burst#tick' => [10_000, 10_000] }, top(path, 'calls'))
    assert_period path, 'wall nanoseconds'
  end

  # Period type and period set, and the main type shown first: Pyroscope files a profile as
  # NAME:TYPE:UNIT:PERIOD_TYPE:PERIOD_UNIT, which empty ones left without a name.
  def assert_period(path, type)
    raw = pprof(path, '-raw')
    assert_match(/^PeriodType: #{type}$/, raw)
    assert_match(/^Period: 1$/, raw)
  end

  # The agent's table of the same burst: calls and self time per method, one frame each. It
  # times C methods too when it sees them: a Kernel#sleep row at the line that calls it holds
  # the part of a method's own time spent sleeping (see top_test.rb).
  def test_top_time_one_sample_per_row
    t = app('time')
    path = profile(t, '--top', 'time', '--interval', '0.2')
    calls = top(path, 'calls')
    assert_equal [3, 3, 2], %w[outer inner failing].map { |m| calls.fetch("Burst##{m}")[0] }
    wall = top(path, 'wall', '-lines')
    at = ->(name, mark) { wall.fetch("#{name} #{PPROF_TARGET}:#{mark}", [0, 0])[0] }
    line = ->(mark) { @lines.index { |l| l.include?("# #{mark}") } + 1 }
    own = ->(m, mark) { at.call("Burst##{m}", def_line(m)) + at.call('Kernel#sleep', line.call(mark)) }
    s = spent(t)
    assert_near s['inner'], own.call('inner', 'INNER_SLEEP'), 'inner self'
    assert_near s['outer'] - s['inner'], own.call('outer', 'OUTER_SLEEP'), 'outer self'
    assert_near s['failing'], own.call('failing', 'FAILING_SLEEP'), 'failing self'
    inner = wall.fetch("Burst#inner #{PPROF_TARGET}:#{def_line('inner')}")
    assert_equal inner[0], inner[1], 'one frame: flat is cum'
    assert_period path, 'wall nanoseconds'
  end

  def test_top_calls
    t = app('calls')
    path = profile(t, '--top', 'calls', '--interval', '0.2')
    assert_equal [10_000, 10_000], top(path, 'calls')['Burst#tick']
    assert_period path, 'calls count'
  end

  # --duration ends the session too, and the profile is written then.
  def test_top_calls_until_duration
    t = app('calls')
    path = File.join(@dir, 'top.pb.gz')
    c = client('-p', t.pid, '--top', 'calls', '--format', 'pprof', '-o', path, '--duration', '5')
    c.wait_for(/\*\*\* attached to process #{t.pid}$/, stream: :err)
    FileUtils.touch(@go)
    t.wait_for(/^done$/)
    status = c.finish
    assert status.success?, "exit #{status.exitstatus}: #{c.err}"
    assert_equal '', c.out
    assert_equal [10_000, 10_000], top(path, 'calls')['Burst#tick']
  end

  # Each Widget.new is a sample of two frames: the class, called from its site "FILE:LINE".
  def test_top_objects_by_class_and_site
    t = app('objects')
    path = profile(t, '--top', 'objects', '--interval', '0.2')
    objects = top(path, 'alloc_objects')
    widget = @lines.index { |l| l.include?('# WIDGET') } + 1
    assert_equal [1234, 1234], objects['Widget']
    assert_equal [0, 1234], objects["#{PPROF_TARGET}:#{widget}"], 'the site is the caller'
    assert_equal 'alloc_objects', pprof(path, '-raw')[/^(\w+)\/count/, 1]
  end

  def test_usage_errors
    [
      [%w[-m A#b --format pprof], /--format pprof writes a gzipped profile: give -o FILE/],
      [%w[-m A#b --format pprof -o x.zst], /not -o FILE\.zst/],
      [%w[-m A#b --format pprof -o x.pb.gz -a], /--append would put a second profile after the first/],
      [%w[--top time --format pprof -o x.pb.gz --json], /--json goes with --top's tables/],
      [%w[--top time --format pprof -o x.pb.gz --reset 5], /--reset goes with --top's tables/],
      [%w[--top time --format jsonl], /--top takes --format pprof or flamegraph only/],
    ].each do |args, message|
      _, err, status = tracer('-p', Process.pid, *args)
      assert_equal 2, status.exitstatus, "#{args.join(' ')}: #{err}"
      assert_match message, err
    end
  end
end
