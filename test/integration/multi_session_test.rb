# multi_session_test.rb: several clients on one process at once (test/apps/multi_target.rb):
# each sees what it would alone, a second user of the wrappers or the sampler is told who holds
# them, a fifth session is refused, and one session's detach leaves the others as they were.
require_relative 'helper'

class MultiSessionTest < Minitest::Test
  include TracerTest

  MULTI_TARGET = File.join(ROOT, 'test', 'apps', 'multi_target.rb')
  TICK_LINE = 1 + File.readlines(MULTI_TARGET).index { |l| l.include?('# TICK') }

  def app = target('multi', script: MULTI_TARGET)

  def top(t) = client('-p', t.pid, '--top', 'calls', '--json', '--interval', '0.2')

  # The --top client's tables so far (whole lines only).
  def snapshots(c)
    c.out.each_line.select { |l| l.end_with?("\n") }.map { |l| JSON.parse(l) }
  end

  def ticks(snap)
    snap['rows'].find { |r| r['method'] == 'Burst#tick' }&.fetch('count') || 0
  end

  # Waits for a table of c in which Burst#tick was called at least n times; returns that count.
  def wait_ticks(c, n)
    snap = wait_until(message: "Burst#tick #{n} in the --top table:\n#{c.out.lines.last}\n#{c.err}") do
      s = snapshots(c).last
      s if s && ticks(s) >= n
    end
    ticks(snap)
  end

  # One burst of exactly 10,000 calls, the k-th.
  def burst(t, k)
    t.puts 'burst'
    t.wait_for(/^done #{k}$/)
  end

  def assert_detached(c, t)
    c.signal('INT')
    status = c.finish
    assert status.success?, "exit #{status.exitstatus}: #{c.err}"
    assert_match(/^\*\*\* detached from process #{t.pid}$/, c.err)
  end

  def test_profile_eval_and_backtraces_beside_top
    t = app
    counts = top(t)
    counts.wait_for(/^\{"mode":"calls"/, stream: :out)
    t.puts 'spin'
    t.wait_for(/^spinning$/)
    profile = client('-p', t.pid, '--profile', '--json', '--interval', '0.2', '--hz', '200')
    profile.wait_for(/^\*\*\* attached to process #{t.pid}$/, stream: :err)

    out, err, status = tracer('-p', t.pid, '-e', '6*7')
    assert status.success?, err
    assert_equal "=> 42\n", out
    out, err, status = tracer('-p', t.pid, '--backtraces')
    assert status.success?, err
    assert_match(/^main \(sleep\)\n(  .*\n)*  #{Regexp.escape(MULTI_TARGET)}:\d+:in .idle'$/, out)

    burst(t, 1)
    assert_equal 10_000, wait_ticks(counts, 10_000), 'every call once, with a profile beside it'

    # The profile sees the process as it would alone: the thread that spins.
    wait_until(message: 'a sample in Object#spin') do
      snapshots(profile).last&.fetch('rows')&.any? { |r| r['frame'] == 'Object#spin' }
    end
    profile.signal('INT')
    status = profile.finish
    assert status.success?, "exit #{status.exitstatus}: #{profile.err}"
    table = JSON.parse(profile.out.lines.last)
    assert_equal 'profile', table['mode']
    assert_operator table['events'], :>, 0
    assert_match(/^\*\*\* detached from process #{t.pid}$/, profile.err)

    # Its detach left the counting alone: the next burst is counted exactly too.
    burst(t, 2)
    assert_equal 20_000, wait_ticks(counts, 20_000), 'the --profile detach disturbed --top'
    snap = snapshots(counts).last
    assert_equal 0, snap['lost']
    assert_detached(counts, t)

    # Everything went with the sessions: a trace may take the wrappers now, and has them alone.
    trace = client('-p', t.pid, '-m', 'Burst#tick')
    trace.wait_for(/^\*\*\* attached to process #{t.pid}$/, stream: :err)
    burst(t, 3)
    wait_until(message: "10,000 traced calls:\n#{trace.err}") { trace.out.scan(/^Burst#tick <[\d.]+>$/).size == 10_000 }
    assert_detached(trace, t)
    out, err, status = tracer('-p', t.pid, '-e', 'TracerAgent.stats.values_at(:hooks, :wrapped, :client_pids)')
    assert status.success?, err
    assert_match(/\A=> \[0, 0, \[\d+\]\]\n\z/, out)
  end

  def test_a_second_user_of_the_wrappers_or_the_sampler_is_told_who_holds_them
    t = app
    counts = top(t)
    counts.wait_for(/^\{"mode":"calls"/, stream: :out)
    [%w[-m Burst#tick], %w[-f], %w[--top objects]].each do |mode|
      out, err, status = tracer('-p', t.pid, *mode)
      assert_equal 1, status.exitstatus, err
      assert_empty out
      assert_equal "tracer: process #{t.pid}: its method wrappers and hooks are in use by pid #{counts.pid} " \
                   "(tracer --top calls); tracer can run --profile, -e, -i, backtraces and heap dumps beside it\n", err
    end
    profile = client('-p', t.pid, '--profile', '--json', '--interval', '0.2')
    profile.wait_for(/^\*\*\* attached to process #{t.pid}$/, stream: :err)
    out, err, status = tracer('-p', t.pid, '--profile', 'wall', '--duration', '1')
    assert_equal 1, status.exitstatus, err
    assert_empty out
    assert_equal "tracer: process #{t.pid}: its sampler is in use by pid #{profile.pid} (tracer --profile); " \
                 "tracer can run -m, -f, -s, --top, --metrics, -e, -i, backtraces and heap dumps beside it\n", err

    # The refusals took nothing from the sessions that hold the process.
    burst(t, 1)
    assert_equal 10_000, wait_ticks(counts, 10_000)
    assert_detached(profile, t)
    assert_detached(counts, t)
  end

  # Four sessions at once (two of them evals that wait); a fifth is refused, naming the four
  # clients; once one of them ends, a new one attaches.
  def test_a_fifth_session_is_refused
    t = app
    counts = top(t)
    counts.wait_for(/^\{"mode":"calls"/, stream: :out)
    profile = client('-p', t.pid, '--profile', '--json', '--interval', '0.2')
    profile.wait_for(/^\*\*\* attached to process #{t.pid}$/, stream: :err)
    waits = Array.new(2) { client('-p', t.pid, '-e', 'sleep 0.01 until File.exist?("/nonexistent/never"); 1') }
    # The evals wait, each in a session of its own, until their clients go.
    want = [counts, profile, *waits].map(&:pid).sort
    wait_until(message: 'four sessions') { sessions(t) == 4 }
    out, err, status = tracer('-p', t.pid, '-e', '1')
    assert_equal 1, status.exitstatus, err
    assert_empty out
    pids = err[/\(pids ([\d, ]+)\)/, 1]&.split(', ')&.map(&:to_i)&.sort
    assert_equal want, pids, err
    assert_equal "tracer: process #{t.pid} already has 4 tracer sessions (pids #{err[/\(pids ([\d, ]+)\)/, 1]}): " \
                 "one of them must end before another can attach\n", err

    burst(t, 1)
    assert_equal 10_000, wait_ticks(counts, 10_000)
    waits.each(&:kill)
    out, err, status = tracer('-p', t.pid, '-e', '6*7')
    assert status.success?, err
    assert_equal "=> 42\n", out
    assert_detached(profile, t)
    assert_detached(counts, t)
  end

  # A fork's child has none of its parent's sessions (and can be attached on its own); an exit
  # under two sessions ends both, each told so.
  def test_fork_and_exit_under_two_sessions
    t = app
    counts = top(t)
    counts.wait_for(/^\{"mode":"calls"/, stream: :out)
    profile = client('-p', t.pid, '--profile', '--json', '--interval', '0.2')
    profile.wait_for(/^\*\*\* attached to process #{t.pid}$/, stream: :err)
    t.puts 'fork'
    t.wait_for(/^child \d+$/)
    child = @forked = Integer(t.out[/^child (\d+)$/, 1])
    out, err, status = tracer('-p', child, '-e', 'TracerAgent.stats.values_at(:client_pids, :hooks, :wrapped)')
    assert status.success?, err
    assert_match(/\A=> \[\[\d+\], 0, 0\]\n\z/, out, 'the child serves only the client that asked')

    burst(t, 1)
    assert_equal 10_000, wait_ticks(counts, 10_000), 'the fork took nothing from the parent\'s sessions'
    t.puts 'exit'
    [counts, profile].each do |c|
      status = c.finish
      assert_equal 3, status.exitstatus, c.err
      assert_match(/^\*\*\* process #{t.pid} exited$/, c.err)
    end
  ensure
    Process.kill('KILL', @forked) if @forked rescue nil
  end

  private

  # How many sessions the process serves, asked without a session of its own: the refusal of
  # a fifth client names them all; below four, one more attaches and counts itself out.
  def sessions(t)
    out, err, status = tracer('-p', t.pid, '-e', 'TracerAgent.stats[:client_pids].size')
    return 4 if !status.success? && err =~ /already has 4 tracer sessions/

    out[/\A=> (\d+)$/, 1].to_i - 1
  end
end
