# signal_test.rb: the app's own SIGURG trap keeps working, and no EINTR reaches app code.
require_relative 'helper'

class SignalTest < Minitest::Test
  include TracerTest

  def test_trap_set_after_the_agent_still_runs
    assert_trap_and_agent_both_work
  end

  def test_trap_set_before_the_agent_still_runs
    assert_trap_and_agent_both_work(env: { 'RUBYLIB' => File.join(ROOT, 'lib') }, agent: false)
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

  private

  def assert_trap_and_agent_both_work(env: {}, **opts)
    Dir.mktmpdir do |dir|
      file = File.join(dir, 'trap')
      t = target('trap', env: env.merge('TRAP_FILE' => file), **opts)
      out, err, status = tracer('-p', t.pid, '-e', '1 + 1')
      assert status.success?, err
      assert_equal "=> 2\n", out
      wait_until(message: 'the app trap ran') { File.exist?(file) && File.read(file).to_i.positive? }
      t.kill # it writes the file every 10 ms: gone before the directory is removed
    end
  end
end
