# hostile_test.rb: a target run by another user (nobody) that names things with terminal controls,
# against a root client: nothing it sends drives the terminal or forges a line.
require_relative 'helper'
require 'net/http'
require 'socket'
require 'zlib'

class HostileTest < Minitest::Test
  include TracerTest

  # Bytes a terminal acts on: C0 controls but newline, DEL, C1 controls (raw or as UTF-8), and
  # text that is no UTF-8 at all.
  def assert_inert(text, what)
    bytes = text.b
    refute_match(/[\x00-\x09\x0b-\x1f\x7f]/n, bytes, "#{what}: a control character:\n#{around(bytes, /[\x00-\x09\x0b-\x1f\x7f]/n)}")
    refute_match(/\xc2[\x80-\x9f]/n, bytes, "#{what}: a C1 control:\n#{around(bytes, /\xc2[\x80-\x9f]/n)}")
    assert text.dup.force_encoding('UTF-8').valid_encoding?, "#{what}: invalid UTF-8:\n#{around(bytes, /[\x80-\xff]/n)}"
  end

  # What surrounds the first match of re in bytes, for a failure's message.
  def around(bytes, re)
    at = bytes =~ re or return bytes[0, 200].inspect
    bytes[[at - 80, 0].max, 200].inspect
  end

  # In the copy nobody can read where the checkout is not (a clone under /root): its app dir,
  # which --top counts under, is where it runs.
  def hostile
    needs_root 'the hostile target runs as user nobody'
    @hostile ||= target('hostile', prefix: AS_NOBODY, chdir: Nobody.dir)
  end

  def test_trace_shows_what_the_target_names_escaped
    c = client('-p', hostile.pid, '-m', 'Hostile#', '-n')
    c.wait_for(/^ +next \\e\[2J\n/, stream: :out)
    c.signal('INT')
    assert c.finish.success?, c.err
    assert_inert(c.out, 'trace')
    assert_match(/^Hostile#run\\n\[1\] FORGED \\e\[31mred$/, c.out)
    refute_match(/^\[1\] FORGED/, c.out, 'a newline in a method name made a line of its own')
    assert_match(/^    EXCEPTION ArgumentError: bad \\e\]52;c;QQ==\\a \\xc2\\x9b2J \\xff \(#{Regexp.escape(Nobody.path(TARGET))}:\d+\)\n {14}next \\e\[2J$/,
                 c.out, 'the message keeps its lines, each escaped')
    assert_inert(c.err, 'notes')
  end

  def test_eval_results_and_errors_escaped
    out, err, status = tracer('-p', hostile.pid, '-e', 'Hostile.new')
    assert status.success?, err
    assert_equal "=> #<Hostile \\e]0;title\\a \\xc2\\x9b>\n", out
    out, err, status = tracer('-p', hostile.pid, '-e', 'raise "x\e]0;t\a\nline two\xff"')
    assert_equal 1, status.exitstatus
    assert_empty out
    assert_equal "tracer: eval raised RuntimeError: x\\e]0;t\\a\nline two\\xff\n", err
  end

  def test_backtraces_show_thread_names_escaped
    out, err, status = tracer('-p', hostile.pid, '--backtraces', '1')
    assert status.success?, err
    assert_inert(out, '--backtraces')
    assert_match(/^main\\e\[1m\\xc2\\x9b \(\w+\)$/, out)
  end

  # Bidi controls, the line separator, as UTF-8: they pass as valid text, and reorder it.
  BIDI = /\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]/n
  # target.rb hostile's two names of a megabyte, as they arrive: cut in the middle, said so
  # (a method's name alone, or --top's label, "Hostile#" and the name).
  MEGA = /L{240,256}\[\.\.\.10485(?:77|85) bytes #\h{16}\.\.\.\]L{250,256}/

  def assert_no_bidi(text, what)
    refute_match(BIDI, text.b, "#{what}: a bidi control or line separator, raw: #{around(text.b, BIDI)}")
  end

  # The two megabyte names, each cut, apart.
  def assert_megas_cut_apart(text, what)
    megas = text.b.scan(MEGA).uniq
    assert_equal 2, megas.size, "#{what}: the two megabyte names, cut and apart"
  end

  def export_of(format)
    dir = Dir.mktmpdir('tracer-hostile')
    path = File.join(dir, "trace.#{format}")
    _, err, status = tracer('-p', hostile.pid, '-m', 'Hostile#', '--format', format, '-o', path, '--duration', 1.5)
    assert status.success?, err
    format == 'pprof' ? path : File.binread(path)
  ensure
    FileUtils.rm_rf(dir) unless format == 'pprof'
  end

  # Every string value of a JSON document.
  def strings_of(json)
    case json
    when Hash then json.values.flat_map { |v| strings_of(v) }
    when Array then json.flat_map { |v| strings_of(v) }
    when String then [json]
    else []
    end
  end

  # -o in each format: inert, no megabyte name copied per call, names apart that differ after a
  # NUL or by a byte that is no UTF-8, bidi controls escaped.
  def test_text_file_names_inert_bounded_and_apart
    text = export_of('text').force_encoding('UTF-8')
    assert_inert(text.delete("\n"), 'text')
    assert_no_bidi(text, 'text')
    assert_operator text.lines.map(&:bytesize).max, :<, 4096, 'a line carries a whole name of a megabyte'
    assert_megas_cut_apart(text, 'text')
    ['Hostile#a\x00b', 'Hostile#a\x00c', 'Hostile#bad\xff', "Hostile#bad\uFFFD",
     'Hostile#bidi\xe2\x80\xaeevil\xe2\x81\xa6x\xe2\x81\xa9\xe2\x80\x8f'].each do |name|
      assert_includes text, "\n#{name} <", "#{name} has lines of its own"
    end
  end

  %w[chrome speedscope jsonl].each do |format|
    define_method("test_#{format}_names_inert_bounded_and_apart") do
      text = export_of(format).force_encoding('UTF-8')
      assert_inert(text.delete("\n"), format)
      assert_no_bidi(text, format)
      assert_megas_cut_apart(text, format)
      assert_includes text, 'Hostile#bidi\u202eevil\u2066x\u2069\u200f', 'bidi controls as \u escapes'
      names = strings_of(format == 'jsonl' ? text.lines.map { |l| JSON.parse(l) } : JSON.parse(text))
      ["Hostile#a\u0000b", "Hostile#a\u0000c", "Hostile#ls\u2028x", "Hostile#<script>alert('x')</script>\""].each do |name|
        assert_includes names, name, "#{format}: #{name.inspect} apart, as the app named it"
      end
    end
  end

  def test_collapsed_stacks_inert_bounded_and_apart
    text = export_of('collapsed').force_encoding('UTF-8')
    assert_inert(text.delete("\n"), 'collapsed')
    assert_no_bidi(text, 'collapsed')
    assert_megas_cut_apart(text, 'collapsed')
    stacks = text.lines.map { |l| l[/\A(.*) \d+\n\z/, 1] }
    assert_equal stacks.uniq.size, stacks.size, 'a line per stack'
    ['Hostile#a\x00b', 'Hostile#a\x00c', 'Hostile#bad\xff', "Hostile#bad\uFFFD"].each do |name|
      # Threads merged (the default): a stack may be the method alone.
      assert(stacks.any? { |s| s == name || s.end_with?(";#{name}") }, "#{name}: a stack of its own\n#{stacks.join("\n")}")
    end
  end

  # pprof's own reader prints the names: nothing in them drives the operator's terminal.
  def test_pprof_names_inert_bounded_and_apart
    path = export_of('pprof')
    raw = Zlib.gunzip(File.binread(path))
    assert_operator raw.bytesize, :<, 64 << 10, 'the profile holds no name of a megabyte'
    out, err, status = Open3.capture3('go', 'tool', 'pprof', '-top', '-nodefraction=0', path)
    assert status.success?, err
    assert_inert(out.delete("\n"), 'go tool pprof -top')
    assert_no_bidi(out, 'go tool pprof -top')
    assert_megas_cut_apart(out, 'go tool pprof -top')
    ['Hostile#a\x00b', 'Hostile#a\x00c', 'Hostile#bad\xff', "Hostile#bad\uFFFD",
     'Hostile#run\n[1] FORGED \e[31mred'].each do |name|
      assert_match(/ #{Regexp.escape(name)}$/, out, "#{name}: a function of its own")
    end
  ensure
    FileUtils.rm_rf(File.dirname(path)) if path
  end

  # --top and its Prometheus series: a row and a series per method, labels valid and apart.
  def test_top_and_metrics_rows_apart
    out, err, status = tracer('-p', hostile.pid, '--top', 'calls', '--json', '--duration', 1.5)
    assert status.success?, err
    rows = JSON.parse(out.lines.last)['rows'].map { |r| r['method'] }
    # JSON shows a byte that is no UTF-8 as U+FFFD, as JSON readers would: bad\xff's row reads
    # as bad\uFFFD's there, and only there (the text table, metrics and pprof keep them apart).
    assert_equal 2, rows.count("Hostile#bad\uFFFD")
    assert_equal rows.uniq.size, rows.size - 1, 'a row per method'
    assert_includes rows, "Hostile#a\u0000b"
    assert_includes rows, "Hostile#a\u0000c"
    assert_equal 2, rows.count { |r| r.include?('[...1048585 bytes #') }

    port = TCPServer.new('127.0.0.1', 0).then { |s| s.addr[1].tap { s.close } }
    c = client('-p', hostile.pid, '--top', 'calls', '--interval', '0.2', '--metrics', "127.0.0.1:#{port}")
    series = nil
    body = wait_until(message: 'every Hostile method in a scrape') do
      b = (Net::HTTP.get(URI("http://127.0.0.1:#{port}/metrics")) rescue '').force_encoding('UTF-8') # rubocop:disable Style/RescueModifier
      series = b.lines.grep(/\Atracer_method_calls_total\{method="Hostile#/).map { |l| l[/\A[^}]*\}/] }
      b if series.size >= 10
    end
    assert_equal series.uniq.size, series.size, 'one series per method'

    assert_inert(body.delete("\n"), '--metrics')
    assert_no_bidi(body, '--metrics')
    assert_megas_cut_apart(body, '--metrics')
    # The values are EXACT's text (a\x00b), each backslash escaped again in the exposition.
    ['a\\\\x00b', 'a\\\\x00c', 'bad\\\\xff', "bad\uFFFD"].each do |name|
      assert(series.any? { |l| l.start_with?("tracer_method_calls_total{method=\"Hostile##{name}\",") },
             "Hostile##{name}: a series of its own")
    end
    check, st = Open3.capture2e('promtool', 'check', 'metrics', stdin_data: body)
    assert st.success?, "promtool check metrics:\n#{check}"
    c.signal('TERM')
    assert c.finish.success?, c.err
  end

  # A table every 0.2 s until one has the row: a fixed --duration of a second saw no call at all
  # on a loaded machine (events/s: 0).
  def test_top_cells_escaped
    c = client('-p', hostile.pid, '--top', 'calls', '--interval', '0.2')
    # The file's name, its start cut to the column's width.
    c.wait_for(%r{^\S*#{Regexp.escape(File.basename(TARGET))} +\d+  Hostile#run\\n\[1\] FORGED \\e\[31mred +\d+$}, stream: :out)
    c.signal('INT')
    assert c.finish.success?, c.err
    assert_inert(c.out, '--top')
    assert_inert(c.err, 'notes')
  end
end
