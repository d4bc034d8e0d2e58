# signal_test.rb: the app's own SIGURG trap keeps working, and no EINTR reaches app code.
require_relative 'helper'

class SignalTest < Minitest::Test
  include TracerTest

  def test_app_trap_still_runs_and_agent_still_answers
    Dir.mktmpdir do |dir|
      file = File.join(dir, 'trap')
      t = target('trap', env: { 'TRAP_FILE' => file })
      out, err, status = tracer('-p', t.pid, '-e', '1 + 1')
      assert status.success?, err
      assert_equal "=> 2\n", out
      wait_until(message: 'app trap ran') { File.exist?(file) && File.read(file).to_i.positive? }
    end
  end

  def test_handler_installed_before_the_agent_still_runs
    Dir.mktmpdir do |dir|
      file = File.join(dir, 'trap')
      t = target('trap_first', env: { 'TRAP_FILE' => file, 'RUBYLIB' => File.join(ROOT, 'lib') }, agent: false)
      out, err, status = tracer('-p', t.pid, '-e', '1 + 1')
      assert status.success?, err
      assert_equal "=> 2\n", out
      wait_until(message: 'earlier trap ran') { File.exist?(file) && File.read(file).to_i.positive? }
    end
  end

  def test_no_eintr_in_blocking_reads_while_signalled_1000_times
    t = target('blockread')
    1000.times { Process.kill('URG', t.pid) }
    out, err, status = tracer('-p', t.pid, '-e', '1 + 1')
    assert status.success?, err
    assert_equal "=> 2\n", out
    refute_match(/EINTR/, t.out)
    assert t.alive?
  end
end
