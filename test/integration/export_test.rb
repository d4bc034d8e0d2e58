# export_test.rb: --format chrome, speedscope, collapsed, jsonl and pprof, each file read by a real consumer.
#
# Consumers:
#   speedscope    its own importer (the code its web page runs, from the speedscope npm package)
#                 loads speedscope, chrome, collapsed and pprof files: test/export/check.js; speedscope
#                 files are also validated against its published JSON schema (shipped in the same
#                 package) with ajv. Both come from test/export/package.json, installed by `npm
#                 ci` into test/export/node_modules from the npm registry, once per checkout, when
#                 a test first needs them.
#   flamegraph.pl Brendan Gregg's renderer turns collapsed stacks into an SVG flame graph; Debian
#                 ships it in libdevel-nytprof-perl (.ci/run installs it).
#   chrome        no Perfetto or chrome://tracing runs here: besides speedscope's Trace Event
#                 importer, the file's structure is checked in Ruby (check_chrome below).
#   jsonl         plain JSON, parsed line by line.
require_relative 'helper'
require 'bigdecimal'
require 'rexml/document'

EXPORT_DIR = File.join(ROOT, 'test', 'export')
FLAMEGRAPH = ENV['FLAMEGRAPH'] || '/usr/share/perl5/Devel/NYTProf/flamegraph.pl'

module ExportConsumers
  @mutex = Mutex.new

  # npm ci once per checkout (it fetches from the npm registry); later runs reuse node_modules
  # while package-lock.json is unchanged. Tried once per run: when it fails, the first test
  # that needs speedscope fails with npm's reason, and the others stop where they need it,
  # skipped with a pointer to that failure (each trying again took some 70 s to fail alike; the
  # run fails either way). Returns nil when installed, else that pointer.
  def self.install!(test)
    @mutex.synchronize do
      return if @installed
      return "speedscope is not installed: npm ci failed in #{@failed}, above" if @failed

      begin
        install
        @installed = true
        nil
      rescue RuntimeError
        @failed = test
        raise
      end
    end
  end

  def self.install
    stamp = File.join(EXPORT_DIR, 'node_modules', '.package-lock.json')
    lock = File.join(EXPORT_DIR, 'package-lock.json')
    return if File.exist?(stamp) && File.mtime(stamp) >= File.mtime(lock)

    system('node', '--version', out: File::NULL) or raise 'export tests need node and npm: script/deps test installs them'
    out, status = Open3.capture2e('npm', 'ci', '--prefix', EXPORT_DIR, '--ignore-scripts', '--no-audit', '--no-fund')
    return if status.success?

    registry = (IO.popen(%w[npm config get registry], err: File::NULL, &:read).strip rescue '') # rubocop:disable Style/RescueModifier
    raise "npm ci in test/export could not install speedscope and ajv from the npm registry " \
          "(#{registry.empty? ? 'npm config get registry failed' : registry}); the export tests read " \
          "tracer's files with them, and fetch them once per checkout. npm said:\n#{out.lines.grep_v(/\Anpm error +(at |\w+: |\})/).join}"
  end
end

