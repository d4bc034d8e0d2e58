# hostile_test.rb: a target run by another user (nobody) that names things with terminal controls,
# against a root client: nothing it sends drives the terminal or forges a line.
require_relative 'helper'

class HostileTest < Minitest::Test
  include TracerTest

  # Bytes a terminal acts on: C0 controls but newline, DEL, C1 controls (raw or as UTF-8), and
  # text that is no UTF-8 at all.
  def assert_inert(text, what)
    bytes = text.b
    refute_match(/[\x00-\x09\x0b-\x1f\x7f]/n, bytes, "#{what}: a control character:\n#{bytes.inspect}")
    refute_match(/\xc2[\x80-\x9f]/n, bytes, "#{what}: a C1 control:\n#{bytes.inspect}")
    assert text.dup.force_encoding('UTF-8').valid_encoding?, "#{what}: invalid UTF-8:\n#{bytes.inspect}"
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

  # A table every 0.2 s until one has the row: a fixed --duration of a second saw no call at all
  # on a loaded machine (events/s: 0).
  def test_top_cells_escaped
    c = client('-p', hostile.pid, '--top', 'calls', '--interval', '0.2')
    c.wait_for(%r{^#{Regexp.escape(Nobody.path(TARGET))} +\d+  Hostile#run\\n\[1\] FORGED \\e\[31mred +\d+$}, stream: :out)
    c.signal('INT')
    assert c.finish.success?, c.err
    assert_inert(c.out, '--top')
    assert_inert(c.err, 'notes')
  end
end
