# eval_test.rb: -e, heap dumps and backtraces.
require_relative 'helper'

class EvalTest < Minitest::Test
  include TracerTest

  def test_eval_prints_inspect
    t = target('sleep')
    out, err, status = tracer('-p', t.pid, '-e', '[Process.pid, "x" * 3]')
    assert status.success?, err
    assert_equal "=> [#{t.pid}, \"xxx\"]\n", out
  end

  def test_eval_exception_is_class_and_message_with_nonzero_exit
    t = target('sleep')
    out, err, status = tracer('-p', t.pid, '-e', 'raise KeyError, "no such key"')
    refute status.success?
    assert_empty out
    assert_match(/KeyError: no such key/, err)
    assert t.alive?
  end

  def test_eval_of_100_kib
    t = target('busy')
    code = "x = 0\n" + ("x += 1\n" * 14_700) + 'x'
    assert_operator code.bytesize, :>, 100 * 1024
    out, err, status = tracer('-p', t.pid, '-e', code)
    assert status.success?, err
    assert_equal "=> 14700\n", out
  end

  def test_eval_runs_in_its_own_thread
    t = target('sleep')
    out, = tracer('-p', t.pid, '-e', '[Thread.current.name, Thread.current == Thread.main]')
    assert_equal "=> [\"tracer-eval\", false]\n", out
  end

  def test_heapdump_is_json_lines
    t = target('sleep')
    Dir.mktmpdir do |dir|
      path = File.join(dir, 'heap.json')
      out, err, status = tracer('-p', t.pid, '--heapdump', path)
      assert status.success?, err
      size = File.size(path)
      assert_match(/#{Regexp.escape(path)}.*#{size}/, out)
      lines = File.readlines(path)
      assert_operator lines.size, :>, 1000
      lines.each { |l| JSON.parse(l) }
      assert_equal 0o600, File.stat(path).mode & 0o777
      assert_empty Dir.glob("#{path}*.tmp")
    end
  end

  def test_backtraces_without_agent_threads
    t = target('threads')
    out, err, status = tracer('-p', t.pid, '--backtraces')
    assert status.success?, err
    assert_match(/^main/, out)
    assert_match(/^worker-0/, out)
    # Ruby's own lines, as the app's logs have them: `sleep' up to 3.3, 'Kernel#sleep' from 3.4.
    label = RUBY_VERSION >= '3.4' ? "'Kernel#sleep'" : "`sleep'"
    assert_match(/target\.rb:\d+:in #{Regexp.escape(label)}$/, out)
    refute_match(/tracer-agent|tracer-eval/, out)
  end

  def test_eval_can_be_disabled
    t = target('sleep', env: { 'TRACER_AGENT_EVAL' => '0' })
    _, err, status = tracer('-p', t.pid, '-e', '1')
    refute status.success?
    assert_match(/eval is disabled/, err)
  end
end