class ExportTest < Minitest::Test
  include TracerTest

  def setup
    super
    @dir = Dir.mktmpdir('tracer-export')
  end

  def teardown
    super
    FileUtils.rm_rf(@dir)
  end

  # Traces t for 2 s into a file; returns the path. (A file is whole only at the end: no line to
  # wait for. The targets call every few ms; 2 s is hundreds of calls, some even at load 10.)
  def export(t, format, *specs, more: [])
    path = File.join(@dir, "trace.#{format}")
    specs = ['Worker#work', 'Worker#helper'] if specs.empty?
    _, err, status = tracer('-p', t.pid, '-m', *specs, '--format', format, '-o', path, '--duration', 2, *more)
    assert status.success?, "exit #{status.exitstatus}: #{err}"
    assert_match(/detached from process #{t.pid}/, err)
    path
  end

  # speedscope's view of a file: see test/export/check.js.
  def speedscope(path, *flags)
    missing = ExportConsumers.install!("#{self.class}##{name}") and skip(missing)
    out, err, status = Open3.capture3('node', File.join(EXPORT_DIR, 'check.js'), path, *flags)
    assert status.success?, "speedscope refused #{File.basename(path)}:\n#{err}"
    JSON.parse(out)
  end

  # The calls of a speedscope profile named child (or those of them not at the root, with
  # anywhere: true), each inside a call named parent one level up.
  def assert_nested(calls, parent, child, anywhere: false)
    kids = calls.select { |c| c['name'] == child && !(anywhere && c['depth'].zero?) }
    refute_empty kids, "no #{child} in #{calls.map { |c| c['name'] }.uniq}"
    kids.each do |k|
      assert calls.any? { |p|
        p['name'] == parent && p['depth'] == k['depth'] - 1 && p['start'] <= k['start'] && k['end'] <= p['end']
      }, "#{child} at #{k['start']} is not inside a #{parent}"
    end
  end

  # The Trace Event Format, as Perfetto and chrome://tracing read it, checked by hand: no viewer
  # of those runs here. Numbers are read exactly (BigDecimal) so nesting compares exactly. Every
  # event has the fields its phase has in the format; all but a process's name have a pid and a
  # tid, which viewers attach them to (speedscope's importer fails on one without).
  def check_chrome(text, *pids)
    doc = JSON.parse(text, decimal_class: BigDecimal)
    assert_equal 'ms', doc['displayTimeUnit']
    events = doc.fetch('traceEvents')
    meta = events.select { |e| e['ph'] == 'M' }
    pids.each do |pid|
      assert_includes meta, { 'name' => 'process_name', 'ph' => 'M', 'pid' => pid, 'args' => { 'name' => "ruby #{pid}" } }
    end
    events.each do |e|
      assert_includes %w[M X i], e['ph'], e.inspect
      assert_kind_of String, e['name']
      assert_includes pids, e['pid'], e.inspect
      next if e['ph'] == 'M' && e['name'] == 'process_name'

      assert_kind_of Integer, e['tid'], "an event without its tid: #{e}"
      assert_operator e['tid'], :>, 0
      case e['ph']
      when 'M' then assert_equal 'thread_name', e['name']
      when 'i'
        assert_includes %w[g p t], e['s']
        assert_kind_of Numeric, e['ts']
        assert_operator e['ts'], :>=, 0
      end
    end
    names = meta.select { |e| e['name'] == 'thread_name' }.to_h { |e| [[e['pid'], e['tid']], e['args']['name']] }
    assert_equal names.size, meta.count { |e| e['name'] == 'thread_name' }, 'one name per track'
    events.reject { |e| e['ph'] == 'M' }.each do |e|
      assert names.key?([e['pid'], e['tid']]), "no thread_name for #{e['pid']}/#{e['tid']}: #{e}"
    end
    spans = events.select { |e| e['ph'] == 'X' }
    refute_empty spans
    spans.each do |e|
      %w[name cat ph ts dur pid tid].each { |k| assert e.key?(k), "X event without #{k}: #{e}" }
      assert_equal 'ruby', e['cat']
      assert_kind_of Numeric, e['ts']
      assert_kind_of Numeric, e['dur']
      assert_operator e['ts'], :>=, 0
      assert_operator e['dur'], :>=, 0
    end
    spans.group_by { |e| [e['pid'], e['tid']] }.each_value do |list|
      stack = []
      list.sort_by { |e| [e['ts'], -e['dur']] }.each do |e|
        stack.pop while stack.any? && stack.last['ts'] + stack.last['dur'] <= e['ts']
        if stack.any?
          assert_operator e['ts'] + e['dur'], :<=, stack.last['ts'] + stack.last['dur'],
                          "#{e['name']} overlaps #{stack.last['name']} without nesting"
        end
        stack << e
      end
    end
    [events, names.transform_keys { |_, tid| tid }]
  end

  def test_chrome_is_well_formed_and_speedscope_reads_it
    t = target('work')
    path = export(t, 'chrome', 'Worker#work', 'Worker#helper', 'Worker#fail_once')
    events, names = check_chrome(File.read(path), t.pid)
    assert_equal ['main'], names.values
    spans = events.select { |e| e['ph'] == 'X' }
    assert_equal %w[Worker#fail_once Worker#helper Worker#work], spans.map { |e| e['name'] }.uniq.sort
    spans.select { |e| e['name'] == 'Worker#helper' }.each do |h|
      assert spans.any? { |w| w['name'] == 'Worker#work' && w['ts'] <= h['ts'] && h['ts'] + h['dur'] <= w['ts'] + w['dur'] }
    end
    raises = events.select { |e| e['ph'] == 'i' }
    refute_empty raises
    raises.each do |e|
      assert_equal 'EXCEPTION ArgumentError: worker failed', e['name']
      assert_equal 't', e['s']
      assert_match(/target\.rb\z/, e['args']['file'])
      assert_kind_of Integer, e['args']['line']
    end

    view = speedscope(path)
    assert_equal 'Trace Event Format profile', view['format']
    assert_empty view['warnings']
    assert_equal 1, view['profiles'].size
    assert_match(/main/, view['profiles'][0]['name'])
    assert_nested(view['profiles'][0]['calls'], 'Worker#work', 'Worker#helper')
  end

  # SIGINT is how a trace usually ends: the file must still be one complete JSON document. It
  # is written under a temporary name beside its own, and takes its name once whole.
  def test_chrome_is_complete_after_sigint
    t = target('work')
    path = File.join(@dir, 'trace.json')
    c = client('-p', t.pid, '-m', 'Worker#work', 'Worker#helper', '--format', 'chrome', '-o', path)
    growing = -> { Dir[File.join(@dir, 'trace.json.??????.tmp')].first }
    wait_until(message: 'events in the file') { growing.call && File.read(growing.call).scan('"Worker#helper"').size >= 3 }
    refute File.exist?(path), 'not at its name before it is whole'
    c.signal('INT')
    status = c.finish
    assert status.success?, c.err
    assert_match(/detached from process #{t.pid}/, c.err)
    assert_equal ['trace.json'], Dir.children(@dir)
    text = File.read(path)
    assert text.end_with?("}}\n"), text[-200..]
    check_chrome(text, t.pid)
    assert_nested(speedscope(path)['profiles'][0]['calls'], 'Worker#work', 'Worker#helper')
  end

  def test_chrome_threads_are_named_tracks
    t = target('threads')
    path = export(t, 'chrome')
    _, names = check_chrome(File.read(path), t.pid)
    assert_operator names.values.grep(/\Aworker-\d\z/).size, :>=, 2, names.inspect
    assert_equal names.size, names.values.uniq.size
  end

  def test_speedscope_matches_the_schema_and_imports
    t = target('work')
    path = export(t, 'speedscope')
    doc = JSON.parse(File.read(path))
    assert_equal 'https://www.speedscope.app/file-format-schema.json', doc['$schema']
    assert_equal 'tracer 0.1.0', doc['exporter']
    frames = doc['shared']['frames']
    assert_equal %w[Worker#helper Worker#work], frames.map { |f| f['name'] }.sort
    frames.each do |f|
      assert_match(/target\.rb\z/, f['file'])
      assert_kind_of Integer, f['line']
    end

    view = speedscope(path, '--schema')
    assert_empty view['schema_errors']
    assert_equal 'speedscope json file', view['format']
    assert_equal "tracer #{t.pid}", view['name']
    assert_equal ["main (pid #{t.pid})"], view['profiles'].map { |p| p['name'] }
    assert_nested(view['profiles'][0]['calls'], 'Worker#work', 'Worker#helper')
    assert_operator view['profiles'][0]['total'], :>, 0
  end

  # Slow calls arrive innermost first; the file must still nest them.
  def test_speedscope_of_slow_calls
    t = target('work')
    path = export(t, 'speedscope', 'Worker#outer', 'Worker#inner', 'Kernel#sleep', more: ['-s', '1'])
    view = speedscope(path, '--schema')
    assert_empty view['schema_errors']
    calls = view['profiles'][0]['calls']
    # Calls at the root began outside a traced call: the loop's own sleep, or an inner call of
    # the Worker#outer that ran when tracing began. Every other one is nested.
    assert_nested(calls, 'Worker#outer', 'Worker#inner', anywhere: true)
    assert_nested(calls, 'Worker#inner', 'Kernel#sleep', anywhere: true)
  end

  def test_collapsed_renders_as_a_flame_graph
    t = target('work')
    path = export(t, 'collapsed', 'Worker#work', 'Worker#helper', 'Worker#fail_once')
    lines = File.readlines(path, chomp: true)
    refute_empty lines
    lines.each { |l| assert_match(/\AWorker[#.]\w+(;[^; ]+)* [1-9]\d*\z/, l) }
    assert_equal lines.map { |l| l[/\A\S+/] }.uniq.size, lines.size, 'one line per stack'
    assert lines.any? { |l| l.start_with?('Worker#work;Worker#helper ') }, lines.inspect

    # flamegraph.pl draws a box per frame: helper's sits on work's, within its width.
    svg, err, status = Open3.capture3('perl', FLAMEGRAPH, '--countname=ns', path)
    assert status.success?, err
    boxes = REXML::XPath.match(REXML::Document.new(svg), '//g[title]').map do |g|
      r = g.elements['rect']
      { name: g.elements['title'].text[/\A(.*) \([\d,]+ ns/, 1], x: r['x'].to_f, y: r['y'].to_f, w: r['width'].to_f }
    end
    box = ->(name) { boxes.find { |b| b[:name] == name } || flunk("no box for #{name} in #{boxes}") }
    all, work, helper = box.call('all'), box.call('Worker#work'), box.call('Worker#helper')
    assert_operator work[:y], :<, all[:y]
    assert_operator helper[:y], :<, work[:y]
    assert_operator helper[:x], :>=, work[:x]
    assert_operator helper[:x] + helper[:w], :<=, work[:x] + work[:w] + 0.1
    box.call('Worker#fail_once')

    view = speedscope(path)
    assert_equal 'collapsed stack format', view['format']
    assert_nested(view['profiles'][0]['calls'], 'Worker#work', 'Worker#helper')
  end

  # Folded stacks of a file: "stack" => weight.
  def folded(path)
    File.readlines(path, chomp: true).to_h do |l|
      stack, weight = l.split(/ (?=\d+\z)/)
      [stack, Integer(weight)]
    end
  end

  # --append adds a second run's stacks after the first's, in place.
  def test_collapsed_appends
    t = target('work')
    path = File.join(@dir, 'two.folded')
    2.times do |i|
      _, err, status = tracer('-p', t.pid, '-m', 'Worker#work', '--format', 'collapsed', '-o', path, '--duration', 0.5,
                              *(i.positive? ? ['-a'] : []))
      assert status.success?, err
    end
    assert_equal ['Worker#work', 'Worker#work'], File.readlines(path, chomp: true).map { |l| l[/\A\S+/] }
  end

  # Two processes, one with three long-lived threads and one that starts and ends a thread every
  # few milliseconds: the same stacks merge across all of them by default; --split process and
  # --split thread keep them apart.
  def test_collapsed_merges_threads_and_processes
    a = target('threads')
    b = target('thread_jobs')
    stacks = lambda do |*more|
      path = File.join(@dir, "stacks#{more.join}.folded")
      _, err, status = tracer('-p', a.pid, '-p', b.pid, '-m', 'Worker#work', 'Worker#helper', '--format', 'collapsed',
                              '-o', path, '--duration', 1, *more)
      assert status.success?, err
      folded(path)
    end

    merged = stacks.call
    assert_equal ['Worker#work', 'Worker#work;Worker#helper'], merged.keys.sort

    by_process = stacks.call('--split', 'process')
    assert_equal ["ruby #{a.pid};Worker#work", "ruby #{a.pid};Worker#work;Worker#helper",
                  "ruby #{b.pid};Worker#work", "ruby #{b.pid};Worker#work;Worker#helper"].sort, by_process.keys.sort

    by_thread = stacks.call('--split', 'thread')
    tops = by_thread.keys.map { |k| k.split(';').first(2) }
    assert_equal %w[worker-0 worker-1 worker-2], tops.select { |p, _| p == "ruby #{a.pid}" }.map(&:last).uniq.sort
    jobs = tops.select { |p, _| p == "ruby #{b.pid}" }.map(&:last).uniq
    assert_operator jobs.size, :>=, 2, "threads that began and ended: #{jobs}"
    jobs.each { |j| assert_match(/\Ajob-\d+\z/, j) }
    by_thread.each_key { |k| assert_match(/\Aruby (#{a.pid}|#{b.pid});[^;]+;Worker#work(;Worker#helper)?\z/, k) }
  end

  # Two processes, one with three threads and one that starts and ends a thread every few
  # milliseconds: each export opens in the viewer it is for.
  def test_every_viewer_reads_threads_and_processes
    a = target('threads')
    b = target('thread_jobs')
    files = %w[chrome speedscope pprof].to_h do |format|
      path = File.join(@dir, "both.#{format}")
      _, err, status = tracer('-p', a.pid, '-p', b.pid, '-m', 'Worker#work', 'Worker#helper', '--format', format,
                              '-o', path, '--duration', 1)
      assert status.success?, "#{format}: #{err}"
      [format, path]
    end

    events, = check_chrome(File.read(files['chrome']), a.pid, b.pid)
    begins = events.select { |e| e['name'].start_with?('THREAD BEGIN ') }
    ends = events.select { |e| e['name'].start_with?('THREAD END ') }
    refute_empty begins, 'threads began'
    refute_empty ends, 'threads ended'
    begins.each { |e| assert_equal [b.pid, 999_998, 't'], [e['pid'], e['tid'], e['s']] }
    assert_includes events, { 'name' => 'thread_name', 'ph' => 'M', 'pid' => b.pid, 'tid' => 999_998, 'args' => { 'name' => 'threads' } }
    view = speedscope(files['chrome'])
    assert_equal 'Trace Event Format profile', view['format']
    assert_empty view['warnings']
    assert_operator view['profiles'].size, :>=, 5, view['profiles'].map { |p| p['name'] }.inspect
    view['profiles'].select { |p| p['calls'].any? { |c| c['depth'].positive? } }.each do |p|
      assert_nested(p['calls'], 'Worker#work', 'Worker#helper', anywhere: true)
    end

    view = speedscope(files['speedscope'], '--schema')
    assert_empty view['schema_errors']
    names = view['profiles'].map { |p| p['name'] }
    %w[worker-0 worker-1 worker-2].each { |t| assert_includes names, "#{t} (pid #{a.pid})" }
    assert_operator names.grep(/\Ajob-\d+ \(pid #{b.pid}\)\z/).size, :>=, 2, names.inspect

    tags, err, status = Open3.capture3('go', 'tool', 'pprof', '-tags', files['pprof'])
    assert status.success?, err
    [a.pid, b.pid, 'worker-0', 'worker-1', 'worker-2'].each { |v| assert_match(/: #{v}$/, tags) }
    assert_match(/: job-\d+$/, tags)
    top, err, status = Open3.capture3('go', 'tool', 'pprof', '-top', files['pprof'])
    assert status.success?, err
    assert_match(/ Worker#work$/, top)
    assert_match(/ Worker#helper$/, top)
  end

  # Speedscope's file needs every event until the end: past a few megabytes they wait in a
  # scratch file, not in memory. A busy target makes millions of events a second; the client's
  # peak memory stays far below what they take.
  def test_speedscope_memory_is_bounded
    t = target('busy')
    path = File.join(@dir, 'busy.speedscope.json')
    c = client('-p', t.pid, '-f', '--format', 'speedscope', '-o', path, '--duration', 3)
    peak = 0
    # VmHWM: the most it was ever resident, until it exits (a zombie has none).
    loop do
      hwm = (File.read("/proc/#{c.pid}/status")[/^VmHWM:\s+(\d+) kB/, 1] rescue nil) or break # rubocop:disable Style/RescueModifier
      peak = [peak, Integer(hwm) * 1024].max
      sleep 0.05
    end
    status = c.finish(within: 300)
    assert status.success?, c.err
    size = File.size(path)
    events = size / 40 # an event is 35 to 45 bytes of JSON
    assert_operator events * 16, :>, 3 * peak, "too few events to tell (#{events}, #{peak} bytes at the peak)"
    assert_operator peak, :<, 64 << 20, "the client's peak: #{peak >> 20} MB for #{size >> 20} MB of file"
    File.open(path) do |f|
      assert f.read(100).start_with?('{"$schema":"https://www.speedscope.app/file-format-schema.json","shared":')
      f.seek(-200, IO::SEEK_END)
      assert_match(/\]\}\],"name":"tracer #{t.pid}","activeProfileIndex":0,"exporter":"tracer [^"]+"\}\n\z/, f.read)
    end
  end

  # A trace big enough to go through the scratch file still imports, calls nested.
  def test_speedscope_through_its_scratch_file_imports
    t = target('bursts')
    path = File.join(@dir, 'bursts.speedscope.json')
    _, err, status = tracer('-p', t.pid, '-f', '--format', 'speedscope', '-o', path, '--duration', 2)
    assert status.success?, err
    assert_operator File.size(path), :>, 10 << 20, 'more events than memory keeps (4 MiB, some 250000)'
    view = speedscope(path, '--schema', '--summary')
    assert_empty view['schema_errors']
    assert_equal 1, view['profiles'].size
    assert_operator view['profiles'][0]['ncalls'], :>, 250_000
    assert_equal 0, view['profiles'][0]['unnested']
  end

  def test_jsonl_has_one_object_per_event
    t = target('work')
    path = export(t, 'jsonl', 'Worker#work(self, x)', 'Worker#helper', 'Worker#fail_once')
    events = File.readlines(path).map { |l| JSON.parse(l) }
    refute_empty events
    events.each do |e|
      assert_equal t.pid, e['pid']
      assert_equal 'main', e['thread']
      assert_includes %w[call return raise], e['event']
      assert_kind_of Integer, e['ts']
      assert_kind_of Integer, e['depth']
    end
    assert_equal events.map { |e| e['ts'] }.sort, events.map { |e| e['ts'] }, 'one thread: times in order'
    work = events.find { |e| e['event'] == 'call' && e['method'] == 'Worker#work' }
    assert_match(/\A#<Worker:0x\h+ @n=1>\z/, work['expr']['self'])
    assert_equal '3', work['expr']['x']
    helper = events.find { |e| e['event'] == 'return' && e['method'] == 'Worker#helper' }
    assert_equal 1, helper['depth']
    assert_operator helper['duration_ns'], :>, 0
    raise_ev = events.find { |e| e['event'] == 'raise' }
    assert_equal 'ArgumentError', raise_ev['exception']
    assert_equal 'worker failed', raise_ev['message']
    assert_match(/target\.rb\z/, raise_ev['file'])
    assert_equal 1, raise_ev['depth']
  end

  # speedscope imports pprof profiles too (pprof_test.rb reads them with pprof itself): the
  # default sample type, wall time, as a call tree.
  def test_pprof_imports_in_speedscope
    t = target('work')
    path = export(t, 'pprof')
    view = speedscope(path)
    assert_equal 'protobuf encoded pprof file', view['format']
    assert_empty view['warnings']
    assert_equal 1, view['profiles'].size
    assert_nested(view['profiles'][0]['calls'], 'Worker#work', 'Worker#helper')
    assert_operator view['profiles'][0]['total'], :>, 0
  end

  def test_format_usage_errors
    pid = Process.pid
    [
      [['-e', '1', '--format', 'chrome'], /--format goes with tracing/],
      [['--top', 'calls', '--format', 'jsonl'], /--format goes with tracing/],
      [['--backtraces', '--format', 'jsonl'], /--format goes with tracing/],
      [['--heapdump', '--format', 'jsonl'], /--format goes with tracing/],
      [['-m', 'A#b', '--format', 'json'], /invalid --format 'json': expected text, chrome, speedscope, collapsed, jsonl, pprof or flamegraph/],
      [['-m', 'A#b', '--format', 'chrome', '-o', '/dev/null', '-a'], /--append/],
      [['-m', 'A#b', '--format', 'jsonl', '-t'], /--start-time goes with --format text/],
    ].each do |args, message|
      _, err, status = tracer('-p', pid, *args)
      assert_equal 2, status.exitstatus, "#{args.join(' ')}: #{err}"
      assert_match message, err
    end
  end
end
