# cli_test.rb: the command line with real targets: rbtrace's spellings, the protocol's limits.
require_relative 'helper'

class CliTest < Minitest::Test
  include TracerTest

  # rbtrace takes several pids after one -p.
  def test_several_pids_after_one_p
    a = target('sleep')
    b = target('sleep')
    out, err, status = tracer('-p', a.pid, b.pid, '-e', 'Process.pid')
    assert status.success?, err
    assert_equal ["[#{a.pid}] => #{a.pid}", "[#{b.pid}] => #{b.pid}"], out.lines(chomp: true).sort
    _, err, status = tracer('-p', a.pid, a.pid, '-e', '1')
    assert_equal 2, status.exitstatus
    assert_match(/^tracer: pid #{a.pid} given twice$/, err)
  end

  def test_b_is_backtraces
    t = target('sleep')
    out, err, status = tracer('-p', t.pid, '-b', '1')
    assert status.success?, err
    assert_match(/\Amain \(sleep\)\n  #{Regexp.escape(TARGET)}:\d+:in .(Kernel#)?sleep'\n\z/, out) # 3.4: 'Kernel#sleep'
  end

  # rbtrace's --devmode: always on here, said in one line; rbtrace's -h is a heap dump.
  def test_rbtrace_spellings_get_a_hint
    t = target('sleep')
    out, err, status = tracer('-p', t.pid, '--devmode', '-e', '1')
    assert status.success?, err
    assert_equal "=> 1\n", out
    assert_equal "tracer: --devmode is rbtrace's: tracer always traces the methods defined or " \
                 "redefined while it is attached (ignored)\n", err
    out, err, status = tracer('-p', t.pid, '-h')
    assert status.success?, err
    assert_match(/\AUsage: tracer/, out)
    assert_equal "tracer: -h is --help here; rbtrace's -h (a heap dump) is --heapdump\n", err
    assert_empty tracer('-h')[1], 'no hint for a plain -h'
  end

  # The agent takes at most a day (TRC_SLOW_MS_MAX): more is a usage error here, not a
  # malformed message there.
  def test_slow_threshold_within_the_protocol
    t = target('sleep')
    out, err, status = tracer('-p', t.pid, '-s', '90000000')
    assert_equal 2, status.exitstatus, err
    assert_empty out
    assert_match(/\Atracer: invalid --slow threshold '90000000': expected a whole number from 0 to 86400000$/, err)
    out, err, status = tracer('-p', t.pid, '-s', '86400000', '--duration', '0.2')
    assert status.success?, err
    assert_match(/^\*\*\* attached to process #{t.pid}$/, err)
    assert_empty out
  end
end
